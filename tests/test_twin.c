// test_twin.c: the core's CPU backends ("cpu" and the reference "cpu-ref") compute the
// same numbers as PyTorch. steptime --dump writes the initial weights, BN running statistics
// and batch, a held-out batch, the first gradient, per-step LR, loss and loss scale, the
// parameters and running statistics after K steps, the eval-mode loss of the held-out batch
// after them, and its own command line (argv.txt); scripts/torch_twin.py check rebuilds the
// preset in PyTorch from them and compares: meta.txt against the command line (its own
// parse of argv.txt and the presets' defaults, so that a steptime parsing bug that meta.txt
// echoes is caught), the loss, every gradient tensor, the LR of each step (computed in
// Python with LambdaLR), the loss per step, the GradScaler's scale and skip flag per step
// (with infs injected at the same steps), the update after K steps, the change of every BN
// layer's running mean and variance and the eval-mode loss (held-out accuracy depends on
// both), each within the tolerance stated in the script (fp32 on both sides, different
// summation order: loss 1e-5 relative, gradients 1e-4, the update 1e-3 and the running
// statistics' change 1e-4 relative L2 per tensor - above them a float64 replay tells fp32
// rounding from a real difference -, eval loss 1e-5, LR 1e-6, scale and skips exact).
// About 8 s at rest here (one python3 run for all dumps: importing torch alone takes 3 s).
// The configurations cover SGD (and AdamW: betas, eps, decoupled weight decay, its step
// count across skipped fp16 steps) with a non-default LR, momentum and weight decay, a linear
// LR warm-up, clipping by global norm with a clip_norm below the gradient's norm (the
// script fails if no step was clipped) and fp16's loss scaling with backoff and growth.
// The twin's practice commands on the same dumps: `infer` (the logits of the grad, no_grad
// and inference_mode forwards agree within 1e-5 of the largest; only grad mode saves
// tensors for backward), `fold` (BN folded into tiny's 6 conv+BN pairs: logits within 1e-4
// of the largest; the MLP skips, naming why) and `accum` (mlp: K micro-batches of loss / K
// give one batch's update within 1e-4, without the / K more than 1 off, and a micro-batch's
// forward saves a quarter of the batch's activations; tiny: BatchNorm's
// difference is above rounding and only reported; a K that does not divide the batch fails).
// The GPT (steptime --preset gpt-tiny: token batches, meta.txt kind=gpt) is checked the same
// way on twin.models.GPT, on both CPU backends and both attention forms (AdamW, clipping,
// a warm-up), with the twin's tighter tolerances for it (gradients 1e-5, update 1e-4: no
// BN), the key biases apart (their gradient is 0 up to rounding) and the twin's own attention
// against F.scaled_dot_product_attention.
// Skips, visibly, when the twin's Python cannot import torch (scripts/setup.sh installs
// it), and fails instead when SUITE_REQUIRE_TORCH=1 (CI sets it unless SETUP_SKIP_TORCH=1).
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support.h"

// The Python the twin runs with: $PYTHON, else the virtual environment scripts/setup.sh
// makes (cache/venv), else python3 - the order scripts/twin_compare.py uses.
static const char *python(void)
{
    static char venv[4096];
    const char *p = getenv("PYTHON");
    if (p && *p) return p;
    snprintf(venv, sizeof venv, "%s/cache/venv/bin/python", test_suite_root());
    return access(venv, X_OK) == 0 ? venv : "python3";
}

static bool torch_required(void)
{
    const char *r = getenv("SUITE_REQUIRE_TORCH");
    return r && strcmp(r, "1") == 0;
}

// True (after printing why and how to fix it) when the twin cannot run here.
static bool torch_missing(void)
{
    static int missing = -1;
    if (missing < 0) {
        missing = test_run("'%s' -c 'import torch' >/dev/null 2>&1", python()) != 0;
        if (missing)
            printf("%s: %s cannot import torch, so the PyTorch twin cannot run; "
                   "scripts/setup.sh installs it into cache/venv (unless SETUP_SKIP_TORCH=1), "
                   "or set PYTHON to a Python that has it%s\n",
                   torch_required() ? "FAILED" : "skipped", python(),
                   torch_required() ? " (SUITE_REQUIRE_TORCH=1: a skip is a failure here)" : "");
        fflush(stdout);
    }
    return missing;
}

// Skips without torch, or fails when torch is required (CI: a skipped twin proves nothing).
#define REQUIRE_TORCH() do { \
        if (torch_missing()) { \
            if (torch_required()) fail_msg("SUITE_REQUIRE_TORCH=1 and %s has no torch", python()); \
            skip(); \
        } \
    } while (0)

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
    int rc = test_run("'%s' '%s/scripts/torch_twin.py' check%s >'%s/check.txt' 2>&1",
                      python(), test_suite_root(), dirs, test_dir);
    test_run("cat '%s/check.txt'", test_dir);
    return rc;
}

// SGD with an LR, momentum and weight decay none of the presets has (a flag steptime
// ignored would show in meta.txt), a warm-up LR over 3 steps and clipping to 0.3 (the
// presets' first gradients have global norms of about 0.5 to 0.7, so steps are clipped).
#define OPTIM "--lr 0.04 --momentum 0.85 --weight-decay 1e-3 --lr-warmup 3 --clip-norm 0.3 " \
              "--check-steps 4"
// fp16's GradScaler: infs at steps 1 and 4 back the scale off and skip those steps; a
// growth interval of 2 makes it grow in between (65536 -> 32768 -> 65536 -> 32768).
#define SCALER "--precision fp16 --init-scale 65536 --growth-interval 2 --inject-inf 1,4 " \
               "--lr 0.04 --momentum 0.85 --weight-decay 1e-3 --lr-warmup 3 --clip-norm 0.3 " \
               "--check-steps 6"

// AdamW (torch.optim.AdamW in the twin) with betas, eps and a weight decay none of the
// defaults has, large enough that coupled (L2) decay would show; with SCALER its step count
// must skip the GradScaler's skipped steps. An Adam LR: AdamW moves every parameter by about
// the LR each step, and at SGD's 0.04 the MLP's loss climbs enough to amplify fp32 rounding
// past LOSS_TOL (1.25e-5 measured; the update still agreed to 8e-6).
#define ADAMW "--optimizer adamw --beta1 0.85 --beta2 0.99 --eps 1e-7 --weight-decay 0.05 " \
              "--lr 0.003"

// The dumps, in the order they are checked: the first GOOD agree with the twin, the rest
// are made to disagree (after the dump, by `edit`, run in the dump's folder).
#define GOOD 8
typedef struct Dump { const char *name, *flags, *edit; } Dump;
static const Dump dumps[] = {
    {"tiny-cpu", "--preset tiny --backend cpu " OPTIM, NULL},
    {"tiny-cpu-fp16", "--preset tiny --backend cpu " SCALER, NULL},
    {"mlp-cpu", "--preset mlp --backend cpu " OPTIM, NULL},
    {"mlp-cpu-fp16", "--preset mlp --backend cpu " SCALER, NULL},
    {"tiny-ref", "--preset tiny --backend cpu-ref " OPTIM, NULL},
    {"mlp-ref-fp16", "--preset mlp --backend cpu-ref " SCALER, NULL},
    {"tiny-cpu-adamw-fp16", "--preset tiny --backend cpu " SCALER " " ADAMW, NULL},
    {"mlp-ref-adamw", "--preset mlp --backend cpu-ref " OPTIM " " ADAMW, NULL},
    // meta.txt will say weight decay 5e-4, the core used 0.05: the gradients agree, the
    // update does not (and meta.txt disagrees with the command line)
    {"wrong-wd", "--preset tiny --backend cpu " OPTIM " --weight-decay 0.05",
     "sed -i 's/^weight_decay=.*/weight_decay=0.0005/' meta.txt"},
    // a clip_norm that never clips proves nothing about clipping: the check says so
    {"no-clip", "--preset tiny --backend cpu --clip-norm 100 --check-steps 2", NULL},
    // a parsing bug that meta.txt echoes: the core and meta.txt say momentum 0.8, the
    // command line 0.7. Every number agrees; only the command line check can tell.
    {"echo-bug", "--preset tiny --backend cpu " OPTIM " --momentum 0.8",
     "sed -i 's/^0\\.8$/0.7/' argv.txt"},
    // running statistics that never moved (a BN forward that forgets to update them)
    {"stale-bn", "--preset tiny --backend cpu " OPTIM, "cp bn_stats.bin bn_stats_after.bin"},
    // an eval loss 1% off (eval with the wrong statistics, or of the wrong parameters)
    {"wrong-eval", "--preset tiny --backend cpu " OPTIM,
     "awk -F= '/^eval_loss=/ {printf \"eval_loss=%.9g\\n\", $2 * 1.01; next} {print}' "
     "meta.txt >m && mv m meta.txt"},
};
#define N_DUMPS (sizeof dumps / sizeof dumps[0])
enum { WRONG_WD = GOOD, NO_CLIP, ECHO_BUG, STALE_BN, WRONG_EVAL };

// The twin's output for dump i (from its "twin-check: preset" line to the next), malloc'd.
static char *check_out, *block[N_DUMPS];
static int check_rc;

// One python run for all dumps (importing torch takes seconds): the tests read its output.
static int setup(void **state)
{
    if (test_setup_dir(state) != 0) return -1;
    if (getenv("TWIN_TEST_CHILD")) return 0; // test_twin_skip_fails_when_required's run
    if (torch_missing()) return 0;
    char names[1024] = "";
    for (size_t i = 0; i < N_DUMPS; i++) {
        if (dump(dumps[i].name, dumps[i].flags) != 0) return -1;
        if (dumps[i].edit && test_run("cd '%s/%s' && %s", test_dir, dumps[i].name, dumps[i].edit))
            return -1;
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? " " : "", dumps[i].name);
    }
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
        if (strstr(block[i], "FAIL")) fail_msg("the twin disagrees on %s:\n%s", dumps[i].name, block[i]);
        assert_non_null(strstr(block[i], "  ok   meta.txt against the command line: 0 "));
        assert_non_null(strstr(block[i], "  ok   gradient (worst tensor)"));
        assert_non_null(strstr(block[i], "  ok   update after "));
        assert_non_null(strstr(block[i], "  ok   LR per step (warm-up 3)"));
        assert_non_null(strstr(block[i], "  ok   eval-mode loss of the held-out batch after "));
        if (strncmp(dumps[i].name, "tiny", 4) == 0) // the MLP has no BatchNorm
            assert_non_null(strstr(block[i], "  ok   BN running statistics' change after "));
        else
            assert_non_null(strstr(block[i], "  n/a  BN running statistics: none in this model"));
        if (strstr(dumps[i].flags, "fp16")) {
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
    assert_non_null(strstr(check_out, "twin-check: 9 disagreement(s)"));
    const char *wd = block[WRONG_WD];
    assert_non_null(strstr(wd, "  ok   gradient (worst tensor)"));
    assert_non_null(strstr(wd, "  FAIL update after 4 steps (worst tensor)"));
    assert_non_null(strstr(wd, "not rounding")); // the float64 replay agrees
    assert_non_null(strstr(wd, "  FAIL loss per step"));
    assert_non_null(strstr(wd, "  FAIL eval-mode loss"));
    assert_non_null(strstr(wd, "  FAIL BN running statistics' change")); // the next forwards differ
    assert_non_null(strstr(wd, "  FAIL meta.txt against the command line: 1 "));
    assert_non_null(strstr(wd, "weight_decay: meta.txt 0.0005, command line 0.05"));
    assert_non_null(strstr(block[NO_CLIP], "  FAIL steps whose gradient norm was clipped: 0"));
}

// A parsing bug that meta.txt echoes (the core and meta.txt agree with each other, not with
// the command line) is caught, and only by the command line check.
static void test_twin_checks_meta_against_the_command_line(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    const char *b = block[ECHO_BUG];
    assert_non_null(strstr(b, "  FAIL meta.txt against the command line: 1 "));
    assert_non_null(strstr(b, "momentum: meta.txt 0.8, command line 0.7"));
    assert_non_null(strstr(b, "  ok   update after 4 steps"));
    assert_non_null(strstr(b, "  ok   eval-mode loss"));
    const char *fails = strstr(b, "FAIL");
    assert_null(strstr(fails + 4, "FAIL")); // that one check, nothing else
}

// BN running statistics and the eval-mode loss are compared, and a difference fails.
static void test_twin_checks_running_stats_and_eval_loss(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    const char *stale = block[STALE_BN];
    assert_non_null(strstr(stale, "  FAIL BN running statistics' change after 4 steps"));
    assert_non_null(strstr(stale, "  ok   update after 4 steps"));
    const char *eval = block[WRONG_EVAL];
    assert_non_null(strstr(eval, "  FAIL eval-mode loss of the held-out batch after 4 steps"));
    assert_non_null(strstr(eval, "  ok   BN running statistics' change after 4 steps"));
    // the held-out batch is not the training batch
    char *a = test_read_in(test_dir, "tiny-cpu/images.bin"), *b = test_read_in(test_dir, "tiny-cpu/eval_images.bin");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(memcmp(a, b, 64) != 0);
    free(a);
    free(b);
}

// The GPT: steptime dumps token batches (tokens.bin, labels.bin: int32 [N][T], no images),
// meta.txt says kind=gpt and the shape, and the twin agrees on both backends and both
// attention forms. Small: batch 4 of 64 tokens, 4 AdamW steps with a warm-up of 3.
static char *twin_run(const char *args, int *status);
static void test_twin_checks_gpt(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    const char *gpt = "--preset gpt-tiny --batch-size 4 --lr-warmup 3 --check-steps 4";
    char flags[256];
    snprintf(flags, sizeof flags, "%s --backend cpu --attention unfused", gpt);
    assert_int_equal(dump("gpt-cpu", flags), 0);
    snprintf(flags, sizeof flags, "%s --backend cpu-ref --attention fused", gpt);
    assert_int_equal(dump("gpt-ref-fused", flags), 0);
    char *meta = test_read_in(test_dir, "gpt-ref-fused/meta.txt");
    assert_non_null(meta);
    assert_non_null(strstr(meta, "\nkind=gpt\nvocab=64\nseq_len=64\nwidth=64\nlayers=2\nheads=4\n"
                                 "attention=fused\n"));
    assert_non_null(strstr(meta, "\nn_params=112448\n"));
    assert_non_null(strstr(meta, "\noptimizer=adamw\n"));
    free(meta);
    size_t bytes = 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/gpt-cpu/tokens.bin", test_dir);
    char *tokens = test_read_file(path, &bytes);
    assert_non_null(tokens);
    assert_int_equal(bytes, 4 * 64 * sizeof(int32_t));
    free(tokens);
    snprintf(path, sizeof path, "%s/gpt-cpu/images.bin", test_dir);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(twin_check("gpt-cpu gpt-ref-fused"), 0);
    char *out = test_read_in(test_dir, "check.txt");
    assert_non_null(out);
    assert_non_null(strstr(out, "twin-check: all agree"));
    assert_non_null(strstr(out, " attention unfused seq_len 64"));
    assert_non_null(strstr(out, " attention fused seq_len 64"));
    const char *want[] = {
        "  ok   meta.txt against the command line: 0 ", "  ok   loss at the initial parameters",
        "  ok   gradient (worst tensor): ", "(tolerance 1e-05)",
        "  ok   twin attention against F.scaled_dot_product_attention",
        "  ok   LR per step (warm-up 3)", "  ok   loss per step",
        "  ok   update after 4 steps (worst tensor): ", "(tolerance 0.0001)",
        "  ok   key bias update after 4 steps (worst block)",
        "  n/a  BN running statistics: none in this model",
        "  ok   eval-mode loss of the held-out batch after 4 steps",
        "  ok   steps whose gradient norm was clipped",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out, want[i])) fail_msg("the twin's GPT check lacks '%s'", want[i]);
    free(out);
    // the other commands refuse a GPT dump, visibly
    int status = -1;
    snprintf(flags, sizeof flags, "infer --dump '%s/gpt-cpu'", test_dir);
    out = twin_run(flags, &status);
    assert_non_null(out);
    assert_int_equal(status, 2);
    assert_non_null(strstr(out, "twin-skip: `infer` takes the image presets' dumps"));
    free(out);
}

// CI sets SUITE_REQUIRE_TORCH=1: without torch the twin's tests fail instead of skipping.
static void test_twin_skip_fails_when_required(void **state)
{
    (void)state;
    if (getenv("TWIN_TEST_CHILD")) return; // the run below (which must not skip)
    char out[4200];
    snprintf(out, sizeof out, "%s/child.txt", test_dir);
    // /bin/false stands for a Python without torch
    int skipped = test_run("TWIN_TEST_CHILD=1 PYTHON=/bin/false SUITE_REQUIRE_TORCH=0 '%s/tests/test_twin' "
                           ">'%s' 2>&1", test_build_dir(), out);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    assert_int_equal(skipped, 0);
    assert_non_null(strstr(text, "skipped: /bin/false cannot import torch"));
    assert_non_null(strstr(text, "[  SKIPPED ] test_twin_agrees_with_the_cpu_backends"));
    free(text);
    int failed = test_run("TWIN_TEST_CHILD=1 PYTHON=/bin/false SUITE_REQUIRE_TORCH=1 '%s/tests/test_twin' "
                          ">'%s' 2>&1", test_build_dir(), out);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    assert_int_not_equal(failed, 0);
    assert_non_null(strstr(text, "FAILED: /bin/false cannot import torch"));
    assert_non_null(strstr(text, "[  FAILED  ] test_twin_agrees_with_the_cpu_backends"));
    assert_null(strstr(text, "[  SKIPPED ] test_twin_agrees_with_the_cpu_backends"));
    free(text);
}

// The first number after `key ` in text, or -1.
static double field(const char *text, const char *key)
{
    const char *p = text ? strstr(text, key) : NULL;
    return p ? atof(p + strlen(key)) : -1.0;
}

// steptime's result line for the flags (malloc'd), or NULL when it failed.
static char *steptime_line(const char *flags)
{
    if (test_run("'%s/steptime' %s >'%s/line.txt' 2>&1", test_build_dir(), flags, test_dir) != 0) {
        test_run("cat '%s/line.txt'", test_dir);
        return NULL;
    }
    return test_read_in(test_dir, "line.txt");
}

// On the CPU the batch is where the CPU computes: nothing is on a device, nothing counted.
static void test_steptime_input_on_the_cpu(void **state)
{
    (void)state;
    const char *inputs[] = {"device", "host"};
    for (int i = 0; i < 2; i++) {
        char flags[256];
        snprintf(flags, sizeof flags, "--preset tiny --backend cpu --steps 1 --warmup 0 --input %s", inputs[i]);
        char *line = steptime_line(flags);
        assert_non_null(line);
        assert_non_null(strstr(line, " input host batch_mib 0.0 peak_mib "));
        free(line);
    }
    assert_int_not_equal(test_run("'%s/steptime' --input disk >/dev/null 2>&1", test_build_dir()), 0);
}

// On CUDA, --input device (the default) puts the batch on the device once and counts it in
// peak_mib, as torch.cuda.max_memory_allocated counts the batch the twin moved there.
static void test_steptime_input_on_the_gpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const char *common = "--preset tiny --backend cuda --batch-size 256 --steps 2 --warmup 1";
    char flags[256];
    snprintf(flags, sizeof flags, "%s --input host", common);
    char *host = steptime_line(flags);
    snprintf(flags, sizeof flags, "%s", common);
    char *dev = steptime_line(flags);
    assert_non_null(host);
    assert_non_null(dev);
    assert_non_null(strstr(host, " input host batch_mib 0.0 "));
    assert_non_null(strstr(dev, " input device batch_mib "));
    double batch = (256.0 * 3 * 16 * 16 * 4 + 256 * 4) / 1048576.0; // images + labels
    assert_true(fabs(field(dev, " batch_mib ") - batch) < 0.06);
    // the core allocates the same buffers either way: the difference is the batch
    assert_true(fabs(field(dev, " peak_mib ") - field(host, " peak_mib ") - batch) < 0.11);
    free(host);
    free(dev);
}

// ---- infer, fold, accum: inference and training practices in PyTorch -----------------------

// The output of `torch_twin.py ARGS` (malloc'd; stdout and stderr) and its exit status.
static char *twin_run(const char *args, int *status)
{
    fflush(stdout);
    *status = test_run("'%s' '%s/scripts/torch_twin.py' %s >'%s/twin.txt' 2>&1", python(),
                       test_suite_root(), args, test_dir);
    char *out = test_read_in(test_dir, "twin.txt");
    if (out) printf("%s", out);
    return out;
}

// Runs the twin on the dump `name` of the setup; the output (malloc'd), exit status `want`.
static char *twin_on(const char *command, const char *name, const char *flags, int want)
{
    char args[1024];
    snprintf(args, sizeof args, "%s --dump '%s/%s' --threads 1 --steps 2 --warmup 1 %s", command,
             test_dir, name, flags);
    int status = -1;
    char *out = twin_run(args, &status);
    assert_non_null(out);
    assert_int_equal(status, want);
    return out;
}

// Autograd's bookkeeping changes no logit; only the grad mode saves tensors for backward.
static void test_twin_infer(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    char *out = twin_on("infer", "tiny-cpu", "", 0);
    assert_non_null(strstr(out, "twin-infer: preset tiny device cpu "));
    assert_non_null(strstr(out, " params_require_grad yes "));
    assert_non_null(strstr(out, " agree yes "));
    assert_true(field(out, " logits_max_rel_diff ") <= 1e-5);
    assert_true(field(out, " grad_saved_mib ") > 0.1);  // tiny's activations at batch 32: ~2 MiB
    assert_true(field(out, " grad_saved_tensors ") > 10);
    assert_true(field(out, " no_grad_saved_mib ") == 0.0);
    assert_true(field(out, " no_grad_saved_tensors ") == 0.0);
    assert_true(field(out, " inference_mode_saved_mib ") == 0.0);
    assert_true(field(out, " inference_mode_saved_tensors ") == 0.0);
    assert_true(field(out, " grad_median_ms ") > 0.0 && field(out, " inference_mode_median_ms ") > 0.0);
    free(out);
    if (test_gpu_present()) {  // the peaks of the device's allocator: the saved activations show
        out = twin_on("infer", "tiny-cpu", "--device cuda", 0);
        assert_non_null(strstr(out, " agree yes "));
        assert_true(field(out, " grad_peak_mib ") >= field(out, " inference_mode_peak_mib "));
        assert_true(field(out, " grad_saved_mib ") > 0.1);
    } else {
        out = twin_on("infer", "tiny-cpu", "--device cuda", 2);
        assert_non_null(strstr(out, "twin-skip: torch.cuda.is_available() is False"));
    }
    free(out);
}

// BN folded into the convolutions gives the same logits within FOLD_TOL (1e-4 of the largest);
// the MLP has nothing to fold (a visible skip).
static void test_twin_fold(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    char *out = twin_on("fold", "tiny-cpu", "", 0);
    assert_non_null(strstr(out, "twin-fold: preset tiny device cpu "));
    assert_true(field(out, " folded_pairs ") == 6.0);  // stem, 2 + 2 block convs, 1 projection
    assert_true(field(out, " max_rel_diff ") <= 1e-4);
    assert_non_null(strstr(out, " tolerance 0.0001 agree yes "));
    assert_true(field(out, " folded_median_ms ") > 0.0 && field(out, " unfolded_median_ms ") > 0.0);
    free(out);
    out = twin_on("fold", "mlp-cpu", "", 2);
    assert_non_null(strstr(out, "twin-skip: preset mlp has no BatchNorm to fold"));
    free(out);
}

// K micro-batches of loss / K: the MLP's update is one batch's within ACCUM_TOL (1e-4), and
// without the / K it is not (K - 1 off); with BN the difference is real and only reported.
static void test_twin_accum(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    char *out = twin_on("accum", "mlp-cpu", "--k 4", 0);
    assert_non_null(strstr(out, "twin-accum: preset mlp device cpu "));
    assert_non_null(strstr(out, " batch 32 k 4 micro_batch 8 "));
    assert_true(field(out, " update_rel_diff ") <= 1e-4);
    assert_true(field(out, " unscaled_rel_diff ") > 1.0);
    assert_non_null(strstr(out, " agree yes "));
    assert_true(field(out, " one_batch_median_ms ") > 0.0 && field(out, " accumulate_median_ms ") > 0.0);
    // one forward of a micro-batch keeps a quarter of the whole batch's activations
    double whole = field(out, " one_batch_saved_mib "), part = field(out, " accumulate_saved_mib ");
    assert_true(whole > 0.0 && part > 0.2 * whole && part < 0.3 * whole);
    free(out);
    out = twin_on("accum", "tiny-cpu", "--k 4", 0);
    assert_non_null(strstr(out, " agree n/a(batchnorm) "));
    assert_true(field(out, " update_rel_diff ") > 1e-3);  // BN's statistics of 8 images, not rounding
    free(out);
    out = twin_on("accum", "mlp-cpu", "--k 5", 1);
    assert_non_null(strstr(out, "does not split into 5 equal micro-batches"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twin_agrees_with_the_cpu_backends),
        cmocka_unit_test(test_twin_detects_a_wrong_config),
        cmocka_unit_test(test_twin_checks_meta_against_the_command_line),
        cmocka_unit_test(test_twin_checks_running_stats_and_eval_loss),
        cmocka_unit_test(test_twin_checks_gpt),
        cmocka_unit_test(test_twin_skip_fails_when_required),
        cmocka_unit_test(test_steptime_input_on_the_cpu),
        cmocka_unit_test(test_steptime_input_on_the_gpu),
        cmocka_unit_test(test_twin_infer),
        cmocka_unit_test(test_twin_fold),
        cmocka_unit_test(test_twin_accum),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
