// test_docs_links.c: every relative link in README.md and docs/**/*.md resolves to a file
// or folder inside the repository. http(s)/mailto links and pure #anchors are not checked;
// a #fragment or ?query is stripped from a file link. Links in fenced code blocks and
// inline code spans are not links. A negative control builds a small tree with broken
// links and checks that the checker reports exactly those.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "tests/support.h"

typedef struct LinkReport {
    int checked;    // relative links resolved
    int broken;     // of those, how many did not resolve
    char text[8192]; // "file:line: target (why)" per broken link
} LinkReport;

static void report_broken(LinkReport *r, const char *file, int line, const char *target,
                          const char *why)
{
    size_t used = strlen(r->text);
    r->broken++;
    if (used < sizeof r->text)
        snprintf(r->text + used, sizeof r->text - used, "%s:%d: %s (%s)\n", file, line,
                 target, why);
}

static bool is_external(const char *t)
{
    return strncmp(t, "http://", 7) == 0 || strncmp(t, "https://", 8) == 0 ||
           strncmp(t, "mailto:", 7) == 0;
}

// Resolves one link target written in root/rel (rel: the Markdown file, relative to root).
static void check_target(const char *root, const char *rel, int line, const char *raw,
                         LinkReport *r)
{
    char t[PATH_MAX];
    size_t n = 0;
    if (raw[0] == '\0' || raw[0] == '#' || is_external(raw)) return;
    // Strip #fragment and ?query; decode %XX.
    for (const char *p = raw; *p && *p != '#' && *p != '?' && n + 1 < sizeof t; p++) {
        if (p[0] == '%' && p[1] && p[2]) {
            char hex[3] = {p[1], p[2], 0};
            t[n++] = (char)strtol(hex, NULL, 16);
            p += 2;
        } else {
            t[n++] = *p;
        }
    }
    t[n] = '\0';
    if (n == 0) return;
    r->checked++;

    char dir[PATH_MAX], path[PATH_MAX * 3];
    snprintf(dir, sizeof dir, "%s", rel);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0'; else snprintf(dir, sizeof dir, ".");
    if (t[0] == '/')
        snprintf(path, sizeof path, "%s%s", root, t);
    else
        snprintf(path, sizeof path, "%s/%s/%s", root, dir, t);

    struct stat st;
    char real[PATH_MAX], real_root[PATH_MAX];
    if (stat(path, &st) != 0 || !realpath(path, real)) {
        report_broken(r, rel, line, raw, "no such file");
        return;
    }
    if (!realpath(root, real_root)) {
        report_broken(r, rel, line, raw, "repository root not found");
        return;
    }
    size_t lr = strlen(real_root);
    if (strncmp(real, real_root, lr) != 0 || (real[lr] != '/' && real[lr] != '\0'))
        report_broken(r, rel, line, raw, "outside the repository");
}

// Copies a link target starting at p (just after "](" or "]: ") into out; returns the
// position after it. Handles <angle-bracket> targets and an optional "title".
static const char *read_target(const char *p, char *out, size_t size)
{
    size_t n = 0;
    while (*p == ' ') p++;
    if (*p == '<') {
        for (p++; *p && *p != '>' && *p != '\n'; p++)
            if (n + 1 < size) out[n++] = *p;
    } else {
        int depth = 0;
        for (; *p && *p != '\n' && *p != ' '; p++) {
            if (*p == '(') depth++;
            if (*p == ')' && depth-- == 0) break;
            if (n + 1 < size) out[n++] = *p;
        }
    }
    out[n] = '\0';
    return p;
}

// Checks every link of one Markdown file (root/rel).
static void check_file(const char *root, const char *rel, LinkReport *r)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    char *text = test_read_file(path, NULL);
    if (!text) {
        report_broken(r, rel, 0, rel, "cannot read");
        return;
    }
    bool fenced = false;
    int line = 0;
    for (char *ln = text; ln && *ln; ) {
        char *next = strchr(ln, '\n');
        if (next) *next = '\0';
        line++;
        const char *s = ln;
        while (*s == ' ') s++;
        if (strncmp(s, "```", 3) == 0 || strncmp(s, "~~~", 3) == 0) {
            fenced = !fenced;
        } else if (!fenced) {
            char target[PATH_MAX];
            // Reference-style definition: [label]: target
            if (s[0] == '[') {
                const char *close = strstr(s, "]:");
                if (close && !memchr(s, '`', (size_t)(close - s))) {
                    read_target(close + 2, target, sizeof target);
                    check_target(root, rel, line, target, r);
                }
            }
            // Inline links and images, outside code spans.
            size_t ticks = 0; // length of the backtick run that opened a code span
            for (const char *p = ln; *p; p++) {
                if (*p == '`') {
                    size_t run = 1;
                    while (p[run] == '`') run++;
                    if (ticks == 0) ticks = run;
                    else if (run == ticks) ticks = 0;
                    p += run - 1;
                } else if (ticks == 0 && p[0] == ']' && p[1] == '(') {
                    p = read_target(p + 2, target, sizeof target);
                    check_target(root, rel, line, target, r);
                    if (!*p) break;
                }
            }
        }
        ln = next ? next + 1 : NULL;
    }
    free(text);
}

// Checks every *.md under root/dir (recursively; dir relative to root).
static void check_tree(const char *root, const char *dir, LinkReport *r)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char rel[PATH_MAX], full[PATH_MAX * 3];
        snprintf(rel, sizeof rel, "%s/%s", dir, e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, rel);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        size_t len = strlen(e->d_name);
        if (S_ISDIR(st.st_mode))
            check_tree(root, rel, r);
        else if (len > 3 && strcmp(e->d_name + len - 3, ".md") == 0)
            check_file(root, rel, r);
    }
    closedir(d);
}

// README.md and docs/**/*.md of a tree.
static void check_docs(const char *root, LinkReport *r)
{
    memset(r, 0, sizeof *r);
    check_file(root, "README.md", r);
    check_tree(root, "docs", r);
}

static void test_repository_links_resolve(void **state)
{
    (void)state;
    static LinkReport r;
    check_docs(test_suite_root(), &r);
    if (r.broken) fprintf(stderr, "broken links:\n%s", r.text);
    assert_int_equal(r.broken, 0);
    // The README links a page per practice and the docs link each other: a parser that
    // found no links would pass vacuously.
    printf("checked %d relative links\n", r.checked);
    assert_true(r.checked >= 40);
}

// Every practice page and topic page under docs/ is reached from README.md or docs/.
static void test_docs_pages_exist(void **state)
{
    (void)state;
    static const char *const pages[] = {
        "docs/practices/amp.md", "docs/practices/batch_size.md",
        "docs/practices/cuda_graphs.md", "docs/practices/cudnn_benchmark.md",
        "docs/practices/ddp.md", "docs/practices/fusion.md", "docs/practices/kernels.md",
        "docs/practices/layout.md", "docs/practices/num_workers.md",
        "docs/practices/on_device.md", "docs/practices/pin_memory.md",
        "docs/practices/sync.md", "docs/practices/zero_grad.md",
        "docs/practices/cpu_threads.md", "docs/practices/allocator.md",
        "docs/practices/debug_apis.md", "docs/practices/fused_optimizer.md",
        "docs/practices/prealloc.md", "docs/practices/tensor_cores.md",
        "docs/practices/attention.md", "docs/transformer.md",
    };
    char *readme = test_read_in(test_suite_root(), "README.md");
    assert_non_null(readme);
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", test_suite_root(), pages[i]);
        if (!test_file_at_least(path, 1)) fail_msg("missing %s", pages[i]);
        char link[128];
        snprintf(link, sizeof link, "](%s)", pages[i]);
        if (!strstr(readme, link)) fail_msg("README.md does not link %s", pages[i]);
    }
    free(readme);
}

// Negative control: a tree with two broken links among good, external, anchor and
// code-span ones; the checker must report exactly the two.
static void test_broken_links_are_caught(void **state)
{
    (void)state;
    static LinkReport r;
    assert_int_equal(test_run("mkdir -p '%s/docs/sub' '%s/results/x'", test_dir, test_dir), 0);
    assert_true(test_write_file(test_dir, "results/x/chart.png", "png"));
    assert_true(test_write_file(test_dir, "docs/ok.md", "ok\n"));
    assert_true(test_write_file(test_dir, "README.md",
        "# t\n"
        "![chart](results/x/chart.png) [ok](docs/ok.md#a-section) [dir](results/x/)\n"
        "[web](https://example.com/none.md) [anchor](#nowhere) `[code](nope.md)`\n"
        "```\n[fenced](nope.md)\n```\n"
        "[broken](docs/missing.md#frag)\n"
        "[ref]: docs/ok.md\n"));
    assert_true(test_write_file(test_dir, "docs/sub/page.md",
        "[up](../../README.md) [sibling](../ok.md)\n"
        "see [the chart](../../results/x/nothing.png \"title\")\n"));
    check_docs(test_dir, &r);
    printf("%s", r.text);
    assert_int_equal(r.broken, 2);
    assert_non_null(strstr(r.text, "README.md:7: docs/missing.md#frag"));
    assert_non_null(strstr(r.text, "docs/sub/page.md:2: ../../results/x/nothing.png"));
    assert_int_equal(r.checked, 8);

    // A link leaving the repository is broken even when the file exists.
    assert_true(test_write_file(test_dir, "docs/ok.md", "[out](../../)\n"));
    check_docs(test_dir, &r);
    assert_int_equal(r.broken, 3);
    assert_non_null(strstr(r.text, "outside the repository"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repository_links_resolve),
        cmocka_unit_test(test_docs_pages_exist),
        cmocka_unit_test_setup_teardown(test_broken_links_are_caught, test_setup_dir,
                                        test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
