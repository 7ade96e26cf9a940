// test_bench_allocator.c: the allocator practice (build/bench_allocator). It lists glibc
// (baseline), jemalloc and tcmalloc (tuned) for both families; the tiny training rows and
// the loader rows (over the generated tiny dataset) are ok for glibc and for each library
// installed (the Debian paths: there they must run; elsewhere a row may instead be a skip
// naming the package), with the allocator in effect (in_effect 1) and the check passed
// (wrong 0, a baseline that moved); --practice_selftest=frozen, half_lr and drop_step fail
// every tuned training row, and frozen every tuned loader row, while glibc stays ok; an empty BENCH_ALLOCATOR_DIR makes the tuned rows visible skips naming the
// Debian packages (exit 0, glibc still ok); and a library that is not an allocator under
// jemalloc's name fails its row: the practice was not in effect.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support.h"

#define TINY_ARGS "--benchmark_filter='^allocator/.*preset:tiny/' --benchmark_min_time=0.01"
#define LOADER_ARGS "--benchmark_filter='^allocator_loader/' --benchmark_min_time=0.01"

typedef struct {
    const char *variant;
    const char *debian_path; // where Debian's package puts it
    const char *package;
} Library;

static const Library libraries[] = {
    {"jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "libjemalloc2"},
    {"tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"},
};
#define NLIB (sizeof libraries / sizeof libraries[0])

static bool installed(const Library *lib) { return access(lib->debian_path, R_OK) == 0; }

static const Library *library_of(const char *variant)
{
    for (size_t i = 0; i < NLIB; i++)
        if (strcmp(libraries[i].variant, variant) == 0) return &libraries[i];
    return NULL;
}

static double field_value(const char *csv, const char *line, const char *name)
{
    char text[64];
    test_csv_named_field(csv, line, name, text, sizeof text);
    return atof(text);
}

static void test_lists_families(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_allocator");
    assert_non_null(list);
    const char *const want[] = {"allocator/glibc/preset:tiny/", "allocator/jemalloc/preset:tiny/",
                                "allocator/tcmalloc/preset:mlp/", "allocator_loader/glibc/batch:64/",
                                "allocator_loader/jemalloc/batch:64/", "allocator_loader/tcmalloc/batch:64/"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(list, want[i])) fail_msg("the listing has no %s", want[i]);
    free(list);
}

// Every row of csv: glibc ok; a tuned row ok where its library is installed, else ok or a
// skip naming the package. Ok rows: in effect, checked, with their memory. Returns the ok
// tuned rows.
static int assert_rows(const char *csv, bool loader)
{
    int glibc = 0, tuned_ok = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char status[32], variant[32], reason[512];
        test_csv_named_field(csv, line + 1, "status", status, sizeof status);
        test_csv_named_field(csv, line + 1, "variant", variant, sizeof variant);
        test_csv_named_field(csv, line + 1, "reason", reason, sizeof reason);
        const Library *lib = library_of(variant);
        printf("%s: %s %s\n", variant, status, reason);
        if (lib && strcmp(status, "skipped") == 0 && !installed(lib)) {
            assert_non_null(strstr(reason, lib->package));
            continue;
        }
        assert_string_equal(status, "ok");
        glibc += !lib;
        tuned_ok += lib != NULL;
        assert_true(field_value(csv, line + 1, "in_effect") == 1);
        assert_true(field_value(csv, line + 1, "peak_rss_mib") > 0);
        assert_true(field_value(csv, line + 1, "images_per_second") > 0);
        char wrong[32];
        test_csv_named_field(csv, line + 1, "wrong", wrong, sizeof wrong);
        assert_string_equal(wrong, "0");
        if (loader) {
            assert_true(field_value(csv, line + 1, "workers_peak_rss_mib") > 0);
            assert_true(field_value(csv, line + 1, "wrong_epochs") == 0);
        } else {
            assert_true(field_value(csv, line + 1, "check_baseline_moved") > 1e-6);
        }
    }
    assert_int_equal(glibc, 1);
    return tuned_ok;
}

static int installed_count(void)
{
    int n = 0;
    for (size_t i = 0; i < NLIB; i++) n += installed(&libraries[i]);
    return n;
}

static void test_tiny_rows_in_effect_and_checked(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_allocator", TINY_ARGS);
    assert_non_null(csv);
    assert_true(assert_rows(csv, false) >= installed_count());
    free(csv);
}

static void test_loader_rows_in_effect_and_checked(void **state)
{
    (void)state;
    setenv("BENCH_ALLOCATOR_DATASET", "tiny", 1);
    char *csv = test_bench_csv("bench_allocator", LOADER_ARGS);
    unsetenv("BENCH_ALLOCATOR_DATASET");
    assert_non_null(csv);
    assert_true(assert_rows(csv, true) >= installed_count());
    free(csv);
}

// The tuned variants whose library is installed (the self-test needs rows that run).
static int installed_variants(const char **out)
{
    int n = 0;
    for (size_t i = 0; i < NLIB; i++)
        if (installed(&libraries[i])) out[n++] = libraries[i].variant;
    return n;
}

static void test_selftest_fails_tuned_rows(void **state)
{
    (void)state;
    const char *tuned[NLIB];
    int n = installed_variants(tuned);
    if (n == 0) {
        printf("skipped: neither libjemalloc2 nor libtcmalloc-minimal4 is installed\n");
        skip();
    }
    const char *const modes[] = {"frozen", "half_lr", "drop_step"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        assert_true(test_selftest_fails("bench_allocator", TINY_ARGS, modes[i], "allocator", "glibc", tuned, n,
                                        "the parameters after 3 steps with") >= n);
    setenv("BENCH_ALLOCATOR_DATASET", "tiny", 1);
    assert_true(test_selftest_fails("bench_allocator", LOADER_ARGS, "frozen", "allocator_loader", "glibc", tuned, n,
                                    "the check epoch's batches with") >= n);
    unsetenv("BENCH_ALLOCATOR_DATASET");
}

static void test_missing_library_is_a_visible_skip(void **state)
{
    (void)state;
    setenv("BENCH_ALLOCATOR_DIR", test_dir, 1);  // an empty folder
    char *csv = test_bench_csv("bench_allocator", TINY_ARGS);
    unsetenv("BENCH_ALLOCATOR_DIR");
    assert_non_null(csv);  // exit 0
    int skips = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char status[32], variant[32], reason[512];
        test_csv_named_field(csv, line + 1, "status", status, sizeof status);
        test_csv_named_field(csv, line + 1, "variant", variant, sizeof variant);
        test_csv_named_field(csv, line + 1, "reason", reason, sizeof reason);
        const Library *lib = library_of(variant);
        printf("%s: %s %s\n", variant, status, reason);
        if (!lib) {
            assert_string_equal(status, "ok");
            continue;
        }
        assert_string_equal(status, "skipped");
        assert_non_null(strstr(reason, "install the Debian package"));
        assert_non_null(strstr(reason, lib->package));
        skips++;
    }
    assert_int_equal(skips, NLIB);
    free(csv);
}

// A library that is no allocator, preloaded under jemalloc's name: the row fails.
static void test_not_in_effect_fails(void **state)
{
    (void)state;
    const char *const libm[] = {"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                                "/lib64/libm.so.6", "/usr/lib64/libm.so.6"};
    const char *found = NULL;
    for (size_t i = 0; i < sizeof libm / sizeof libm[0] && !found; i++)
        if (access(libm[i], R_OK) == 0) found = libm[i];
    if (!found) {
        printf("skipped: no libm.so.6 to stand in for an allocator\n");
        skip();
    }
    assert_int_equal(test_run("cp '%s' '%s/libjemalloc.so.2'", found, test_dir), 0);
    setenv("BENCH_ALLOCATOR_DIR", test_dir, 1);
    int status = -1;
    char *csv = test_bench_csv_exit("bench_allocator",
                                    "--benchmark_filter='^allocator/jemalloc/preset:tiny/' --benchmark_min_time=0.01",
                                    &status);
    unsetenv("BENCH_ALLOCATOR_DIR");
    assert_non_null(csv);
    assert_int_equal(status, 1);
    const char *line = strchr(csv, '\n');
    assert_non_null(line);
    char row_status[32], reason[512];
    test_csv_named_field(csv, line + 1, "status", row_status, sizeof row_status);
    test_csv_named_field(csv, line + 1, "reason", reason, sizeof reason);
    printf("jemalloc as libm: %s %s\n", row_status, reason);
    assert_string_equal(row_status, "error");
    assert_non_null(strstr(reason, "the practice was not in effect"));
    free(csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_families),
        cmocka_unit_test(test_tiny_rows_in_effect_and_checked),
        cmocka_unit_test(test_loader_rows_in_effect_and_checked),
        cmocka_unit_test(test_selftest_fails_tuned_rows),
        cmocka_unit_test_setup_teardown(test_missing_library_is_a_visible_skip, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_not_in_effect_fails, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
