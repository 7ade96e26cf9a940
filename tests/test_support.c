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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temp_dir_is_fresh_and_caller_owned),
        cmocka_unit_test(test_csv_helpers),
        cmocka_unit_test(test_file_and_result_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
