// test_twin.c: the core's CPU backends ("cpu" and the reference "cpu-ref") compute the
// same numbers as PyTorch. steptime --dump writes the initial weights, the batch, the first
// gradient, per-step LR, loss and loss scale and the parameters after K steps;
// scripts/torch_twin.py check rebuilds the preset in PyTorch from them and compares: the
// loss, every gradient tensor, the LR of each step (computed in Python with LambdaLR), the
// loss per step, the GradScaler's scale and skip flag per step (with infs injected at the
// same steps) and the update after K steps, each within the tolerance stated in the script
// (fp32 on both sides, different summation order: loss 1e-5 relative, gradients 1e-4 and the
// update 1e-3 relative L2 per tensor - above it a float64 replay tells fp32 rounding from a
// real difference -, LR 1e-6, scale and skips exact). Measured here: 10-100x inside them.
// About 7 s at rest here (one python3 run for all dumps: importing torch alone takes 3 s).
// The configurations cover SGD momentum and weight decay (the presets'), a linear LR
// warm-up, clipping by global norm with a clip_norm below the gradient's norm (the script
// fails if no step was clipped) and fp16's loss scaling with backoff and growth.
// Skips, visibly, when python3 cannot import torch (pip install torch; scripts/setup.sh).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

// The Python the twin runs with: $PYTHON, or python3.
static const char *python(void)
{
    const char *p = getenv("PYTHON");
    return p && *p ? p : "python3";
}

// True (after printing why and how to fix it) when the twin cannot run here.
static bool torch_missing(void)
{
    static int missing = -1;
    if (missing < 0) {
        missing = test_run("%s -c 'import torch' >/dev/null 2>&1", python()) != 0;
        if (missing)
            printf("skipped: %s cannot import torch, so the PyTorch twin cannot run; install it "
                   "with `%s -m pip install torch` (scripts/setup.sh does, unless "
                   "SETUP_SKIP_TORCH=1), or set PYTHON to a Python that has it\n",
                   python(), python());
        fflush(stdout);
    }
    return missing;
}

#define REQUIRE_TORCH() do { if (torch_missing()) skip(); } while (0)

// Runs steptime --dump into test_dir/name with the given flags (one timed step only);
// its exit status.
static int dump(const char *name, const char *flags)
{
    fflush(stdout);
    int rc = test_run("'%s/steptime' %s --dump '%s/%s' --steps 1 --warmup 0 >/dev/null",
                      test_build_dir(), flags, test_dir, name);
    if (rc != 0) printf("steptime %s --dump %s exited %d\n", flags, name, rc);
    return rc;
}

// Runs the twin's check over the dumps (space-separated names in test_dir), its output
// shown and kept in test_dir/check.txt; its exit status.
static int twin_check(const char *names)
{
    char dirs[2048] = "";
    char buf[512];
    snprintf(buf, sizeof buf, "%s", names);
    for (char *save = NULL, *n = strtok_r(buf, " ", &save); n; n = strtok_r(NULL, " ", &save)) {
        size_t len = strlen(dirs);
        snprintf(dirs + len, sizeof dirs - len, " '%s/%s'", test_dir, n);
    }
    fflush(stdout);
    int rc = test_run("%s '%s/scripts/torch_twin.py' check%s >'%s/check.txt' 2>&1",
                      python(), test_suite_root(), dirs, test_dir);
    test_run("cat '%s/check.txt'", test_dir);
    return rc;
}

// A warm-up LR over 3 steps and clipping to 0.3 (the presets' first gradients have global
// norms of about 0.5 to 0.7, so every step is clipped); the presets' momentum 0.9 and
// weight decay 5e-4.
#define OPTIM "--lr-warmup 3 --clip-norm 0.3 --check-steps 4"
// fp16's GradScaler: infs at steps 1 and 4 back the scale off and skip those steps; a
// growth interval of 2 makes it grow in between (65536 -> 32768 -> 65536 -> 32768).
#define SCALER "--precision fp16 --init-scale 65536 --growth-interval 2 --inject-inf 1,4 " \
               "--lr-warmup 3 --clip-norm 0.3 --check-steps 6"

// The dumps, in the order they are checked: the first GOOD agree with the twin, the rest
// are made to disagree.
#define GOOD 6
static const char *const dumps[][2] = {
    {"tiny-cpu", "--preset tiny --backend cpu " OPTIM},
    {"tiny-cpu-fp16", "--preset tiny --backend cpu " SCALER},
    {"mlp-cpu", "--preset mlp --backend cpu " OPTIM},
    {"mlp-cpu-fp16", "--preset mlp --backend cpu " SCALER},
    {"tiny-ref", "--preset tiny --backend cpu-ref " OPTIM},
    {"mlp-ref-fp16", "--preset mlp --backend cpu-ref " SCALER},
    // meta.txt will say weight decay 5e-4, the core used 0.05: the gradients agree, the
    // update does not
    {"wrong-wd", "--preset tiny --backend cpu --weight-decay 0.05 " OPTIM},
    // a clip_norm that never clips proves nothing about clipping: the check says so
    {"no-clip", "--preset tiny --backend cpu --clip-norm 100 --check-steps 2"},
};
#define N_DUMPS (sizeof dumps / sizeof dumps[0])

// The twin's output for dump i (from its "twin-check: preset" line to the next), malloc'd.
static char *check_out, *block[N_DUMPS];
static int check_rc;

// One python run for all dumps (importing torch takes seconds): the tests read its output.
static int setup(void **state)
{
    if (test_setup_dir(state) != 0) return -1;
    if (torch_missing()) return 0;
    char names[1024] = "";
    for (size_t i = 0; i < N_DUMPS; i++) {
        if (dump(dumps[i][0], dumps[i][1]) != 0) return -1;
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? " " : "", dumps[i][0]);
    }
    if (test_run("sed -i 's/^weight_decay=.*/weight_decay=0.0005/' '%s/wrong-wd/meta.txt'", test_dir))
        return -1;
    check_rc = twin_check(names);
    check_out = test_read_in(test_dir, "check.txt");
    if (!check_out) return -1;
    char *p = check_out;
    for (size_t i = 0; i < N_DUMPS; i++) {
        char *start = strstr(p, "twin-check: preset");
        if (!start) return -1;
        char *end = strstr(start + 1, "twin-check: ");
        size_t n = end ? (size_t)(end - start) : strlen(start);
        block[i] = strndup(start, n);
        p = start + 1;
    }
    return 0;
}

static int teardown(void **state)
{
    for (size_t i = 0; i < N_DUMPS; i++) free(block[i]);
    free(check_out);
    return test_teardown_dir(state);
}

static void test_twin_agrees_with_the_cpu_backends(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    // the steps the core took are the ones the test says: infs at steps 1 and 4
    char *meta = test_read_in(test_dir, "tiny-cpu-fp16/meta.txt");
    assert_non_null(meta);
    assert_non_null(strstr(meta, "\ninject_steps=1,4\n"));
    free(meta);
    for (size_t i = 0; i < GOOD; i++) {
        assert_non_null(block[i]);
        if (strstr(block[i], "FAIL")) fail_msg("the twin disagrees on %s:\n%s", dumps[i][0], block[i]);
        assert_non_null(strstr(block[i], "  ok   gradient (worst tensor)"));
        assert_non_null(strstr(block[i], "  ok   update after "));
        assert_non_null(strstr(block[i], "  ok   LR per step (warm-up 3)"));
        if (strstr(dumps[i][1], "fp16")) {
            assert_non_null(strstr(block[i], "  ok   loss scale per step: 0 (tolerance 0): final 32768"));
            assert_non_null(strstr(block[i], "  ok   skipped steps: 0 (tolerance 0): 2 of 6 skipped"));
        }
    }
}

// The check can fail, and names what disagrees.
static void test_twin_detects_a_wrong_config(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    assert_int_equal(check_rc, 1);
    assert_non_null(strstr(check_out, "twin-check: 3 disagreement(s)"));
    assert_non_null(strstr(block[GOOD], "  ok   gradient (worst tensor)"));
    assert_non_null(strstr(block[GOOD], "  FAIL update after 4 steps (worst tensor)"));
    assert_non_null(strstr(block[GOOD], "not rounding")); // the float64 replay agrees
    assert_non_null(strstr(block[GOOD], "  FAIL loss per step"));
    assert_non_null(strstr(block[GOOD + 1], "  FAIL steps whose gradient norm was clipped: 0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twin_agrees_with_the_cpu_backends),
        cmocka_unit_test(test_twin_detects_a_wrong_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
