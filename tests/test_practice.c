// test_practice.c: the practice driver (bench/driver/practice.h) on the CPU backend, through one
// harness run of practices made for the test: a variant that computes what the baseline
// does passes the check (wrong = 0); one that trains differently is a failed run with
// wrong = 1; a batch far beyond the machine's memory is "skipped: out of memory"; a bad
// config fails the run (never a skip); slow first batches (module loading, plans) fall in
// the untimed warm-up and not in the step time; --harness_axis widens the batch sweep;
// time-to-accuracy mode reaches its target and writes its curve, each repetition from a
// seed of its own.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/synth.h"
#include "tests/support.h"

static char *tmp_dir, *csv_text, *curves_text;
static int run_status;

static void same(CoreConfig *c) { c->zero_grad = CORE_ZERO_GRAD_MEMSET; }
static void also_same(CoreConfig *c) { c->zero_grad = CORE_ZERO_GRAD_SET_TO_NONE; }
static void other_lr(CoreConfig *c) { c->optim.base_lr *= 2.0f; }
static void huge(CoreConfig *c) { c->batch_size = 1 << 20; c->model.image_size = 224; }
static void invalid(CoreConfig *c) { c->optim.momentum = -1.0f; }
static void no_update(CoreConfig *c) { c->optim.base_lr = 0.0f; }
static void half_lr(CoreConfig *c) { c->optim.base_lr *= 0.5f; }

static const PracticeVariant checked[] = {
    {"baseline", HARNESS_BASELINE, same, NULL},
    {"equivalent", HARNESS_TUNED, also_same, NULL},
    {"different", HARNESS_TUNED, other_lr, NULL},
    {"bad_config", HARNESS_TUNED, invalid, NULL},
    {"too_big", HARNESS_TUNED, huge, NULL},
};

// At a tolerance of 1e-3 (what layout and cudnn_benchmark had on the parameters' scale, where
// 3 steps move them ~9e-4 of themselves): a variant that does not train, or trains at half
// the learning rate, must fail; the same maths passes.
static const PracticeVariant loose[] = {
    {"baseline", HARNESS_BASELINE, same, NULL},
    {"equivalent", HARNESS_TUNED, also_same, NULL},
    {"no_update", HARNESS_TUNED, no_update, NULL},
    {"half_lr", HARNESS_TUNED, half_lr, NULL},
};

// A source whose first batches are slow (as module loading and planning are): 300 ms
// each for the warm-up's 3; every later batch is at once.
typedef struct SlowStart {
    float *images;
    int32_t *labels;
    int n, served, in_epoch;
} SlowStart;

static SlowStart slow;

static int slow_open(void *ctx, CoreConfig *cfg, const void *arg)
{
    (void)arg;
    SlowStart *s = ctx;
    const CoreModelConfig *m = &cfg->model;
    s->n = cfg->batch_size;
    s->images = malloc((size_t)s->n * m->in_channels * m->image_size * m->image_size * sizeof(float));
    s->labels = malloc((size_t)s->n * sizeof(int32_t));
    SynthTask t = {m->in_channels, m->image_size, m->num_classes, 0.5f, 1};
    synth_batch(&t, 0, s->n, s->images, s->labels);
    s->served = s->in_epoch = 0;
    return 0;
}

static int slow_next(void *ctx, CoreBatch *b)
{
    SlowStart *s = ctx;
    if (s->served < 3) usleep(300000);
    if (s->served >= 3 && s->in_epoch == 5) {  // an "epoch" of 5 timed steps
        s->in_epoch = 0;
        return 0;
    }
    s->served++;
    if (s->served > 3) s->in_epoch++;
    *b = (CoreBatch){.images = s->images, .labels = s->labels, .n = s->n, .memory = CORE_MEMORY_HOST};
    return 1;
}

static void slow_close(void *ctx)
{
    SlowStart *s = ctx;
    free(s->images);
    free(s->labels);
}

static const PracticeSource slow_source = {slow_open, slow_next, NULL, NULL, slow_close, &slow, true};
static const PracticeVariant plain[] = {{"plain", HARNESS_BASELINE, NULL, NULL}};

// ASan reports the refusal of a terabyte allocation as an error: leave that variant out.
#ifdef __SANITIZE_ADDRESS__
#define CHECKED_VARIANTS 4
#else
#define CHECKED_VARIANTS 5
#endif

static int run_practices(void **state)
{
    (void)state;
    tmp_dir = test_temp_dir();
    if (!tmp_dir) return -1;
    static const Practice p_checked = {
        .name = "t_checked", .variants = checked, .variant_count = CHECKED_VARIANTS, .presets = "tiny",
        .batches = "8", .mode = PRACTICE_THROUGHPUT, .steps = 2, .check = PRACTICE_CHECK_PARAMS,
        .tolerance = 0.0, .check_steps = 2};
    static const Practice p_warmup = {
        .name = "t_warmup", .variants = plain, .variant_count = 1, .presets = "mlp",
        .batches = "16", .mode = PRACTICE_THROUGHPUT, .source = &slow_source};
    static const Practice p_tta = {
        .name = "t_tta", .variants = plain, .variant_count = 1, .presets = "tiny", .batches = "0",
        .mode = PRACTICE_TIME_TO_ACCURACY, .target_accuracy = 0.5f, .max_steps = 300,
        .eval_every = 10};
    static const Practice p_loose = {
        .name = "t_loose", .variants = loose, .variant_count = 4, .presets = "tiny", .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 2, .check = PRACTICE_CHECK_PARAMS, .tolerance = 1e-3,
        .check_steps = 3};
    practice_register(&p_checked);
    practice_register(&p_loose);
    practice_register(&p_warmup);
    practice_register(&p_tta);
    char csv[512], csvflag[600];
    snprintf(csv, sizeof csv, "%s/t.csv", tmp_dir);
    snprintf(csvflag, sizeof csvflag, "--harness_csv=%s", csv);
    char *argv[] = {"test_practice", csvflag, "--benchmark_min_time=0.01", "--backend=cpu",
                    "--threads=1", NULL};
    run_status = harness_init(5, argv);
    if (run_status < 0) run_status = harness_run();
    csv_text = test_read_file(csv, NULL);
    snprintf(csv, sizeof csv, "%s/t.curves.csv", tmp_dir);
    curves_text = test_read_file(csv, NULL);
    return csv_text ? 0 : -1;
}

static int cleanup(void **state)
{
    (void)state;
    free(csv_text);
    free(curves_text);
    test_remove_tree(tmp_dir);
    free(tmp_dir);
    return 0;
}

// The value of column `name` in the row of practice/variant (first match), or NULL.
static char *cell(const char *practice, const char *variant, const char *name, char *out, size_t size)
{
    int pc = test_csv_column(csv_text, "practice"), vc = test_csv_column(csv_text, "variant"),
        c = test_csv_column(csv_text, name);
    if (c < 0) return NULL;
    for (const char *line = strchr(csv_text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char row[8192], p[64], v[64];
        const char *end = strchr(line + 1, '\n');
        size_t n = end ? (size_t)(end - line - 1) : strlen(line + 1);
        if (n >= sizeof row) continue;
        memcpy(row, line + 1, n);
        row[n] = '\0';
        if (test_csv_field(row, pc, p, sizeof p) && test_csv_field(row, vc, v, sizeof v) &&
            !strcmp(p, practice) && !strcmp(v, variant) && test_csv_field(row, c, out, size))
            return out;
    }
    return NULL;
}

static void expect(const char *practice, const char *variant, const char *name, const char *want)
{
    char got[512];
    if (!cell(practice, variant, name, got, sizeof got)) fail_msg("no %s of %s/%s", name, practice, variant);
    if (strcmp(got, want) != 0) fail_msg("%s/%s %s = '%s', want '%s'", practice, variant, name, got, want);
}

static void test_check_passes_identical_maths_and_fails_different(void **state)
{
    (void)state;
    expect("t_checked", "equivalent", "status", "ok");
    expect("t_checked", "equivalent", "wrong", "0");
    expect("t_checked", "equivalent", "check_rel_diff", "0");
    expect("t_checked", "different", "status", "error");
    char reason[512];
    assert_non_null(cell("t_checked", "different", "reason", reason, sizeof reason));
    assert_non_null(strstr(reason, "parameters differ from the baseline's"));
    assert_int_equal(run_status, 1);  // a wrong result fails the program too
}

// The check compares the update, not the parameters: 3 steps move tiny's parameters by ~9e-4
// of themselves, so a variant that never updates was within 1e-3 of the baseline's
// parameters; its update differs by all of the baseline's.
static void test_check_catches_a_variant_that_does_not_train(void **state)
{
    (void)state;
    expect("t_loose", "equivalent", "status", "ok");
    expect("t_loose", "equivalent", "check_rel_diff", "0");
    char reason[512];
    expect("t_loose", "no_update", "status", "error");
    assert_non_null(cell("t_loose", "no_update", "reason", reason, sizeof reason));
    printf("no_update: %s\n", reason);
    assert_non_null(strstr(reason, "the update differs by 1 of the baseline's update"));
    expect("t_loose", "half_lr", "status", "error");
    assert_non_null(cell("t_loose", "half_lr", "reason", reason, sizeof reason));
    printf("half_lr: %s\n", reason);
}

static void test_bad_config_is_a_failure(void **state)
{
    (void)state;
    char reason[512];
    expect("t_checked", "bad_config", "status", "error");
    assert_non_null(cell("t_checked", "bad_config", "reason", reason, sizeof reason));
    assert_non_null(strstr(reason, "momentum"));
}

static void test_out_of_memory_is_a_skip(void **state)
{
    (void)state;
#ifdef __SANITIZE_ADDRESS__
    printf("skipped under AddressSanitizer: the terabyte batch (its refusal is an ASan report)\n");
    skip();
#else
    char reason[512];
    expect("t_checked", "too_big", "status", "skipped");
    assert_non_null(cell("t_checked", "too_big", "reason", reason, sizeof reason));
    printf("too big: %s\n", reason);
    assert_non_null(strstr(reason, "out of memory"));
#endif
}

static void test_warmup_is_not_timed(void **state)
{
    (void)state;
    char step_ms[64];
    expect("t_warmup", "plain", "status", "ok");
    assert_non_null(cell("t_warmup", "plain", "step_ms", step_ms, sizeof step_ms));
    printf("step time after three 300 ms warm-up batches: %s ms\n", step_ms);
    assert_true(atof(step_ms) > 0.0 && atof(step_ms) < 100.0);
}

static void test_time_to_accuracy_reaches_the_target_with_a_curve(void **state)
{
    (void)state;
    expect("t_tta", "plain", "status", "ok");
    expect("t_tta", "plain", "reached_target", "1");
    expect("t_tta", "plain", "diverged", "0");
    assert_non_null(curves_text);
    // the schema's axes in order (tidy_columns.def): batch 0 first, preset tiny, the rest (8 after it) empty
    assert_non_null(strstr(curves_text, "t_tta,plain,baseline,preset:tiny;batch:0,0,,,,,,,,,,,,,,tiny,,,,,,,,,1,heldout_accuracy,10,"));
}

// --harness_axis widens a sweep without recompiling: a second program run of bench_batch_size.
static void test_axis_flag_and_cuda_without_gpu(void **state)
{
    (void)state;
    char out[600];
    snprintf(out, sizeof out, "%s/axis.csv", tmp_dir);
    assert_int_equal(test_run("'%s/bench_batch_size' --benchmark_filter='^batch_size/' --preset=mlp "
                              "--harness_axis=batch=2,4 --benchmark_min_time=0.01 --threads=1 "
                              "--harness_csv='%s' >/dev/null 2>&1", test_build_dir(), out), 0);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "batch_size,sweep,reference,wall,preset:mlp;batch:2,ok,"));
    assert_non_null(strstr(text, "batch_size,sweep,reference,wall,preset:mlp;batch:4,ok,"));
    assert_null(strstr(text, "batch:8,"));
    free(text);
    // --backend=cuda without a GPU: every run a visible skip, exit status 0
    if (test_run("nvidia-smi >/dev/null 2>&1") == 0) return;
    assert_int_equal(test_run("'%s/bench_zero_grad' --backend=cuda --preset=tiny "
                              "--benchmark_filter='^zero_grad/' --harness_csv='%s' >/dev/null 2>&1",
                              test_build_dir(), out), 0);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, ",skipped,no CUDA device"));
    assert_null(strstr(text, ",ok,"));
    free(text);
}

// Both practices built on the driver run for real on the CPU backend, and their charts
// are drawn from what they wrote (where gnuplot is installed).
// The sweep, and of the training families the baseline and the tuned variant with the most
// schedule (warm-up, linear scaling, cosine decay): every chart is drawn from them, in a
// third of the time of every variant (over a minute under the sanitizers).
#define BATCH_SIZE_FILTER "^batch_size/|^batch_size_convergence/(small_batch|large_linear_lr_warmup_cosine)/|" \
                          "^batch_size_parity/(small_batch|large_linear_lr_warmup)/"

static void test_zero_grad_and_batch_size_run_on_the_cpu(void **state)
{
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/practices", tmp_dir);
    assert_int_equal(test_run("mkdir -p '%s/charts' && cd '%s' && "
                              "'%s/bench_zero_grad' --preset=tiny --backend=cpu --benchmark_min_time=0.05 "
                              "--harness_csv=zero_grad.csv >zg.log 2>&1 && "
                              "'%s/bench_batch_size' --preset=tiny --backend=cpu --benchmark_min_time=0.02 "
                              "--harness_axis=batch=8,16 --benchmark_filter='%s' "
                              "--harness_csv=batch_size.csv >bs.log 2>&1",
                              dir, dir, test_build_dir(), test_build_dir(), BATCH_SIZE_FILTER), 0);
    char path[700];
    char *zg = test_read_in(dir, "zero_grad.csv");
    assert_non_null(zg);
    // the two modes' maths is the same: bit-identical parameters, wrong = 0, status ok
    assert_non_null(strstr(zg, "zero_grad,set_to_none,tuned,wall,preset:tiny;batch:0,ok,"));
    assert_non_null(strstr(zg, "zero_grad_wgrad,overwrite,tuned,manual,preset:tiny;batch:0,ok,"));
    assert_non_null(strstr(zg, "zero_grad_memset,flat_buffer,tuned,manual,preset:tiny;batch:0,ok,"));
    assert_null(strstr(zg, ",error,"));
    // every driver run says whether its core ran what its config asks (core_config_in_effect)
    const char *row = strstr(zg, "zero_grad,set_to_none,tuned,");
    char in_effect[16] = "";
    assert_non_null(row);
    test_csv_named_field(zg, row, "in_effect", in_effect, sizeof in_effect);
    assert_string_equal(in_effect, "1");
    free(zg);
    char *bs = test_read_in(dir, "batch_size.csv");
    assert_non_null(bs);
    assert_non_null(strstr(bs, "batch_size,sweep,reference,wall,preset:tiny;batch:16,ok,"));
    assert_non_null(strstr(bs, "batch_size_convergence,large_linear_lr_warmup_cosine,tuned,manual,preset:tiny;batch:8,ok,"));
    assert_non_null(strstr(bs, "batch_size_parity,large_linear_lr_warmup,tuned,manual,preset:tiny;batch:16,ok,"));
    assert_null(strstr(bs, ",error,"));
    free(bs);
    snprintf(path, sizeof path, "%s/batch_size.curves.csv", dir);
    assert_true(test_file_at_least(path, 1000));
    assert_int_equal(test_run("cd '%s' && bash '%s/scripts/summarize.sh' . >/dev/null && "
                              "grep -q '^zero_grad,preset:tiny;batch:0,memset,set_to_none,' summary.csv && "
                              "! grep -q '^batch_size,' summary.csv", dir, test_suite_root()), 0);
    if (test_run("command -v gnuplot >/dev/null 2>&1") != 0) return;
    assert_int_equal(test_run("bash '%s/scripts/charts.sh' '%s' >/dev/null", test_suite_root(), dir), 0);
    const char *charts[] = {"zero_grad_step", "zero_grad_micro", "batch_size_throughput",
                            "batch_size_memory", "batch_size_convergence_time",
                            "batch_size_convergence_images"};
    for (size_t i = 0; i < sizeof charts / sizeof charts[0]; i++) {
        snprintf(path, sizeof path, "%s/charts/%s.svg", dir, charts[i]);
        if (!test_file_at_least(path, 2000)) fail_msg("no chart %s", path);
    }
}

// The first training loss of repetitions 1 and 2 of practice/variant in a curves CSV.
static void first_losses(const char *curves, const char *practice, const char *variant, double first[2])
{
    int found = 0;
    for (const char *line = strchr(curves, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char p[64], v[64], metric[64], step[16], run[16], value[64];
        test_csv_named_field(curves, line + 1, "practice", p, sizeof p);
        test_csv_named_field(curves, line + 1, "variant", v, sizeof v);
        test_csv_named_field(curves, line + 1, "metric", metric, sizeof metric);
        test_csv_named_field(curves, line + 1, "step", step, sizeof step);
        test_csv_named_field(curves, line + 1, "run", run, sizeof run);
        test_csv_named_field(curves, line + 1, "value", value, sizeof value);
        if (strcmp(p, practice) || strcmp(v, variant) || strcmp(metric, "train_loss") || strcmp(step, "1")) continue;
        int r = atoi(run);
        if (r < 1 || r > 2) fail_msg("%s/%s: run %s", practice, variant, run);
        first[r - 1] = atof(value);
        found++;
    }
    if (found != 2) fail_msg("%s/%s: %d first losses, want 2", practice, variant, found);
}

// Asserts that repetitions 1 and 2 of practice/variant in a reps CSV trained from seeds
// 1 and 2 (tiny's seed, 1, + the repetition's index).
static void expect_seeds(const char *reps, const char *practice, const char *variant)
{
    if (test_csv_column(reps, "seed") < 0) fail_msg("%s/%s: no seed column in the reps file", practice, variant);
    int found = 0;
    for (const char *line = strchr(reps, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char p[64], v[64], rep[16], seed[32];
        test_csv_named_field(reps, line + 1, "practice", p, sizeof p);
        test_csv_named_field(reps, line + 1, "variant", v, sizeof v);
        if (strcmp(p, practice) || strcmp(v, variant)) continue;
        test_csv_named_field(reps, line + 1, "repetition", rep, sizeof rep);
        test_csv_named_field(reps, line + 1, "seed", seed, sizeof seed);
        if (strcmp(seed, rep) != 0) fail_msg("%s/%s repetition %s: seed '%s', want %s", practice, variant, rep, seed, rep);
        found++;
    }
    if (found != 2) fail_msg("%s/%s: %d repetitions, want 2", practice, variant, found);
}

// Every time-to-accuracy practice's repetitions train from seeds of their own (the
// driver's rule: repetition k of an instance from the preset's seed + k, the same k for
// every variant, recorded per repetition as `seed`), so that they sample the spread over
// initialisations and data; a convergence time timed again from one seed is one sample.
// amp_parity (which used to run every repetition from one seed) and
// batch_size_convergence, two repetitions each: seeds 1 and 2 on each variant, first
// training losses that differ (one run timed twice would repeat its first loss exactly),
// and the summary counts the seeds of each side.
static void test_time_to_accuracy_repetitions_are_seeded(void **state)
{
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/seeded", tmp_dir);
    assert_int_equal(test_run("mkdir -p '%s' && cd '%s' && '%s/bench_amp' --preset=tiny --backend=cpu "
                              "--benchmark_filter='^amp_parity/(fp32|fp16)/' --benchmark_repetitions=2 "
                              "--harness_csv=amp.csv >amp.log 2>&1 && "
                              "'%s/bench_batch_size' --preset=tiny --backend=cpu "
                              "--benchmark_filter='^batch_size_convergence/(small_batch|large_linear_lr)/' "
                              "--benchmark_repetitions=2 --harness_csv=bs.csv >bs.log 2>&1",
                              dir, dir, test_build_dir(), test_build_dir()), 0);
    const char *programs[][3] = {{"amp", "amp_parity", "fp32"}, {"amp", "amp_parity", "fp16"},
                                 {"bs", "batch_size_convergence", "small_batch"},
                                 {"bs", "batch_size_convergence", "large_linear_lr"}};
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.reps.csv", programs[i][0]);
        char *reps = test_read_in(dir, name);
        assert_non_null(reps);
        expect_seeds(reps, programs[i][1], programs[i][2]);
        free(reps);
        snprintf(name, sizeof name, "%s.curves.csv", programs[i][0]);
        char *curves = test_read_in(dir, name);
        assert_non_null(curves);
        double first[2] = {0, 0};
        first_losses(curves, programs[i][1], programs[i][2], first);
        printf("%s/%s: first training loss of repetition 1: %.7g, of repetition 2: %.7g\n", programs[i][1],
               programs[i][2], first[0], first[1]);
        assert_true(first[0] != first[1]);
        free(curves);
    }
    // the parity check compared each fp16 repetition with the fp32 baseline from its own seed
    char *amp = test_read_in(dir, "amp.csv");
    assert_non_null(amp);
    assert_null(strstr(amp, ",error,"));
    free(amp);
    assert_int_equal(test_run("cd '%s' && bash '%s/scripts/summarize.sh' . >/dev/null", dir, test_suite_root()), 0);
    char *summary = test_read_in(dir, "summary.csv");
    assert_non_null(summary);
    const char *row = strstr(summary, "\nbatch_size_convergence,preset:tiny;batch:0,small_batch,large_linear_lr,");
    assert_non_null(row);
    char seeds[16];
    test_csv_named_field(summary, row + 1, "baseline_seeds", seeds, sizeof seeds);
    assert_string_equal(seeds, "2");
    test_csv_named_field(summary, row + 1, "tuned_seeds", seeds, sizeof seeds);
    assert_string_equal(seeds, "2");
    free(summary);
}

// On a GPU: the same two programs on the CUDA backend (device-resident batches, cuDNN and
// cuBLAS micro passes); set_to_none must still leave the parameters bit-identical.
static void test_gpu_practices_run_on_cuda(void **state)
{
    (void)state;
    REQUIRE_GPU();
    char dir[600];
    snprintf(dir, sizeof dir, "%s/gpu", tmp_dir);
    int rc = test_run("mkdir -p '%s' && cd '%s' && "
                      "'%s/bench_zero_grad' --preset=tiny,small --backend=cuda --benchmark_min_time=0.05 "
                      "--harness_csv=zero_grad.csv >zg.log 2>&1 && "
                      "'%s/bench_batch_size' --preset=tiny --backend=cuda --benchmark_min_time=0.02 "
                      "--benchmark_filter='^batch_size/' --harness_axis=batch=8,64 "
                      "--harness_csv=batch_size.csv >bs.log 2>&1",
                      dir, dir, test_build_dir(), test_build_dir());
    if (rc != 0) test_run("cat '%s/zg.log' '%s/bs.log'", dir, dir);
    assert_int_equal(rc, 0);
    char *zg = test_read_in(dir, "zero_grad.csv");
    assert_non_null(zg);
    assert_non_null(strstr(zg, "zero_grad,set_to_none,tuned,wall,preset:small;batch:0,ok,"));
    assert_non_null(strstr(zg, "zero_grad_wgrad,overwrite,tuned,manual,preset:small;batch:0,ok,"));
    assert_null(strstr(zg, ",error,"));
    assert_null(strstr(zg, ",skipped,"));
    free(zg);
    char *bs = test_read_in(dir, "batch_size.csv");
    assert_non_null(bs);
    assert_non_null(strstr(bs, "batch_size,sweep,reference,wall,preset:tiny;batch:64,ok,"));
    free(bs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_passes_identical_maths_and_fails_different),
        cmocka_unit_test(test_check_catches_a_variant_that_does_not_train),
        cmocka_unit_test(test_bad_config_is_a_failure),
        cmocka_unit_test(test_out_of_memory_is_a_skip),
        cmocka_unit_test(test_warmup_is_not_timed),
        cmocka_unit_test(test_time_to_accuracy_reaches_the_target_with_a_curve),
        cmocka_unit_test(test_axis_flag_and_cuda_without_gpu),
        cmocka_unit_test(test_zero_grad_and_batch_size_run_on_the_cpu),
        cmocka_unit_test(test_time_to_accuracy_repetitions_are_seeded),
        cmocka_unit_test(test_gpu_practices_run_on_cuda),
    };
    return cmocka_run_group_tests(tests, run_practices, cleanup);
}
