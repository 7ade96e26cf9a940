// test_support.c: the shared test helpers themselves. test_temp_dir gives a fresh folder
// and a malloc'd path that the caller frees: its old header promised static storage, so
// test_train_cli never freed it, which LeakSanitizer reports (make test-sanitize).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support.h"

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// Two calls give two distinct folders and two separate strings; freeing one leaves the
// other intact (under ASan a shared or static buffer would be a use-after-free here).
static void test_temp_dir_is_fresh_and_caller_owned(void **state)
{
    (void)state;
    char *a = test_temp_dir(), *b = test_temp_dir();
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_string_not_equal(a, b);
    assert_true(is_dir(a) && is_dir(b));
    char keep[256];
    snprintf(keep, sizeof keep, "%s", b);
    test_remove_tree(a);
    assert_false(is_dir(a));
    free(a);
    assert_string_equal(b, keep);
    assert_true(is_dir(b));
    test_remove_tree(b);
    assert_false(is_dir(b));
    free(b);
}

static void test_csv_helpers(void **state)
{
    (void)state;
    const char *header = "practice,variant,time\n";
    assert_int_equal(test_csv_column(header, "practice"), 0);
    assert_int_equal(test_csv_column(header, "time"), 2);
    assert_int_equal(test_csv_column(header, "tim"), -1);
    char field[8];
    assert_true(test_csv_field("a,bb,ccc", 1, field, sizeof field));
    assert_string_equal(field, "bb");
    assert_true(test_csv_field("a,bb,0123456789", 2, field, sizeof field));
    assert_string_equal(field, "0123456"); // cut to fit, still terminated
    assert_false(test_csv_field("a,bb", 3, field, sizeof field));
}

// The helpers the benchmark tests share: counting lines, judging result rows, writing and
// reading files, and a program that cannot run giving NULL (never an empty listing).
static void test_file_and_result_helpers(void **state)
{
    (void)state;
    assert_int_equal(test_count_lines(""), 0);
    assert_int_equal(test_count_lines("no newline"), 0);
    assert_int_equal(test_count_lines("a\nb\n"), 2);
    const char *skipped = "practice,status,reason\na,skipped,no CUDA device (test)\nb,skipped,no CUDA device\n";
    char why[256];
    assert_int_equal(test_rows_ok_or_skipped(skipped, false, why, sizeof why), 2);
    assert_int_equal(test_rows_ok_or_skipped(skipped, true, why, sizeof why), -1);
    assert_string_equal(why, "row 1 is skipped: no CUDA device (test)");
    assert_int_equal(test_rows_ok_or_skipped("practice,status,reason\na,ok,\nb,error,boom\n", true, why, sizeof why),
                     -1);
    assert_string_equal(why, "row 2 is error: boom");
    assert_int_equal(test_rows_ok_or_skipped("practice,status,reason\na,skipped,out of memory\n", false, why,
                                             sizeof why), -1);
    char *dir = test_temp_dir();
    assert_non_null(dir);
    assert_true(test_write_file(dir, "f.txt", "one\ntwo\n"));
    char *text = test_read_in(dir, "f.txt");
    assert_non_null(text);
    assert_string_equal(text, "one\ntwo\n");
    free(text);
    assert_null(test_read_in(dir, "missing.txt"));
    assert_false(test_write_file(dir, "no/such/folder.txt", "x"));
    test_remove_tree(dir);
    free(dir);
    assert_null(test_bench_list("no_such_program"));
    assert_null(test_bench_csv("no_such_program", "--benchmark_min_time=0.01"));
}

// A test program starts without the variables by which a caller steers the suite's scripts
// (the GPU check's TESTS_STATUS reached the run-tests.sh a test ran itself, which wrote its
// "failing test_g" into the check's account), keeps what is said of the machine
// (SUITE_GPU_CHECK, BENCH_CACHE_DIR), and takes SUITE_TEST_FILTER for itself alone.
static void test_a_test_starts_without_the_callers_variables(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_non_null(dir);
    assert_int_equal(test_run("TESTS_STATUS=/s TESTS_SKIP=a TEST_JOBS=3 TEST_TIMEOUT=9 BENCH_FILTER=f "
                              "BENCH_ARGS_amp=x DEVICE_CHECK_TEST_SHARE=5 RESULTS_DIR=/r OUT=/o BUILD=/b "
                              "BENCH_CACHE_DIR=/c SUITE_GPU_CHECK=1 SUITE_TEST_FILTER=none "
                              "/proc/%d/exe --print-environment >'%s/env.txt'", (int)getpid(), dir), 0);
    char *env = test_read_in(dir, "env.txt");
    assert_non_null(env);
    const char *gone[] = {"\nTESTS_STATUS=", "\nTESTS_SKIP=", "\nTEST_JOBS=", "\nTEST_TIMEOUT=",
                          "\nBENCH_FILTER=", "\nBENCH_ARGS_amp=", "\nDEVICE_CHECK_TEST_SHARE=",
                          "\nRESULTS_DIR=", "\nOUT=", "\nBUILD=", "\nSUITE_TEST_FILTER="};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        if (strstr(env, gone[i])) fail_msg("a test program inherited %s:\n%s", gone[i] + 1, env);
    assert_non_null(strstr(env, "\nSUITE_GPU_CHECK=1\n"));
    assert_non_null(strstr(env, "\nBENCH_CACHE_DIR=/c\n"));
    free(env);
    // SUITE_TEST_FILTER runs the matching tests only
    assert_int_equal(test_run("SUITE_TEST_FILTER=test_csv_helpers /proc/%d/exe >'%s/out.txt' 2>&1",
                              (int)getpid(), dir), 0);
    char *out = test_read_in(dir, "out.txt");
    assert_non_null(out);
    if (!strstr(out, "[ RUN      ] test_csv_helpers") || strstr(out, "test_temp_dir_is_fresh") ||
        !strstr(out, "[  PASSED  ] 1 test(s)."))
        fail_msg("SUITE_TEST_FILTER=test_csv_helpers ran:\n%s", out);
    free(out);
    test_remove_tree(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--print-environment") == 0) {  // for the test above
        extern char **environ;
        printf("\n");
        for (char **e = environ; *e; e++) printf("%s\n", *e);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temp_dir_is_fresh_and_caller_owned),
        cmocka_unit_test(test_csv_helpers),
        cmocka_unit_test(test_file_and_result_helpers),
        cmocka_unit_test(test_a_test_starts_without_the_callers_variables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
