// test_docs_flags.c: every flag default docs/flags.md states is the one the program's --help
// prints. The suite-wide options (`--loader-timeout`, `--max-image-pixels`: "(default X")
// against one program's --help; each row of the per-program table ("| `bench_x` | `--opt=V`
// (X)...") against bench_x's --help, whose option lines end "[X]" (or "[X]; env NAME").
// A default the docs give in words must be one of the phrases below, computed here as the
// program computes it. And every option a program's --help lists has its row in the table
// (a new option is documented with its default), as do the suite-wide ones.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support.h"

// The options every program on the driver has (practice.c), documented in the first table.
static const char *const suite_options[] = {"loader-timeout", "max-image-pixels", "practice_selftest"};

static char *help_of(const char *program)
{
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    int rc = test_run("'%s/%s' --help >'%s/help.txt' 2>&1", test_build_dir(), program, tmp);
    char *text = test_read_in(tmp, "help.txt");
    test_remove_tree(tmp);
    free(tmp);
    if (rc != 0 || !text) fail_msg("%s --help: exit status %d", program, rc);
    return text;
}

// The default --help prints for option `name` ("  --name=... [DEFAULT]..."), or false.
static bool help_default(const char *help, const char *name, char *out, size_t size)
{
    char key[128];
    snprintf(key, sizeof key, "\n  --%s=", name);
    const char *line = strstr(help, key);
    if (!line) return false;
    const char *end = strchr(line + 1, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char *open = NULL;
    for (const char *c = line; c < line + len; c++)
        if (*c == '[') open = c;  // the last bracket of the line: the default
    const char *close = open ? memchr(open, ']', (size_t)(line + len - open)) : NULL;
    if (!open || !close) return false;
    snprintf(out, size, "%.*s", (int)(close - open - 1), open + 1);
    return true;
}

// A default the docs state in words, as the program computes it; NULL when text is a value.
static const char *computed_default(const char *text, char *buf, size_t size)
{
    if (strcmp(text, "the CPU count") == 0) {  // bench_workers' --workers_max, "at most 32"
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        snprintf(buf, size, "%ld", cores < 1 ? 1 : cores > 32 ? 32 : cores);
        return buf;
    }
    return NULL;
}

// The default written after an option in the docs: "(X)", "(X; ...)", "(X: ...)",
// "(X, ...)" or "(default X...)": X, trimmed.
static void doc_default(const char *open_paren, char *out, size_t size)
{
    const char *p = open_paren + 1;
    if (strncmp(p, "default ", 8) == 0) p += 8;
    size_t n = strcspn(p, ");:,");
    while (n > 0 && p[n - 1] == ' ') n--;
    snprintf(out, size, "%.*s", (int)n, p);
}

static void expect_same(const char *program, const char *option, const char *doc, const char *help)
{
    char buf[64];
    const char *want = computed_default(doc, buf, sizeof buf);
    printf("%s --%s: docs '%s'%s%s, --help [%s]\n", program, option, doc, want ? " = " : "", want ? want : "", help);
    if (strcmp(want ? want : doc, help) != 0)
        fail_msg("docs/flags.md says %s --%s defaults to '%s'; its --help says [%s]", program, option, doc, help);
}

static char *flags_doc(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/flags.md", test_suite_root());
    char *text = test_read_file(path, NULL);
    assert_non_null(text);
    return text;
}

// The table row of the docs that starts with `start` (a leading newline is not copied), copied
// into row, or false.
static bool doc_row(const char *doc, const char *start, char *row, size_t size)
{
    const char *at = strstr(doc, start);
    if (!at) return false;
    if (*at == '\n') at++;
    size_t n = strcspn(at, "\n");
    snprintf(row, size, "%.*s", (int)n, at);
    return true;
}

// The suite's own options: their stated defaults against bench_zero_grad's --help (every
// program on the driver declares them in one place), and every one has a row.
static void test_suite_option_defaults_match_help(void **state)
{
    (void)state;
    char *doc = flags_doc(), *help = help_of("bench_zero_grad");
    int checked = 0;
    for (size_t i = 0; i < sizeof suite_options / sizeof suite_options[0]; i++) {
        char start[96], row[4096], d[128], h[128];
        snprintf(start, sizeof start, "| `--%s=", suite_options[i]);
        if (!doc_row(doc, start, row, sizeof row)) fail_msg("docs/flags.md has no row for --%s", suite_options[i]);
        assert_true(help_default(help, suite_options[i], h, sizeof h));
        const char *paren = strstr(row, "(default ");
        if (!paren) continue;  // a row that states no default (practice_selftest: its values)
        doc_default(paren, d, sizeof d);
        expect_same("every program", suite_options[i], d, h);
        checked++;
    }
    assert_int_equal(checked, 2);
    free(doc);
    free(help);
}

// The options of a program's --help beyond the suite's ("Options of this program"), as
// "--name=" strings one after another in out; their count.
static int own_options(const char *help, char *out, size_t size)
{
    int count = 0;
    out[0] = '\0';
    const char *opts = strstr(help, "\nOptions of this program");
    const char *end = opts ? strstr(opts, "\nSweep axes") : NULL;
    if (!end && opts) end = strstr(opts, "\nGoogle Benchmark flags");
    for (const char *l = opts ? strstr(opts, "\n  --") : NULL; l && (!end || l < end); l = strstr(l + 1, "\n  --")) {
        char option[96];
        if (sscanf(l, "\n  --%95[^= ]", option) != 1) continue;
        bool suite = false;
        for (size_t i = 0; i < sizeof suite_options / sizeof suite_options[0]; i++)
            suite = suite || strcmp(option, suite_options[i]) == 0;
        if (suite) continue;
        size_t used = strlen(out);
        snprintf(out + used, size - used, "`--%s= ", option);
        count++;
    }
    return count;
}

// Every program in the build folder: each option its --help lists (beyond the suite's) in
// its row of the table, with the default --help prints; and every option the row documents
// one --help lists.
static void test_program_option_defaults_match_help(void **state)
{
    (void)state;
    char *doc = flags_doc();
    DIR *dir = opendir(test_build_dir());
    assert_non_null(dir);
    int programs = 0, checked = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (strncmp(e->d_name, "bench_", 6) != 0 || strchr(e->d_name, '.')) continue;
        char *help = help_of(e->d_name), options[4096], start[300], row[8192];
        int own = own_options(help, options, sizeof options);
        snprintf(start, sizeof start, "\n| `%s` |", e->d_name);
        bool has_row = doc_row(doc, start, row, sizeof row);
        if (own > 0 && !has_row)
            fail_msg("%s --help lists options (%s) and docs/flags.md has no row for it", e->d_name, options);
        if (!has_row) {
            free(help);
            continue;
        }
        programs++;
        // every option --help lists is documented
        for (char *o = strtok(options, " "); o; o = strtok(NULL, " "))
            if (!strstr(row, o)) fail_msg("%s --help lists %s..., which docs/flags.md does not", e->d_name, o + 1);
        // every documented option, and its default
        for (const char *o = strstr(row, "`--"); o; o = strstr(o + 1, "`--")) {
            char option[96], d[128], h[128], suite_flag[112];
            if (sscanf(o, "`--%95[^=`]", option) != 1) continue;
            // an example of a suite flag in the row (--harness_axis=...) is not an option
            snprintf(suite_flag, sizeof suite_flag, "\n  --%s=", option);
            const char *found = strstr(help, suite_flag), *opts_at = strstr(help, "\nOptions of this program");
            if (found && opts_at && found < opts_at) continue;
            const char *tick = strchr(o + 1, '`');
            if (!help_default(help, option, h, sizeof h))
                fail_msg("docs/flags.md documents %s --%s, which its --help does not list", e->d_name, option);
            if (!tick || strncmp(tick, "` (", 3) != 0)
                fail_msg("%s --%s: no default in docs/flags.md", e->d_name, option);
            doc_default(tick + 2, d, sizeof d);
            expect_same(e->d_name, option, d, h);
            checked++;
        }
        free(help);
    }
    closedir(dir);
    printf("%d programs with options of their own, %d option defaults checked\n", programs, checked);
    assert_true(programs > 0);
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suite_option_defaults_match_help),
        cmocka_unit_test(test_program_option_defaults_match_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
