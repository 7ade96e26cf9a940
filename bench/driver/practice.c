// practice.c: the practice driver's front (practice.h; the rest is described in
// practice_internal.h): the options every program on the driver takes (loader limits,
// the self-test), the backend a run uses and GPU gating, errors mapped to skips or
// failures, the config of a run's axes, and one benchmark per variant, registered with
// the harness, that picks the batches and the mode and hands over to practice_run.c.
#include "bench/driver/practice.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench/driver/practice_internal.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"

typedef struct PracticeRun {
    const Practice *practice;
    int variant;
} PracticeRun;

// ---- gating and errors --------------------------------------------------------------------

bool practice_skip_without_gpu(HarnessState *st)
{
    char why[256];
    if (gpu_device_available(why, sizeof why)) return false;
    harness_skip(st, why);
    return true;
}

bool practice_backend(HarnessState *st, bool gpu_only, CoreBackend *out)
{
    CoreBackend b = CORE_BACKEND_AUTO;
    core_backend_parse(harness_common()->backend, &b);  // checked by the harness
    if (b == CORE_BACKEND_AUTO) {
        char why[256];
        b = gpu_device_available(why, sizeof why) ? CORE_BACKEND_CUDA : CORE_BACKEND_CPU;
    }
    if (b == CORE_BACKEND_CUDA && practice_skip_without_gpu(st)) return false;
    if (b != CORE_BACKEND_CUDA && gpu_only) {
        harness_skip(st, "no CUDA device (this practice only means something on a GPU)");
        return false;
    }
    *out = b;
    return true;
}

bool practice_on_gpu(void)
{
    CoreBackend b = CORE_BACKEND_AUTO;
    core_backend_parse(harness_common()->backend, &b);
    return b == CORE_BACKEND_CUDA || (b == CORE_BACKEND_AUTO && gpu_device_available(NULL, 0));
}

void practice_fail_or_skip(HarnessState *st, const char *what)
{
    char msg[2300];
    snprintf(msg, sizeof msg, "%s: %s", what, error_message());
    // A missing tool (mpirun) fails where setup could install it; the GPU check runs where
    // nothing can be installed, so there it is a skip that names the tool.
    bool missing_tool_skips = error_kind() == ERROR_MISSING_TOOL && error_in_gpu_check();
    if (error_is_machine_limit() || missing_tool_skips) harness_skip(st, msg);
    else harness_fail(st, msg);
}

// ---- configs --------------------------------------------------------------------------------

int practice_config(HarnessState *st, CoreBackend b, PracticeChange change, CoreConfig *cfg)
{
    if (core_config_preset(cfg, harness_axis_str(st, "preset")) != 0) return -1;
    int64_t batch = harness_axis_int(st, "batch");
    if (batch < 0 || batch > 1 << 20)
        return error_set(ERROR_BAD_USAGE, "batch %lld out of range 0..%d", (long long)batch, 1 << 20);
    if (batch > 0) cfg->batch_size = (int)batch;
    cfg->backend = b;
    if (change) change(cfg);
    return core_config_validate(cfg);
}

bool practice_run_config(HarnessState *st, bool gpu_only, PracticeChange change, CoreConfig *cfg)
{
    CoreBackend backend;
    if (!practice_backend(st, gpu_only, &backend)) return false;
    if (practice_config(st, backend, change, cfg) != 0) {
        practice_fail_or_skip(st, "the config");
        return false;
    }
    return true;
}

// ---- options --------------------------------------------------------------------------------
// Both constructors stay in this file: it is linked into every program that uses any of the
// driver (so each has all three options), and within one file they run in order, which is
// the order --help lists the options in.

// Declared before main runs (a constructor): options must exist before harness_init, and
// this way every program on the driver has them without a line of its own.
__attribute__((constructor)) static void declare_loader_options(void)
{
    harness_option_int("loader-timeout", LOADER_PROGRAM_TIMEOUT_S, 0, 7 * 86400, "BENCH_LOADER_TIMEOUT",
                       "seconds a loader batch may take before the run fails, naming the stuck "
                       "worker's pid (0: no limit)");
    harness_option_int("max-image-pixels", 0, 0, INT64_MAX, "BENCH_MAX_IMAGE_PIXELS",
                       "largest JPEG (width x height) the loaders decode; larger files are bad "
                       "input (0: PIL's default, 178956970)");
}

void practice_loader_options(LoaderConfig *cfg)
{
    cfg->timeout_ms = (int)(1000 * harness_option_int_value("loader-timeout"));
    cfg->max_image_pixels = harness_option_int_value("max-image-pixels");
}

// The driver's self-test (practice_internal.h's Selftest), which practice_check.c's check
// of every practice must catch.
__attribute__((constructor)) static void declare_selftest_option(void)
{
    harness_option_str("practice_selftest", "none", NULL,
                       "driver self-test: a broken tuned variant that every practice's check must "
                       "catch (exit status 1): 'frozen' drops the tuned update, 'skip_all' treats "
                       "every step as an overflow, 'half_lr' halves the learning rate, 'drop_step' "
                       "leaves out the update of one checked step, 'clip_before_unscale' (fp16 with "
                       "clipping) clips the still-scaled gradients, 'fold_ignore_affine' (bench_bn_fold "
                       "only) folds BN without gamma and beta; 'none': off");
}

// training: the mode breaks a training practice (the driver's runs); the others break one
// program's own practice (fold_ignore_affine: bench_bn_fold's fold).
static const struct { const char *name; Selftest mode; bool training; } selftest_names[] = {
    {"none", SELFTEST_NONE, true},
    {"frozen", SELFTEST_FROZEN, true},
    {"skip_all", SELFTEST_SKIP_ALL, true},
    {"half_lr", SELFTEST_HALF_LR, true},
    {"drop_step", SELFTEST_DROP_STEP, true},
    {"clip_before_unscale", SELFTEST_CLIP_BEFORE_UNSCALE, true},
    {"fold_ignore_affine", SELFTEST_FOLD_IGNORE_AFFINE, false},
};

int practice_selftest_mode(Selftest *out)
{
    const char *v = harness_option_str_value("practice_selftest");
    *out = SELFTEST_NONE;
    if (!v || !*v) return 0;
    for (size_t i = 0; i < sizeof selftest_names / sizeof selftest_names[0]; i++)
        if (strcmp(v, selftest_names[i].name) == 0) {
            *out = selftest_names[i].mode;
            return 0;
        }
    return error_set(ERROR_BAD_USAGE, "--practice_selftest=%s: want none, frozen, skip_all, half_lr, drop_step, "
                     "clip_before_unscale or fold_ignore_affine", v);
}

int practice_training_selftest_mode(Selftest *out)
{
    TRY(practice_selftest_mode(out));
    for (size_t i = 0; i < sizeof selftest_names / sizeof selftest_names[0]; i++)
        if (selftest_names[i].mode == *out && !selftest_names[i].training)
            return error_set(ERROR_BAD_USAGE, "--practice_selftest=%s breaks another practice than a "
                             "training one (bench_bn_fold's fold), not this program's", selftest_names[i].name);
    return 0;
}

int practice_selftest_broken(bool *broken)
{
    Selftest mode = SELFTEST_NONE;
    *broken = false;
    if (practice_selftest_mode(&mode) != 0) return -1;
    *broken = mode != SELFTEST_NONE;
    return 0;
}

// ---- the benchmark -------------------------------------------------------------------------------

static void run_practice(HarnessState *st, void *user)
{
    const PracticeRun *r = user;
    const Practice *p = r->practice;
    const PracticeVariant *v = &p->variants[r->variant];
    CoreConfig cfg;
    if (!practice_run_config(st, p->gpu_only, v->change, &cfg)) return;
    if (cfg.model.kind == CORE_MODEL_GPT && cfg.backend == CORE_BACKEND_CUDA) {
        harness_skip(st, "the CUDA backend runs no gpt model yet (docs/transformer.md); "
                         "--backend=cpu runs this row");
        return;
    }
    if (cfg.model.kind == CORE_MODEL_GPT && (p->mode == PRACTICE_TIME_TO_ACCURACY || p->source ||
                                             !practice_uses_synthetic(p))) {
        harness_skip(st, "a gpt preset trains on the driver's generated token batches only (no "
                         "images, no practice's own source, no time to accuracy yet)");
        return;
    }
    if (p->mode == PRACTICE_TIME_TO_ACCURACY) {
        practice_run_time_to_accuracy(st, p, v, &cfg);
        return;
    }
    practice_run_throughput(st, p, v, &cfg);
}

#define PRACTICE_MAX_RUNS 256

void practice_register(const Practice *p)
{
    static PracticeRun runs[PRACTICE_MAX_RUNS];  // what the harness calls back with
    static int nruns;
    for (int i = 0; i < p->variant_count; i++) {
        if (nruns == PRACTICE_MAX_RUNS) {
            fprintf(stderr, "practice: more than %d variants registered; %s/%s left out\n",
                    PRACTICE_MAX_RUNS, p->name, p->variants[i].name);
            return;
        }
        PracticeRun *r = &runs[nruns++];
        *r = (PracticeRun){p, i};
        bool tta = p->mode == PRACTICE_TIME_TO_ACCURACY;
        // the driver's synthetic batches on a CPU backend: short repetitions (practice.h)
        double min_time = p->min_time;
        if (!tta && practice_uses_synthetic(p) && !practice_on_gpu() && !(min_time > 0 && min_time <= PRACTICE_CPU_MIN_TIME))
            min_time = PRACTICE_CPU_MIN_TIME;
        harness_register(&(HarnessSpec){
            .practice = p->name, .variant = p->variants[i].name, .role = p->variants[i].role,
            .timing = tta ? HARNESS_TIMING_MANUAL : HARNESS_TIMING_WALL, .fn = run_practice,
            .user = r,
            .axes = {{"preset", p->presets, true}, {"batch", p->batches ? p->batches : "0", false}},
            .unit = tta ? HARNESS_S : HARNESS_MS, .min_time = min_time,
            .iterations = tta ? 1 : 0, .gpu_only = p->gpu_only});
    }
}
