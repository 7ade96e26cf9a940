// practice.c: the practice driver (practice.h).
#include "bench/driver/practice.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/image_data.h"
#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"
#include "kernels/pinned.h"
#include "kernels/synth.h"

// Synthetic batches: 2 distinct ones, each made of a pool of at most 256 generated samples.
enum { SYNTH_BATCHES = 2, SYNTH_POOL = 256, EVAL_BATCHES = 4, EVAL_BATCH = 128 };
#define HELD_OUT_INDEX 1000000000ull  // synthetic batches from here on are never trained on
#define SYNTH_NOISE 0.5f

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

static const PracticeVariant *baseline_of(const Practice *p)
{
    for (int i = 0; i < p->variant_count; i++)
        if (p->variants[i].role == HARNESS_BASELINE) return &p->variants[i];
    return NULL;
}

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

// ---- batches --------------------------------------------------------------------------------

// The synthetic plane-wave task (kernels/synth.h), a few batches generated once and, on
// the GPU, kept on the device, so that the steps time the training and nothing else.
typedef struct Synthetic {
    SynthTask task;
    int n, steps, taken;
    bool device;
    float *images[SYNTH_BATCHES];
    int32_t *labels[SYNTH_BATCHES];
    uint64_t next_index;
} Synthetic;

static void synthetic_close(void *ctx)
{
    Synthetic *s = ctx;
    for (int i = 0; i < SYNTH_BATCHES; i++) {
        if (s->device) {
            cudaFree(s->images[i]);
            cudaFree(s->labels[i]);
        } else {
            free(s->images[i]);
            free(s->labels[i]);
        }
        s->images[i] = NULL;
        s->labels[i] = NULL;
    }
}

// Fills batch i (n samples) by repeating a pool of `pool` generated samples: the host
// never holds more than the pool, however large the batch (a sweep to out of memory).
static int synthetic_fill(Synthetic *s, int i, const float *pool_images, const int32_t *pool_labels,
                          int pool, size_t sample)
{
    for (int done = 0; done < s->n; done += pool) {
        int take = s->n - done < pool ? s->n - done : pool;
        float *dst = s->images[i] + (size_t)done * sample;
        int32_t *lab = s->labels[i] + done;
        if (!s->device) {
            memcpy(dst, pool_images, (size_t)take * sample * sizeof(float));
            memcpy(lab, pool_labels, (size_t)take * sizeof(int32_t));
            continue;
        }
        cudaError_t e = cudaMemcpy(dst, pool_images, (size_t)take * sample * sizeof(float),
                                   cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(lab, pool_labels, (size_t)take * sizeof(int32_t), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return check_cuda_failed(e, __FILE__, __LINE__, "device-resident batches");
    }
    return 0;
}

static int synthetic_open(void *ctx, CoreConfig *cfg, const void *arg)
{
    (void)arg;
    Synthetic *s = ctx;
    const CoreModelConfig *m = &cfg->model;
    s->task = (SynthTask){m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    s->n = cfg->batch_size;
    s->device = cfg->backend == CORE_BACKEND_CUDA;
    s->taken = 0;
    size_t sample = (size_t)m->in_channels * m->image_size * m->image_size;
    int pool = s->n < SYNTH_POOL ? s->n : SYNTH_POOL;
    float *images = malloc((size_t)pool * sample * sizeof(float));
    int32_t *labels = malloc((size_t)pool * sizeof(int32_t));
    int rc = images && labels ? 0 : error_set(ERROR_OUT_OF_MEMORY, "synthetic batches: out of memory (host)");
    for (int i = 0; i < SYNTH_BATCHES && rc == 0; i++) {
        synth_batch(&s->task, (uint64_t)i, pool, images, labels);
        size_t bytes = (size_t)s->n * sample * sizeof(float), lbytes = (size_t)s->n * sizeof(int32_t);
        if (s->device) {
            cudaError_t e = cudaMalloc((void **)&s->images[i], bytes);
            if (e == cudaSuccess) e = cudaMalloc((void **)&s->labels[i], lbytes);
            if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "device-resident batches");
        } else {
            s->images[i] = malloc(bytes);
            s->labels[i] = malloc(lbytes);
            if (!s->images[i] || !s->labels[i])
                rc = error_set(ERROR_OUT_OF_MEMORY, "synthetic batches of %d: out of memory (host)", s->n);
        }
        if (rc == 0) rc = synthetic_fill(s, i, images, labels, pool, sample);
    }
    // the copies were synchronous, but the core's non-blocking stream must see them done
    if (rc == 0 && s->device && cudaDeviceSynchronize() != cudaSuccess)
        rc = check_cuda_failed(cudaGetLastError(), __FILE__, __LINE__, "device-resident batches");
    free(images);
    free(labels);
    if (rc != 0) synthetic_close(s);
    return rc;
}

static void synthetic_start(void *ctx) { ((Synthetic *)ctx)->taken = 0; }

static int synthetic_next(void *ctx, CoreBatch *b)
{
    Synthetic *s = ctx;
    if (s->steps > 0 && s->taken == s->steps) {  // one timed iteration is `steps` steps
        s->taken = 0;
        return 0;
    }
    int i = s->taken++ % SYNTH_BATCHES;
    *b = (CoreBatch){s->images[i], s->labels[i], s->n,
                     s->device ? CORE_MEMORY_DEVICE : CORE_MEMORY_HOST};
    return 1;
}

// JPEGs through the loader (--data=images, or a practice that always trains on them): the
// generated dataset (or --data_dir), with the variant's workers and pinning. Reports the
// time the loop waited for each batch, the time spent pinning, and the CPU cores used.
typedef struct Images {
    ImageData data;
    const char *dataset_preset;
    int steps, taken, workers;
    LoaderStats s0;
    double cpu0;
} Images;

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

static int images_open(void *ctx, CoreConfig *cfg, const void *arg)
{
    Images *im = ctx;
    const PracticeLoader *how = arg;
    ImageDataConfig ic = image_data_default_config(cfg->model.image_size, cfg->batch_size);
    ic.data_dir = harness_common()->data_dir;
    ic.dataset_preset = im->dataset_preset;
    ic.seed = cfg->seed;
    LoaderConfig options = {0};
    practice_loader_options(&options);
    ic.timeout_ms = options.timeout_ms;
    ic.max_image_pixels = options.max_image_pixels;
    if (how) {
        ic.num_workers = how->num_workers;
        ic.pin = how->pin;
    }
    im->workers = ic.num_workers;
    im->taken = 0;
    if (ic.pin != LOADER_PIN_NONE) TRY(pinned_check_available());
    if (image_data_open(&ic, &im->data) != 0) return -1;
    cfg->model.num_classes = im->data.all.num_classes;
    cfg->model.in_channels = 3;
    return core_config_validate(cfg);
}

static int images_next(void *ctx, CoreBatch *b)
{
    Images *im = ctx;
    if (im->taken == im->steps) {
        im->taken = 0;
        return 0;
    }
    im->taken++;
    return image_data_next(&im->data, b) == 0 ? 1 : -1;
}

static void images_start(void *ctx)
{
    Images *im = ctx;
    im->taken = 0;
    loader_get_stats(im->data.train_loader, &im->s0);
    im->cpu0 = clock_process_cpu_seconds();
}

static void images_report(void *ctx, HarnessState *st, double seconds, int64_t steps)
{
    Images *im = ctx;
    LoaderStats s1;
    loader_get_stats(im->data.train_loader, &s1);
    double cpu = clock_process_cpu_seconds() - im->cpu0 + s1.worker_cpu_seconds - im->s0.worker_cpu_seconds;
    harness_counter(st, "num_workers", im->workers, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wait_ms_per_step", steps ? 1e3 * (s1.wait_seconds - im->s0.wait_seconds) / steps : 0,
                    HARNESS_COUNTER_PLAIN);
    harness_counter(st, "pin_ms_per_step", steps ? 1e3 * (s1.pin_seconds - im->s0.pin_seconds) / steps : 0,
                    HARNESS_COUNTER_PLAIN);
    harness_counter(st, "cpu_cores_used", seconds > 0 ? cpu / seconds : 0, HARNESS_COUNTER_PLAIN);
}

static void images_close(void *ctx) { image_data_close(&((Images *)ctx)->data); }

// ---- the check against the baseline ---------------------------------------------------------

// The driver's self-test (--practice_selftest): a broken tuned variant swapped in, which
// the check of every practice must catch.
typedef enum {
    SELFTEST_NONE,
    SELFTEST_FROZEN,   // the tuned variant's update over the check's steps is dropped
    SELFTEST_SKIP_ALL, // every step of a tuned variant is treated as an overflow
} Selftest;

__attribute__((constructor)) static void declare_selftest_option(void)
{
    harness_option_str("practice_selftest", "none", NULL,
                       "driver self-test: 'frozen' drops the tuned variants' update, 'skip_all' "
                       "treats every step of theirs as an overflow; either must fail every "
                       "practice with a check (exit status 1); 'none': off");
}

// The self-test asked for; -1 (bad usage, naming the flag) for an unknown value.
static int selftest_mode(Selftest *out)
{
    const char *v = harness_option_str_value("practice_selftest");
    if (!v || !*v || strcmp(v, "none") == 0) *out = SELFTEST_NONE;
    else if (strcmp(v, "frozen") == 0) *out = SELFTEST_FROZEN;
    else if (strcmp(v, "skip_all") == 0) *out = SELFTEST_SKIP_ALL;
    else return error_set(ERROR_BAD_USAGE, "--practice_selftest=%s: want none, frozen or skip_all", v);
    return 0;
}

// GradScaler starts at init_scale (65536), far above what fp16 gradients usually bear, and
// halves it on every overflow: each of its first log2(init_scale) halvings (down to a scale
// of 1, below which scaling no longer explains an overflow) may cost one skipped step, but
// a run in which no step updated is never its start-up. After that, each growth (every
// growth_interval clean steps) may overflow once. Anything beyond is a run that does not
// train, and does less work than one that does.
static int startup_halvings(const AmpScalerConfig *sc)
{
    int halvings = 0;
    if (sc->backoff_factor > 0.0f && sc->backoff_factor < 1.0f)
        for (double s = sc->init_scale; s > 1.0 && halvings < 1000; s *= sc->backoff_factor) halvings++;
    return halvings;
}

int practice_skips_explained(const CoreConfig *cfg, int64_t steps)
{
    if (cfg->precision != CORE_PRECISION_FP16 || steps <= 0) return 0;
    const AmpScalerConfig *sc = &cfg->scaler;
    int64_t startup = startup_halvings(sc);
    if (startup > steps - 1) startup = steps - 1;
    int64_t growths = sc->growth_interval > 0 ? steps / sc->growth_interval : 0;
    return (int)(startup + growths);
}

// One training step; under SELFTEST_SKIP_ALL an overflow: fp16 gets an inf in its gradients
// (the core's own GradScaler skips the step, backs off and counts it); the other precisions
// have no scaler, so the driver drops the update itself (the parameters go back to what
// `scratch` held) and counts it in *driver_skipped.
static int run_step(Core *core, const CoreBatch *b, Selftest selftest, bool fp16, float *scratch,
                    int *driver_skipped)
{
    if (selftest != SELFTEST_SKIP_ALL) return core_step(core, b, NULL);
    if (fp16) {
        TRY(core_inject_grad_fault(core, INFINITY));
        return core_step(core, b, NULL);
    }
    size_t n = core_param_count(core);
    TRY(core_params_get(core, scratch, n));
    TRY(core_step(core, b, NULL));
    TRY(core_params_set(core, scratch, n));
    (*driver_skipped)++;
    return 0;
}

// One run of the check: the parameters at the start and after k steps on the synthetic
// batches 0..k-1 from the seed's init, and the steps it skipped.
typedef struct CheckRun {
    float *before, *after;
    size_t count;
    int skipped;
} CheckRun;

static void check_run_free(CheckRun *r)
{
    free(r->before);
    free(r->after);
    *r = (CheckRun){0};
}

static int check_run(const CoreConfig *cfg, int k, Selftest selftest, CheckRun *out)
{
    *out = (CheckRun){0};
    Core *core = NULL;
    TRY(core_create(cfg, &core));
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    size_t img = (size_t)cfg->batch_size * m->in_channels * m->image_size * m->image_size;
    float *images = malloc(img * sizeof(float));
    int32_t *labels = malloc((size_t)cfg->batch_size * sizeof(int32_t));
    out->count = core_param_count(core);
    out->before = malloc(out->count * sizeof(float));
    out->after = malloc(out->count * sizeof(float));
    int rc = images && labels && out->before && out->after
                 ? 0 : error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    if (rc == 0) rc = core_params_get(core, out->before, out->count);
    int driver_skipped = 0;
    for (int s = 0; s < k && rc == 0; s++) {
        synth_batch(&task, (uint64_t)s, cfg->batch_size, images, labels);
        CoreBatch b = {images, labels, cfg->batch_size, CORE_MEMORY_HOST};
        rc = run_step(core, &b, selftest, cfg->precision == CORE_PRECISION_FP16, out->after, &driver_skipped);
    }
    CoreStats cs;
    if (rc == 0) rc = core_stats(core, &cs);
    if (rc == 0) rc = core_params_get(core, out->after, out->count);
    if (rc == 0) out->skipped = cs.skipped_steps + driver_skipped;
    if (rc == 0 && selftest == SELFTEST_FROZEN) memcpy(out->after, out->before, out->count * sizeof(float));
    free(images);
    free(labels);
    core_free(core);
    if (rc != 0) check_run_free(out);
    return rc;
}

// fp16: the steps GradScaler's start-up skips before its first update, on the check's
// batches from cfg's init_scale, trying at most `limit` steps; *updated: whether one did.
static int startup_skips(const CoreConfig *cfg, int limit, Selftest selftest, int *leading, bool *updated)
{
    *leading = 0;
    *updated = false;
    Core *core = NULL;
    TRY(core_create(cfg, &core));
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    size_t img = (size_t)cfg->batch_size * m->in_channels * m->image_size * m->image_size;
    float *images = malloc(img * sizeof(float));
    int32_t *labels = malloc((size_t)cfg->batch_size * sizeof(int32_t));
    int rc = images && labels ? 0 : error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    int unused = 0;
    for (int s = 0; s < limit && rc == 0 && !*updated; s++) {
        synth_batch(&task, (uint64_t)s, cfg->batch_size, images, labels);
        CoreBatch b = {images, labels, cfg->batch_size, CORE_MEMORY_HOST};
        CoreStats cs;
        rc = run_step(core, &b, selftest, true, NULL, &unused);
        if (rc == 0) rc = core_stats(core, &cs);
        if (rc == 0 && cs.skipped_steps > *leading) (*leading)++;
        else if (rc == 0) *updated = true;
    }
    free(images);
    free(labels);
    core_free(core);
    return rc;
}

// The check's figures for one tuned run (practice.h's counters check_*).
typedef struct CheckResult {
    double rel;            // ||tuned update - baseline update|| / ||baseline update||
    double base_moved;     // ||baseline update|| / ||initial parameters||: how far k steps go
    bool identical;        // the parameters agree bit for bit (start and end)
    int skipped, allowed;  // the tuned run's skipped steps; how many its start-up explains
    int steps;             // the steps `skipped` is of
    bool scaled;           // fp16: GradScaler ran (else no skip is explained)
    int skipped_after;     // fp16 after start-up skips: the steps the settled run still skipped
    double settled_scale;  // the loss scale the settled run started at (0: no rerun)
} CheckResult;

// Relative L2 of the tuned run's update against the baseline's (each from its own start):
// the parameters move ~1e-3 of themselves in k steps, so only the update shows a variant
// that trains too little, not at all, or in the wrong direction.
static void compare_updates(const CheckRun *base, const CheckRun *tuned, CheckResult *r)
{
    double num = 0.0, den = 0.0, p0 = 0.0;
    for (size_t i = 0; i < base->count; i++) {
        double ub = (double)base->after[i] - base->before[i];
        double ut = (double)tuned->after[i] - tuned->before[i];
        num += (ut - ub) * (ut - ub);
        den += ub * ub;
        p0 += (double)base->before[i] * base->before[i];
    }
    // a baseline that did not move vouches for nothing: any difference is infinite
    r->rel = den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0.0;
    r->base_moved = p0 > 0 ? sqrt(den / p0) : sqrt(den);
    r->identical = memcmp(base->before, tuned->before, base->count * sizeof(float)) == 0 &&
                   memcmp(base->after, tuned->after, base->count * sizeof(float)) == 0;
}

double practice_update_rel_diff(const float *before, const float *base_after, const float *tuned_after,
                                size_t count)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < count; i++) {
        double ub = (double)base_after[i] - before[i], ut = (double)tuned_after[i] - before[i];
        num += (ut - ub) * (ut - ub);
        den += ub * ub;
    }
    return den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0.0;
}

// Compares the tuned config with the baseline's after k steps from the same seed. An fp16
// run whose steps overflowed is GradScaler's start-up when it updates within log2(init_scale)
// steps from the start: it is then run again from the scale its start-up settled at (a power
// of 2: the same maths), so that its update is compared step for step, and that run must
// skip nothing. 0 or -1.
static int check_against_baseline(const CoreConfig *base, const CoreConfig *tuned, int k,
                                  Selftest selftest, CheckResult *r)
{
    *r = (CheckResult){0};
    CheckRun b = {0}, t = {0};
    TRY(check_run(base, k, SELFTEST_NONE, &b));
    int rc = check_run(tuned, k, selftest, &t);
    if (rc == 0 && b.count != t.count)
        rc = error_set(ERROR_BAD_USAGE, "check: the variants have different parameter counts");
    if (rc == 0) {
        r->skipped = t.skipped;
        r->steps = k;
        r->allowed = 0;  // without GradScaler no skipped step is explained
        r->scaled = tuned->precision == CORE_PRECISION_FP16;
    }
    if (rc == 0 && tuned->precision == CORE_PRECISION_FP16 && t.skipped > 0) {
        int halvings = startup_halvings(&tuned->scaler), leading = 0;
        bool updated = false;
        rc = startup_skips(tuned, halvings + 1, selftest, &leading, &updated);
        r->allowed = halvings;
        if (rc == 0 && !updated) {  // no update within the start-up: every step skipped
            r->skipped = leading;
            r->steps = leading;
        } else if (rc == 0) {
            CoreConfig settled = *tuned;
            for (int i = 0; i < leading; i++) settled.scaler.init_scale *= settled.scaler.backoff_factor;
            r->settled_scale = settled.scaler.init_scale;
            r->skipped = leading;
            r->steps = leading + 1;
            check_run_free(&t);
            rc = check_run(&settled, k, selftest, &t);
            if (rc == 0) r->skipped_after = t.skipped;
        }
    }
    if (rc == 0) compare_updates(&b, &t, r);
    check_run_free(&b);
    check_run_free(&t);
    return rc;
}

// ---- counters and labels ----------------------------------------------------------------------

static void core_counters(HarnessState *st, Core *core, const CoreConfig *cfg, const char *extra)
{
    CoreStats cs;
    if (core_stats(core, &cs) != 0) return;
    harness_counter(st, "peak_mib", cs.peak_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "device_used_mib", cs.device_used_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "batch", cfg->batch_size, HARNESS_COUNTER_PLAIN);
    char algos[1536], label[2300];
    if (core_conv_algo_summary(core, algos, sizeof algos) != 0) snprintf(algos, sizeof algos, "?");
    snprintf(label, sizeof label, "%s backend %s, batch %d, %dx%d; %s; conv algorithms: %s",
             core_backend_name(cs.backend), core_precision_name(cfg->precision), cfg->batch_size,
             cfg->model.image_size, cfg->model.image_size, extra, algos);
    harness_set_label(st, label);
}

// ---- the practice's own hooks ------------------------------------------------------------------

static int hooks_core_created(const Practice *p, HarnessState *st, Core *core, const CoreConfig *cfg)
{
    return p->hooks && p->hooks->core_created ? p->hooks->core_created(p->hooks->ctx, st, core, cfg) : 0;
}

// ---- throughput ---------------------------------------------------------------------------------

// The check's verdict as a failure message; false when the tuned run passed.
static bool check_failed(const Practice *p, const CheckResult *r, int k, char *msg, size_t size)
{
    if (r->skipped > r->allowed && r->scaled) {
        snprintf(msg, size, "the check's run skipped %d of %d steps (overflow); GradScaler's start-up "
                 "explains at most %d before an update", r->skipped, r->steps, r->allowed);
        return true;
    }
    if (r->skipped > r->allowed) {
        snprintf(msg, size, "the check's run skipped %d of %d steps (overflow); without GradScaler "
                 "none is explained", r->skipped, r->steps);
        return true;
    }
    if (r->skipped_after > 0) {
        snprintf(msg, size, "after GradScaler's start-up (%d skipped steps) the check's run, started "
                 "at the settled scale %g, still skipped %d of %d steps", r->skipped, r->settled_scale,
                 r->skipped_after, k);
        return true;
    }
    bool wrong = p->tolerance > 0 ? !(r->rel <= p->tolerance) : !r->identical;
    if (wrong) {
        char tol[48];
        if (p->tolerance > 0) snprintf(tol, sizeof tol, "tolerance %g", p->tolerance);
        else snprintf(tol, sizeof tol, "bit-identical wanted");
        snprintf(msg, size, "parameters differ from the baseline's after %d steps: the update differs "
                 "by %.3g of the baseline's update (relative L2; %s; the baseline moved %.3g of its "
                 "parameters)", k, r->rel, tol, r->base_moved);
    }
    return wrong;
}

static void run_throughput(HarnessState *st, const Practice *p, const PracticeVariant *v,
                           CoreConfig *cfg, const PracticeSource *src)
{
    int warmup = p->warmup_steps > 0 ? p->warmup_steps : 3;
    int k = p->check_steps > 0 ? p->check_steps : 3;
    const PracticeVariant *base = baseline_of(p);
    bool checked = p->check == PRACTICE_CHECK_PARAMS && v->role == HARNESS_TUNED && base;
    Selftest selftest = SELFTEST_NONE;
    if (selftest_mode(&selftest) != 0) {
        practice_fail_or_skip(st, "the self-test");
        return;
    }
    if (!checked) selftest = SELFTEST_NONE;  // the self-test breaks what a check must catch
    if (src->open(src->ctx, cfg, v->source_arg) != 0) {
        practice_fail_or_skip(st, "preparing the batches");
        return;
    }
    // The check first, on cores of its own: the same start and batches for both variants.
    CheckResult check = {.identical = true};
    char check_msg[400] = "";
    bool wrong = false;
    if (checked) {
        CoreConfig bc = *cfg;
        if (practice_config(st, cfg->backend, base->change, &bc) != 0 ||
            check_against_baseline(&bc, cfg, k, selftest, &check) != 0) {
            practice_fail_or_skip(st, "checking against the baseline");
            src->close(src->ctx);
            return;
        }
        wrong = check_failed(p, &check, k, check_msg, sizeof check_msg);
    }
    Core *core = NULL;
    float *scratch = NULL;
    int made = core_create(cfg, &core);
    if (made == 0) made = hooks_core_created(p, st, core, cfg);
    if (made == 0 && selftest == SELFTEST_SKIP_ALL &&  // where the driver puts parameters back
        !(scratch = malloc(core_param_count(core) * sizeof(float))))
        made = error_set(ERROR_OUT_OF_MEMORY, "self-test: out of memory (host)");
    if (made != 0) {
        practice_fail_or_skip(st, "creating the core");
        core_free(core);
        src->close(src->ctx);
        return;
    }
    bool fp16 = cfg->precision == CORE_PRECISION_FP16;
    int driver_skipped = 0;
    // Untimed warm-up: module loading, cuBLAS/cuDNN set-up and plans, first touch.
    int rc = 0;
    CoreBatch b;
    for (int i = 0; i < warmup && rc >= 0; i++) {
        rc = src->next(src->ctx, &b);
        if (rc == 0) rc = src->next(src->ctx, &b);  // an epoch ended: the next one
        if (rc > 0 && run_step(core, &b, selftest, fp16, scratch, &driver_skipped) != 0) rc = -1;
    }
    if (rc >= 0 && core_sync(core) != 0) rc = -1;
    if (rc < 0) {
        practice_fail_or_skip(st, "warm-up");
        core_free(core);
        free(scratch);
        src->close(src->ctx);
        return;
    }
    if (src->start) src->start(src->ctx);
    int64_t steps = 0, images = 0;
    double t0 = clock_seconds();
    while (rc >= 0 && harness_keep_running(st)) {
        while ((rc = src->next(src->ctx, &b)) > 0) {
            if (run_step(core, &b, selftest, fp16, scratch, &driver_skipped) != 0) {
                rc = -1;
                break;
            }
            steps++;
            images += b.n;
        }
        if (rc >= 0 && core_sync(core) != 0) rc = -1;
    }
    double seconds = clock_seconds() - t0;
    CoreStats cs;
    if (rc >= 0 && core_stats(core, &cs) != 0) rc = -1;
    if (rc < 0) {
        practice_fail_or_skip(st, "training");
    } else {
        // A run that skips steps does less work and looks faster: every step it took (warm-up
        // and timed) counts against what GradScaler's start-up explains.
        int64_t taken = warmup + steps;
        int skipped = cs.skipped_steps + driver_skipped;
        int explained = practice_skips_explained(cfg, taken);
        harness_set_items_processed(st, images);
        harness_counter(st, "images_per_second", (double)images, HARNESS_COUNTER_RATE);
        harness_counter(st, "step_ms", steps ? 1e3 * seconds / steps : 0, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
        if (fp16 || skipped > 0) {
            harness_counter(st, "skipped_steps", skipped, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "skipped_steps_explained", explained, HARNESS_COUNTER_PLAIN);
        }
        if (checked) {
            harness_counter(st, "check_rel_diff", check.rel, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "check_baseline_moved", check.base_moved, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "check_skipped_steps", check.skipped + check.skipped_after,
                            HARNESS_COUNTER_PLAIN);
        }
        if (src->report) src->report(src->ctx, st, seconds, steps);
        char extra[256];
        snprintf(extra, sizeof extra, "%d untimed warm-up steps%s%s", warmup, p->label ? "; " : "",
                 p->label ? p->label : "");
        core_counters(st, core, cfg, extra);
        if (wrong) {
            harness_fail(st, check_msg);
        } else if (skipped > explained) {
            char msg[300];
            snprintf(msg, sizeof msg, "skipped %d of %lld steps (warm-up and timed; overflow); "
                     "GradScaler's start-up explains at most %d", skipped, (long long)taken, explained);
            harness_fail(st, msg);
        } else if (p->hooks && p->hooks->finish) {
            PracticeOutcome o = {.steps = steps, .seconds = seconds};
            p->hooks->finish(p->hooks->ctx, st, core, cfg, v, &o);
        }
    }
    core_free(core);
    free(scratch);
    src->close(src->ctx);
}

// ---- time to accuracy --------------------------------------------------------------------------

// Held-out accuracy on the synthetic batches no step trains on.
static int held_out_accuracy(Core *core, const SynthTask *task, float *images, int32_t *labels,
                             double *accuracy)
{
    double correct = 0.0;
    for (int e = 0; e < EVAL_BATCHES; e++) {
        synth_batch(task, HELD_OUT_INDEX + (uint64_t)e, EVAL_BATCH, images, labels);
        CoreBatch b = {images, labels, EVAL_BATCH, CORE_MEMORY_HOST};
        CoreEvalResult r;
        TRY(core_eval(core, &b, &r));
        correct += (double)r.accuracy * EVAL_BATCH;
    }
    *accuracy = correct / (EVAL_BATCHES * EVAL_BATCH);
    return 0;
}

static void run_time_to_accuracy(HarnessState *st, const Practice *p, const PracticeVariant *v,
                                 const CoreConfig *cfg)
{
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    int n = cfg->batch_size > EVAL_BATCH ? cfg->batch_size : EVAL_BATCH;
    size_t img = (size_t)n * m->in_channels * m->image_size * m->image_size;
    float *images = malloc(img * sizeof(float));
    int32_t *labels = malloc((size_t)n * sizeof(int32_t));
    Core *core = NULL;
    if (!images || !labels) {
        error_set(ERROR_OUT_OF_MEMORY, "time to accuracy: out of memory (host)");
        practice_fail_or_skip(st, "preparing the batches");
    } else if (core_create(cfg, &core) != 0 || hooks_core_created(p, st, core, cfg) != 0) {
        practice_fail_or_skip(st, "creating the core");
        core_free(core);
        core = NULL;
    }
    if (!core) {
        free(images);
        free(labels);
        return;
    }
    int eval_every = p->eval_every > 0 ? p->eval_every : 10;
    int rc = 0, step = 0;
    bool reached = false, diverged = false;
    double train_s = 0.0, accuracy = 0.0, best = 0.0;
    int64_t images_seen = 0;
    while (rc == 0 && harness_keep_running(st)) {
        for (step = 0; step < p->max_steps && rc == 0 && !reached && !diverged; step++) {
            synth_batch(&task, (uint64_t)step, cfg->batch_size, images, labels);  // not timed
            CoreBatch b = {images, labels, cfg->batch_size, CORE_MEMORY_HOST};
            CoreStepResult r;
            double t0 = clock_seconds();
            rc = core_step(core, &b, &r);
            bool eval = (step + 1) % eval_every == 0 || step + 1 == p->max_steps;
            if (rc == 0 && eval) rc = core_sync(core);
            train_s += clock_seconds() - t0;
            if (rc != 0) break;
            images_seen += b.n;
            if (r.loss_ready && !isfinite(r.loss)) diverged = true;
            if (r.loss_ready) harness_curve_point(st, "train_loss", step + 1, images_seen, train_s, r.loss);
            if (p->hooks && p->hooks->after_step &&
                p->hooks->after_step(p->hooks->ctx, st, core, step, images_seen, train_s, &r) != 0) {
                rc = -1;
                break;
            }
            if (!eval || diverged) continue;
            rc = held_out_accuracy(core, &task, images, labels, &accuracy);
            if (rc != 0) break;
            if (accuracy > best) best = accuracy;
            harness_curve_point(st, "heldout_accuracy", step + 1, images_seen, train_s, accuracy);
            reached = accuracy >= p->target_accuracy;
        }
        harness_set_iteration_time(st, train_s);
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "training to the target");
    } else {
        harness_counter(st, "reached_target", reached, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "diverged", diverged, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "steps", step, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "images_seen", (double)images_seen, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "train_seconds", train_s, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "final_accuracy", accuracy, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "best_accuracy", best, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "peak_lr", core_lr_at(&cfg->optim, cfg->batch_size, cfg->optim.warmup_steps),
                        HARNESS_COUNTER_PLAIN);
        char extra[256];
        if (reached)
            snprintf(extra, sizeof extra, "reached %.2f held-out accuracy after %d steps", p->target_accuracy, step);
        else if (diverged)
            snprintf(extra, sizeof extra, "diverged (loss not finite) at step %d", step);
        else
            snprintf(extra, sizeof extra, "missed %.2f held-out accuracy in %d steps (best %.3f)",
                     p->target_accuracy, p->max_steps, best);
        core_counters(st, core, cfg, extra);
        if (p->hooks && p->hooks->finish) {
            PracticeOutcome o = {.steps = step, .seconds = train_s, .reached = reached, .diverged = diverged,
                                 .final_accuracy = accuracy, .best_accuracy = best};
            p->hooks->finish(p->hooks->ctx, st, core, cfg, v, &o);
        }
    }
    core_free(core);
    free(images);
    free(labels);
}

// ---- the benchmark -------------------------------------------------------------------------------

static void run_practice(HarnessState *st, void *user)
{
    const PracticeRun *r = user;
    const Practice *p = r->practice;
    const PracticeVariant *v = &p->variants[r->variant];
    CoreBackend backend;
    if (!practice_backend(st, p->gpu_only, &backend)) return;
    CoreConfig cfg;
    if (practice_config(st, backend, v->change, &cfg) != 0) {
        practice_fail_or_skip(st, "the config");
        return;
    }
    if (p->mode == PRACTICE_TIME_TO_ACCURACY) {
        run_time_to_accuracy(st, p, v, &cfg);
        return;
    }
    Synthetic synthetic = {.steps = p->steps > 0 ? p->steps : 10};
    Images images = {.steps = p->steps > 0 ? p->steps : 10, .dataset_preset = p->dataset_preset};
    PracticeSource own = {synthetic_open, synthetic_next, synthetic_start, NULL, synthetic_close,
                          &synthetic};
    const char *data = harness_common()->data;
    if (p->source) own = *p->source;
    else if (p->images || (data && strcmp(data, "images") == 0))
        own = (PracticeSource){images_open, images_next, images_start, images_report, images_close,
                               &images};
    run_throughput(st, p, v, &cfg, &own);
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
        harness_register(&(HarnessSpec){
            .practice = p->name, .variant = p->variants[i].name, .role = p->variants[i].role,
            .timing = tta ? HARNESS_TIMING_MANUAL : HARNESS_TIMING_WALL, .fn = run_practice,
            .user = r,
            .axes = {{"preset", p->presets, true}, {"batch", p->batches ? p->batches : "0", false}},
            .unit = tta ? HARNESS_S : HARNESS_MS, .min_time = p->min_time,
            .iterations = tta ? 1 : 0});
    }
}

// ---- batches for a program's own step loops (practice.h) ----

void practice_batch_free(PracticeBatch *b)
{
    if (b->device) {
        cudaFree(b->images);
        cudaFree(b->labels);
    } else {
        free(b->images);
        free(b->labels);
    }
    *b = (PracticeBatch){0};
}

int practice_batch_make(PracticeBatch *b, const CoreConfig *cfg, int max_size)
{
    const CoreModelConfig *m = &cfg->model;
    size_t count = (size_t)cfg->batch_size * m->in_channels * max_size * max_size;
    SynthTask task = {m->in_channels, max_size, m->num_classes, SYNTH_NOISE, cfg->seed};
    float *images = malloc(count * sizeof(float));
    int32_t *labels = malloc((size_t)cfg->batch_size * sizeof(int32_t));
    *b = (PracticeBatch){images, labels, cfg->batch_size, false};
    if (!images || !labels) {
        practice_batch_free(b);
        return error_set(ERROR_OUT_OF_MEMORY, "batches: out of memory (host)");
    }
    synth_batch(&task, 0, cfg->batch_size, images, labels);
    if (cfg->backend != CORE_BACKEND_CUDA) return 0;
    *b = (PracticeBatch){NULL, NULL, cfg->batch_size, true};
    cudaError_t e = cudaMalloc((void **)&b->images, count * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&b->labels, (size_t)cfg->batch_size * sizeof(int32_t));
    if (e == cudaSuccess) e = cudaMemcpy(b->images, images, count * sizeof(float), cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(b->labels, labels, (size_t)cfg->batch_size * sizeof(int32_t), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();  // the core's stream does not order against these
    free(images);
    free(labels);
    if (e != cudaSuccess) {
        practice_batch_free(b);
        return check_cuda_failed(e, __FILE__, __LINE__, "device-resident batches");
    }
    return 0;
}

CoreBatch practice_batch_view(const PracticeBatch *b, int n)
{
    return (CoreBatch){b->images, b->labels, n, b->device ? CORE_MEMORY_DEVICE : CORE_MEMORY_HOST};
}
