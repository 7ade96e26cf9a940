// test_real_skips.c: a test that cannot run here says so as a cmocka skip, counted in the
// summary, never as a pass with a printed "skipped:" line. Runs the test programs whose
// parts need a GPU and checks their output (test_practice's one conditional part, the
// terabyte batch, is a cmocka skip under ASan the same way; it is not run again here: 50 s): every test that printed
// a line starting "skipped" ended as [  SKIPPED ], none as [       OK ]; without a GPU each
// program reports at least one skip.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/gpu_device.h"
#include "tests/support.h"

// Runs build/tests/<program> and checks its cmocka output as above.
static void check_program(const char *program)
{
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    int rc = test_run("'%s/tests/%s' >'%s/out.txt' 2>&1", test_build_dir(), program, tmp);
    char *out = test_read_in(tmp, "out.txt");
    assert_non_null(out);
    if (rc != 0) fail_msg("%s exited %d:\n%s", program, rc, out);
    char current[256] = "";
    bool printed_skipped = false;
    int skips = 0;
    for (char *line = out; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        char name[256];
        if (sscanf(line, "[ RUN      ] %255s", name) == 1) {
            snprintf(current, sizeof current, "%s", name);
            printed_skipped = false;
        } else if (strncmp(line, "skipped", 7) == 0) {
            printed_skipped = true;
        } else if (sscanf(line, "[       OK ] %255s", name) == 1 && strcmp(name, current) == 0) {
            if (printed_skipped) fail_msg("%s: %s printed a skip but counts as passed", program, name);
            current[0] = '\0';
        } else if (sscanf(line, "[  SKIPPED ] %255s", name) == 1 && strcmp(name, current) == 0) {
            skips++;
            current[0] = '\0';
        }
        line = end ? end + 1 : NULL;
    }
    printf("%s: %d test(s) skipped\n", program, skips);
    if (!gpu_device_available(NULL, 0) && skips == 0)
        fail_msg("%s: no test skipped on a machine without a GPU", program);
    free(out);
    test_remove_tree(tmp);
    free(tmp);
}

static void test_bench_layout_skips_for_real(void **state) { (void)state; check_program("test_bench_layout"); }
static void test_bench_amp_skips_for_real(void **state) { (void)state; check_program("test_bench_amp"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_layout_skips_for_real),
        cmocka_unit_test(test_bench_amp_skips_for_real),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
