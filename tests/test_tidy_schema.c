// test_tidy_schema.c: the tidy CSV's fixed schema (bench/driver/tidy_columns.def). Every
// sweep axis of every program (its --benchmark_list_tests names), every counter name the
// sources pass to harness_counter as a literal and every context key a program adds is in
// the schema; a real program's tidy CSV and reps CSV have exactly the schema's header,
// whichever rows it ran (test_harness shows that an axis, counter or key outside the schema
// is kept after the schema's columns); the documentation states the schema's version. (Every program test that reads a CSV through
// test_bench_csv also fails on a column outside the schema.)
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>

#include <cmocka.h>

#include "tests/support.h"

static const char *const kParams[] = {
#define TIDY_PARAM(name) #name,
#define TIDY_COUNTER(name)
#define TIDY_CONTEXT(name)
#include "bench/driver/tidy_columns.def"
#undef TIDY_PARAM
#undef TIDY_COUNTER
#undef TIDY_CONTEXT
};
static const char *const kCounters[] = {
#define TIDY_PARAM(name)
#define TIDY_COUNTER(name) #name,
#define TIDY_CONTEXT(name)
#include "bench/driver/tidy_columns.def"
#undef TIDY_PARAM
#undef TIDY_COUNTER
#undef TIDY_CONTEXT
};
static const char *const kContext[] = {
#define TIDY_PARAM(name)
#define TIDY_COUNTER(name)
#define TIDY_CONTEXT(name) #name,
#include "bench/driver/tidy_columns.def"
#undef TIDY_PARAM
#undef TIDY_COUNTER
#undef TIDY_CONTEXT
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char kFixed[] = "practice,variant,role,timing,params,status,reason,repetitions,iterations,time,cpu_time,"
                             "time_unit,time_median,time_stddev,time_min,time_max,time_cv,cache,precision_target,"
                             "precision_reached,stop";

static bool listed(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return true;
    return false;
}

// The tidy CSV header the schema prescribes (malloc'd, no newline).
static char *schema_header(void)
{
    size_t size = 65536, used = 0;
    char *h = malloc(size);
    assert_non_null(h);
    used += (size_t)snprintf(h + used, size - used, "%s", kFixed);
    for (size_t i = 0; i < COUNT(kParams); i++) used += (size_t)snprintf(h + used, size - used, ",param_%s", kParams[i]);
    for (size_t i = 0; i < COUNT(kCounters); i++) used += (size_t)snprintf(h + used, size - used, ",%s", kCounters[i]);
    for (size_t i = 0; i < COUNT(kContext); i++) used += (size_t)snprintf(h + used, size - used, ",ctx_%s", kContext[i]);
    assert_true(used < size);
    return h;
}

// The first line of text, as a malloc'd string.
static char *first_line(const char *text)
{
    const char *nl = strchr(text, '\n');
    size_t n = nl ? (size_t)(nl - text) : strlen(text);
    char *line = malloc(n + 1);
    assert_non_null(line);
    memcpy(line, text, n);
    line[n] = '\0';
    return line;
}

// No two names of the schema are the same column.
static void test_schema_names_unique(void **state)
{
    (void)state;
    char *h = schema_header();
    int columns = 1;
    for (const char *p = h; *p; p++) columns += *p == ',';
    for (size_t i = 0; i < COUNT(kCounters); i++)
        if (strncmp(kCounters[i], "param_", 6) == 0 || strncmp(kCounters[i], "ctx_", 4) == 0)
            fail_msg("counter %s reads as an axis or a context key", kCounters[i]);
    for (char *a = strtok(h, ","); a; a = strtok(NULL, ",")) {
        int seen = 0;
        for (char *b = h; b < a; b += strlen(b) + 1) seen += strcmp(a, b) == 0;
        if (seen) fail_msg("column %s twice in the schema", a);
    }
    assert_true(columns > 200);
    free(h);
}

// Google Benchmark's own parts of an instance name (after the harness's axes).
static bool is_google_benchmark_suffix(const char *name)
{
    static const char *const gb[] = {"min_time", "min_warmup_time", "iterations", "repeats", "threads"};
    return listed(gb, COUNT(gb), name);
}

// Every axis of every program's instances (names practice/variant/axis:value/...) is a
// TIDY_PARAM.
static void test_every_axis_in_schema(void **state)
{
    (void)state;
    DIR *d = opendir(test_build_dir());
    assert_non_null(d);
    int programs = 0, axes = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "bench_", 6) != 0 || strchr(e->d_name, '.')) continue;
        char *list = test_bench_list(e->d_name);
        if (!list) fail_msg("%s --benchmark_list_tests failed", e->d_name);
        programs++;
        for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
            char *slash = strchr(line, '/');
            for (char *seg = slash ? strchr(slash + 1, '/') : NULL; seg; seg = strchr(seg + 1, '/')) {
                char name[64];
                size_t n = strcspn(seg + 1, ":/");
                if (seg[1 + n] != ':' || n >= sizeof name) continue;
                memcpy(name, seg + 1, n);
                name[n] = '\0';
                if (is_google_benchmark_suffix(name)) continue;
                axes++;
                if (!listed(kParams, COUNT(kParams), name))
                    fail_msg("%s: axis '%s' (%s) is not a TIDY_PARAM of bench/driver/tidy_columns.def", e->d_name,
                             name, line);
            }
        }
        free(list);
    }
    closedir(d);
    assert_true(programs >= 15);
    assert_true(axes > 0);
}

// Each name the command prints (one a line) is in names[]; returns how many it printed.
static int names_in_schema(const char *command, const char *const *names, size_t n, const char *kind)
{
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    assert_int_equal(test_run("cd '%s' && %s >'%s/names.txt'", test_suite_root(), command, tmp), 0);
    char *text = test_read_in(tmp, "names.txt");
    assert_non_null(text);
    int count = 0;
    for (char *name = strtok(text, "\n"); name; name = strtok(NULL, "\n"), count++)
        if (!listed(names, n, name)) fail_msg("%s '%s' is not in bench/driver/tidy_columns.def", kind, name);
    free(text);
    test_remove_tree(tmp);
    free(tmp);
    return count;
}

// Every counter name given to harness_counter as a literal, and every context key a
// program adds, is in the schema.
static void test_every_counter_and_key_in_schema(void **state)
{
    (void)state;
    int counters = names_in_schema(
        "grep -rhoE 'harness_counter\\([^,]+, *\"[a-z_0-9]+\"' bench dist loaders --include=*.c --include=*.cc "
        "--include=*.cu | sed -E 's/.*\"([a-z_0-9]+)\"$/\\1/' | sort -u",
        kCounters, COUNT(kCounters), "counter");
    assert_true(counters > 100);
    int keys = names_in_schema(
        "grep -rhoE 'harness_add_context\\(\"[a-z_0-9]+\"|\\.context = \"[a-z_0-9]+\"' bench dist loaders "
        "--include=*.c | sed -E 's/.*\"([a-z_0-9]+)\".*/\\1/' | sort -u",
        kContext, COUNT(kContext), "context key");
    assert_true(keys >= 3);
}

// A real program's CSVs: the tidy header is the schema's, the reps header its params and
// counters between the fixed columns and `sequence`.
static void test_program_header_is_schema(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_zero_grad",
                               "--benchmark_filter='zero_grad/memset/preset:tiny/' "
                               "--benchmark_min_time=0.01 --benchmark_repetitions=2 --harness_precision=0");
    assert_non_null(csv);
    char *got = first_line(csv), *want = schema_header();
    if (strcmp(got, want) != 0) fail_msg("tidy header differs from the schema:\n got  %s\n want %s", got, want);
    free(got);
    free(want);
    free(csv);
}

static void test_reps_header_is_schema(void **state)
{
    (void)state;
    const char *dir = test_dir;
    int rc = test_run("'%s/bench_zero_grad' --benchmark_filter='zero_grad/memset/preset:tiny/' "
                      "--benchmark_min_time=0.01 --benchmark_repetitions=2 --harness_precision=0 "
                      "--harness_csv='%s/out.csv' >'%s/out.txt' 2>&1",
                      test_build_dir(), dir, dir);
    assert_int_equal(rc, 0);
    char *reps = test_read_in(dir, "out.reps.csv");
    assert_non_null(reps);
    char want[65536];
    size_t used = (size_t)snprintf(want, sizeof want,
                                   "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations");
    for (size_t i = 0; i < COUNT(kParams); i++) used += (size_t)snprintf(want + used, sizeof want - used, ",param_%s", kParams[i]);
    for (size_t i = 0; i < COUNT(kCounters); i++) used += (size_t)snprintf(want + used, sizeof want - used, ",%s", kCounters[i]);
    snprintf(want + used, sizeof want - used, ",sequence");
    char *got = first_line(reps);
    if (strcmp(got, want) != 0) fail_msg("reps header differs from the schema:\n got  %s\n want %s", got, want);
    assert_true(test_count_lines(reps) >= 3);
    free(got);
    free(reps);
}

// The documentation states the schema version the harness writes.
static void test_docs_state_version(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/results-format.md", test_suite_root());
    char *doc = test_read_file(path, NULL);
    assert_non_null(doc);
    char phrase[64];
    snprintf(phrase, sizeof phrase, "schema version %d", TIDY_SCHEMA_VERSION);
    if (!strstr(doc, phrase)) fail_msg("docs/results-format.md does not say \"%s\"", phrase);
    assert_non_null(strstr(doc, "bench/driver/tidy_columns.def"));
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_names_unique),
        cmocka_unit_test(test_every_axis_in_schema),
        cmocka_unit_test(test_every_counter_and_key_in_schema),
        cmocka_unit_test(test_program_header_is_schema),
        cmocka_unit_test_setup_teardown(test_reps_header_is_schema, test_setup_dir, test_teardown_dir),
        cmocka_unit_test(test_docs_state_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
