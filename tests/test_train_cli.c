// test_train_cli.c: the build/train program: --help names every practice flag, a bad
// value is refused, and the tiny preset on the CPU reaches the stated accuracy
// (--target-accuracy makes train exit non-zero when it does not).
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support.h"

#define TINY_STEPS 120
#define TINY_TARGET "0.90"

static void test_help_lists_every_practice(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_int_equal(test_run("'%s/train' --help > '%s/help.txt' 2>&1", test_build_dir(), dir), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/help.txt", dir);
    char *help = test_read_file(path, NULL);
    assert_non_null(help);
    const char *flags[] = {"--precision", "fp16", "bf16", "tf32", "--layout", "nhwc",
                           "--zero-grad", "set_to_none", "--conv-algo", "autotune",
                           "--readback", "deferred", "--readback-interval", "--batch-size",
                           "--lr", "--lr-decay", "cosine", "--warmup", "--step-size",
                           "--linear-scaling", "--clip-norm", "--momentum", "--weight-decay",
                           "--backend", "--preset", "--init-scale", "--growth-interval"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (!strstr(help, flags[i])) printf("--help does not mention %s\n", flags[i]);
        assert_non_null(strstr(help, flags[i]));
    }
    free(help);
    test_remove_tree(dir);
}

static void test_bad_value_is_refused(void **state)
{
    (void)state;
    assert_int_equal(test_run("'%s/train' --precision fp8 > /dev/null 2>&1", test_build_dir()), 1);
    assert_int_equal(test_run("'%s/train' --preset huge > /dev/null 2>&1", test_build_dir()), 1);
}

static void test_tiny_reaches_accuracy_on_cpu(void **state)
{
    (void)state;
    int rc = test_run("'%s/train' --backend cpu --preset tiny --steps %d --log-every 40 "
                      "--target-accuracy " TINY_TARGET, test_build_dir(), TINY_STEPS);
    assert_int_equal(rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_lists_every_practice),
        cmocka_unit_test(test_bad_value_is_refused),
        cmocka_unit_test(test_tiny_reaches_accuracy_on_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
