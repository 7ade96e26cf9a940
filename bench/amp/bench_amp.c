// bench_amp.c: mixed precision (torch.autocast + GradScaler), bf16 and TF32.
// Micro, GPU (CUDA events around each call alone, warm caches: the same operands every
// iteration):
//   amp_gemm/*: one cuBLAS GEMM, square n = m = k in 1024..16384 (with 10240, the size of
//     the TF32 claim), strict fp32 (the baseline: PyTorch's default for matmuls) vs TF32, fp16 and bf16 (fp32 accumulate);
//     TFLOP/s and the fraction of the GPU's dense peak for that type (bench/amp/amp_peak.c);
//     sampled entries checked against the exact product (amp_gemm.h states tolerances);
//     fp32_strict and tf32 also run the strict-fp32 probe (bench/amp/amp_probe.h: operands TF32
//     cannot represent): probe_err, and for fp32_strict probe_tf32_err; the strict row fails
//     unless its probe error is below AMP_PROBE_STRICT_LIMIT, which TF32 rounding exceeds.
//   amp_gemm_linear/*: the forward GEMMs of each preset's linear layers, the same way.
//   amp_conv/*: cuDNN forward, backward-data and backward-filter of every ResNet-18
//     convolution shape, per layout, fp32 (PyTorch's default: TF32 allowed) vs fp16 and
//     bf16; amp_conv_tf32/*: strict fp32 vs TF32. Forward rows stored in fp32 run the
//     strict-fp32 probe too (probe_err; a strict row at or above the limit fails).
// Macro, GPU (wall clock over 10 steps ending in a synchronize, through the practice
//   driver): amp/* (NCHW) and amp_nhwc/* (channels_last): training steps of each preset,
//   fp32 (baseline) vs tf32, fp16 + GradScaler, bf16; amp_tf32/*: strict fp32 vs TF32;
//   amp_strict/*: strict fp32 vs fp16 and bf16 (the mixed-precision guides' baseline).
//   Step time, images/s, peak memory; the update after 3 steps is checked against the
//   baseline's (relative L2 of its update <= MACRO_TOLERANCE), and an fp16 run must not skip
//   more steps than GradScaler's start-up explains (the driver's skipped_steps).
// Parity, CPU and GPU (amp_parity/*): time to the same held-out accuracy for fp32, fp16 +
//   GradScaler and bf16; steps, and training wall time; the tuned run fails when it
//   does not reach the target the baseline reached, or its best accuracy differs from
//   the baseline's by more than PARITY_TOLERANCE. The CPU backend computes in fp32 (fp16
//   runs the GradScaler path), so there its steps equal fp32's: the honest CPU answer.
// GradScaler in action, CPU and GPU:
//   amp_scaler/*: fp16 runs to the target with gradient clipping at CLIP_NORM, in the
//     right order (unscale, then clip: the baseline) and in the mistaken one (clip the
//     still-scaled gradients, then unscale; role reference, never the core's default):
//     the norm each clips at, how often it clips, and what it does to convergence. The
//     loss scale, the skipped steps and the clipped norm of every step go to the
//     .curves.csv (metrics loss_scale, skipped_steps, clip_norm_seen), as do amp_parity's.
//   amp_scaler_cost/*: fp16 training steps, and one GradScaler pass (unscale + inf/nan
//     check over every gradient, then the scale update) with the core's own code, as a
//     share of the step.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/amp/amp_conv.h"
#include "bench/amp/amp_gemm.h"
#include "bench/amp/amp_peak.h"
#include "bench/amp/amp_probe.h"
#include "bench/amp/amp_scaler.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/error.h"
#include "kernels/model.h"

// Relative L2 of the update after 3 steps vs fp32's (of fp32's update). fp16 and bf16 round
// every activation and gradient (2^-11, 2^-8), TF32 every convolution and GEMM input (2^-11);
// fp32 order alone moves the update by 5e-4 (small, 3 steps: fast CPU vs reference, measured;
// on the CPU every precision computes in fp32, so the measured fp16/bf16 figure is 0). A
// frozen update is 1, an update not unscaled 65535, the first of 3 steps skipped ~0.5
// (measured, fp16 on the CPU: tiny 0.49, mlp 0.57, small 0.51): all far above. A start-up
// skip is taken out (the driver reruns from the settled scale).
#define MACRO_TOLERANCE 0.1
#define PARITY_TARGET 0.90f     // held-out accuracy every precision must reach
#define PARITY_MAX_STEPS 400    // default step budget (--amp_max_steps)
#define PARITY_EVAL_EVERY 10
#define PARITY_TOLERANCE 0.02   // best held-out accuracies agree within this
#define CLIP_NORM 1.0f          // clip_grad_norm_'s max_norm in amp_scaler
#define GEMM_SAMPLES 16         // entries of C checked against the exact product
#define CONV_SAMPLES 16         // forward outputs checked against the exact result
#define SCALER_PASS_REPS 51     // GradScaler passes timed (median)
#define MAX_LINEAR 8

// ---- precisions --------------------------------------------------------------------------------

static void fp32(CoreConfig *c) { c->precision = CORE_PRECISION_FP32; }
static void fp32_strict(CoreConfig *c) { c->precision = CORE_PRECISION_FP32_STRICT; }
static void tf32(CoreConfig *c) { c->precision = CORE_PRECISION_TF32; }
static void fp16(CoreConfig *c) { c->precision = CORE_PRECISION_FP16; }
static void bf16(CoreConfig *c) { c->precision = CORE_PRECISION_BF16; }
static void fp32_nhwc(CoreConfig *c) { fp32(c); c->layout = CORE_LAYOUT_NHWC; }
static void tf32_nhwc(CoreConfig *c) { tf32(c); c->layout = CORE_LAYOUT_NHWC; }
static void fp16_nhwc(CoreConfig *c) { fp16(c); c->layout = CORE_LAYOUT_NHWC; }
static void bf16_nhwc(CoreConfig *c) { bf16(c); c->layout = CORE_LAYOUT_NHWC; }

static const PracticeVariant macro_nchw[] = {
    {"fp32", HARNESS_BASELINE, fp32, NULL},
    {"tf32", HARNESS_TUNED, tf32, NULL},
    {"fp16", HARNESS_TUNED, fp16, NULL},
    {"bf16", HARNESS_TUNED, bf16, NULL},
};
static const PracticeVariant macro_nhwc[] = {
    {"fp32", HARNESS_BASELINE, fp32_nhwc, NULL},
    {"tf32", HARNESS_TUNED, tf32_nhwc, NULL},
    {"fp16", HARNESS_TUNED, fp16_nhwc, NULL},
    {"bf16", HARNESS_TUNED, bf16_nhwc, NULL},
};
static const PracticeVariant macro_tf32[] = {
    {"fp32_strict", HARNESS_BASELINE, fp32_strict, NULL},
    {"tf32", HARNESS_TUNED, tf32, NULL},
};
// fp16/bf16 against strict fp32: the mixed-precision guides' baseline (their Volta GPUs
// have no TF32, so their fp32 is strict), beside `amp`'s PyTorch-default fp32.
static const PracticeVariant macro_strict[] = {
    {"fp32_strict", HARNESS_BASELINE, fp32_strict, NULL},
    {"fp16", HARNESS_TUNED, fp16, NULL},
    {"bf16", HARNESS_TUNED, bf16, NULL},
};
static const PracticeVariant parity_variants[] = {
    {"fp32", HARNESS_BASELINE, fp32, NULL},
    {"fp16", HARNESS_TUNED, fp16, NULL},
    {"bf16", HARNESS_TUNED, bf16, NULL},
};
// On a CPU every precision computes in fp32, so a time ratio would only measure the
// GradScaler's bookkeeping, not mixed precision: the steps are what counts there, and
// fp16/bf16 are references (no speedup, no verdict).
static const PracticeVariant parity_variants_cpu[] = {
    {"fp32", HARNESS_BASELINE, fp32, NULL},
    {"fp16", HARNESS_REFERENCE, fp16, NULL},
    {"bf16", HARNESS_REFERENCE, bf16, NULL},
};

// ---- GradScaler trajectory, clipping order and parity (hooks of the practice driver) ------------

typedef enum { CLIP_NONE, CLIP_AFTER_UNSCALE, CLIP_SCALED } ClipOrder;

static void clip_after_unscale(CoreConfig *c)
{
    fp16(c);
    c->optim.clip_norm = CLIP_NORM;  // the core unscales, then clips (PyTorch's documented order)
}

static void clip_scaled(CoreConfig *c)
{
    fp16(c);
    c->optim.clip_norm = 0.0f;  // the core does not clip; the before_update hook clips the scaled gradients
}

static const PracticeVariant scaler_variants[] = {
    {"unscale_then_clip", HARNESS_BASELINE, clip_after_unscale, NULL},
    {"clip_scaled_grads", HARNESS_REFERENCE, clip_scaled, NULL},
};
static const PracticeVariant scaler_cost_variants[] = {{"fp16", HARNESS_REFERENCE, fp16, NULL}};

// One run's state (runs are sequential; core_created resets it).
typedef struct ScalerRun {
    ClipOrder clip;
    bool fp16;
    float scale;            // the scale the next step's gradients carry
    double norm_seen;       // the norm the last step's clipping compared with CLIP_NORM
    bool norm_finite;
    double norm_sum;
    int norm_count, clipped;
    int skipped;
} ScalerRun;

// A baseline's outcome, for the tuned runs of the same preset and batch.
typedef struct ParityEntry {
    char key[64];
    PracticeOutcome outcome;
} ParityEntry;

typedef struct AmpHooksCtx {
    bool clip_variants;     // amp_scaler: install the clipping hook
    ScalerRun run;
    ParityEntry parity[16];
    int parity_count;
} AmpHooksCtx;

static int grads_ready(void *user, const CoreGradReady *ready)
{
    (void)user;
    (void)ready;
    return 0;
}

// After backward, before the core's inf/nan check, unscaling, clipping and SGD: the
// gradients still carry the loss scale. Measures the norm each order clips at; in the
// mistaken order, clips the scaled gradients here as clip_grad_norm_ would.
static int before_update(void *user, float *grads, size_t count, void *stream)
{
    ScalerRun *r = user;
    double norm = 0.0;
    TRY(amp_grad_norm(grads, count, stream, &norm));
    r->norm_finite = isfinite(norm);
    if (r->clip == CLIP_SCALED) {
        r->norm_seen = norm;
        // as clip_grad_norm_: an inf norm gives coefficient 0, and inf * 0 = nan, which
        // the core's inf/nan check then finds (the step is skipped)
        float coef = amp_clip_coef(norm, CLIP_NORM);
        if (!(coef >= 1.0f)) TRY(amp_grad_scale(grads, count, coef, stream));
    } else {
        r->norm_seen = norm / r->scale;  // what the core's clip measures after unscaling (exact: a power of 2)
    }
    return 0;
}

static int hooks_core_created(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg)
{
    (void)st;
    AmpHooksCtx *h = ctx;
    ScalerRun *r = &h->run;
    memset(r, 0, sizeof *r);
    r->fp16 = cfg->precision == CORE_PRECISION_FP16;
    r->scale = r->fp16 ? cfg->scaler.init_scale : 1.0f;
    if (!h->clip_variants) return 0;
    r->clip = cfg->optim.clip_norm > 0.0f ? CLIP_AFTER_UNSCALE : CLIP_SCALED;
    CoreGradHooks hooks = {grads_ready, before_update, r};
    return core_set_grad_hooks(core, &hooks);
}

static int hooks_after_step(void *ctx, HarnessState *st, Core *core, int step, int64_t images,
                            double seconds, const CoreStepResult *res)
{
    (void)res;
    AmpHooksCtx *h = ctx;
    ScalerRun *r = &h->run;
    if (!r->fp16) return 0;
    CoreStats cs;
    TRY(core_stats(core, &cs));
    harness_curve_point(st, "loss_scale", step + 1, images, seconds, cs.loss_scale);
    harness_curve_point(st, "skipped_steps", step + 1, images, seconds, cs.skipped_steps);
    bool skipped = cs.skipped_steps > r->skipped;
    r->skipped = cs.skipped_steps;
    r->scale = cs.loss_scale;
    if (h->clip_variants && r->norm_finite && !skipped) {
        harness_curve_point(st, "clip_norm_seen", step + 1, images, seconds, r->norm_seen);
        r->norm_sum += r->norm_seen;
        r->norm_count++;
        r->clipped += r->norm_seen > CLIP_NORM;
    }
    return 0;
}

static void parity_key(const CoreConfig *cfg, HarnessState *st, char *key, size_t size)
{
    snprintf(key, size, "%s/%d", harness_axis_str(st, "preset"), cfg->batch_size);
}

static void parity_finish(AmpHooksCtx *h, HarnessState *st, const CoreConfig *cfg,
                          const PracticeVariant *v, const PracticeOutcome *o)
{
    char key[64];
    parity_key(cfg, st, key, sizeof key);
    if (v->role == HARNESS_BASELINE) {
        ParityEntry *e = NULL;
        for (int i = 0; i < h->parity_count && !e; i++)
            if (strcmp(h->parity[i].key, key) == 0) e = &h->parity[i];
        if (!e && h->parity_count < (int)(sizeof h->parity / sizeof h->parity[0])) e = &h->parity[h->parity_count++];
        if (e) {
            snprintf(e->key, sizeof e->key, "%s", key);
            e->outcome = *o;
        }
        return;
    }
    const PracticeOutcome *base = NULL;
    for (int i = 0; i < h->parity_count && !base; i++)
        if (strcmp(h->parity[i].key, key) == 0) base = &h->parity[i].outcome;
    if (!base) return;  // the baseline was filtered out: nothing to compare with
    double diff = fabs(o->best_accuracy - base->best_accuracy);
    harness_counter(st, "baseline_steps", (double)base->steps, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "accuracy_diff", diff, HARNESS_COUNTER_PLAIN);
    bool wrong = (base->reached && !o->reached) || !(diff <= PARITY_TOLERANCE);
    harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
    if (wrong) {
        char msg[256];
        snprintf(msg, sizeof msg, "no parity with fp32: best held-out accuracy %.3f vs %.3f (tolerance %.2f), "
                 "target %.2f %s", o->best_accuracy, base->best_accuracy, PARITY_TOLERANCE, PARITY_TARGET,
                 o->reached ? "reached" : "missed");
        harness_fail(st, msg);
    }
}

static void hooks_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                         const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)core;
    AmpHooksCtx *h = ctx;
    ScalerRun *r = &h->run;
    if (r->fp16) {
        harness_counter(st, "skipped_steps", r->skipped, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "final_loss_scale", r->scale, HARNESS_COUNTER_PLAIN);
    }
    if (h->clip_variants) {
        harness_counter(st, "clip_norm", CLIP_NORM, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "mean_norm_seen", r->norm_count ? r->norm_sum / r->norm_count : 0.0,
                        HARNESS_COUNTER_PLAIN);
        harness_counter(st, "clipped_fraction", r->norm_count ? (double)r->clipped / r->norm_count : 0.0,
                        HARNESS_COUNTER_PLAIN);
    } else {
        parity_finish(h, st, cfg, v, o);
    }
}

// amp_scaler_cost: one GradScaler pass over this core's gradients against its step.
static void cost_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                        const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx;
    (void)v;
    double pass = 0.0;
    bool gpu = cfg->backend == CORE_BACKEND_CUDA;
    if (amp_scaler_pass_seconds(core_param_count(core), gpu, SCALER_PASS_REPS, &pass) != 0) {
        practice_fail_or_skip(st, "timing the GradScaler pass");
        return;
    }
    double step = o->steps ? o->seconds / o->steps : 0.0;
    harness_counter(st, "scaler_pass_ms", 1e3 * pass, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "scaler_share_of_step", step > 0 ? pass / step : 0.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "gradients", (double)core_param_count(core), HARNESS_COUNTER_PLAIN);
}

// amp, amp_nhwc, amp_tf32: the loss scale an fp16 run ended at (the driver counts its skipped
// steps, skipped_steps, and fails a run that skips more than GradScaler's start-up explains:
// a skipped step skips the SGD update, which makes it cheaper).
static void macro_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                         const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx;
    (void)v;
    (void)o;
    CoreStats cs;
    if (cfg->precision != CORE_PRECISION_FP16 || core_stats(core, &cs) != 0) return;
    harness_counter(st, "final_loss_scale", cs.loss_scale, HARNESS_COUNTER_PLAIN);
}

// ---- micro: GEMMs ----------------------------------------------------------------------------------

static const AmpMath gemm_maths[] = {AMP_MATH_FP32, AMP_MATH_TF32, AMP_MATH_FP16, AMP_MATH_BF16};

static const char *gemm_math_text(AmpMath m)
{
    switch (m) {
    case AMP_MATH_FP32: return "strict fp32 (CUBLAS_COMPUTE_32F)";
    case AMP_MATH_TF32: return "TF32 (CUBLAS_COMPUTE_32F_FAST_TF32)";
    case AMP_MATH_FP16: return "fp16 in and out + fp32 accumulate (CUBLAS_COMPUTE_32F)";
    default: return "bf16 in and out + fp32 accumulate (CUBLAS_COMPUTE_32F)";
    }
}

// The current device's dense peak for m (0 when amp_peak.c has no entry) and how it was computed.
static double device_peak(AmpMath m, char *how, size_t size)
{
    int dev = 0, major = 0, minor = 0, sms = 0, khz = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev);
    double per = amp_peak_flops_per_clock_sm(major, minor, m);
    if (per > 0)
        snprintf(how, size, "peak %d SMs x %d MHz (max SM clock) x %.0f %s FLOP/clock/SM (sm_%d%d)", sms,
                 khz / 1000, per, amp_math_name(m), major, minor);
    else
        snprintf(how, size, "no peak: sm_%d%d has no %s entry in bench/amp/amp_peak.c", major, minor, amp_math_name(m));
    return amp_peak_flops(major, minor, sms, 1e3 * khz, m);
}

// TF32 and bf16 exist from compute capability 8.0 (Ampere) on: older GPUs lack the type,
// a fact about the machine (a skip with the reason), not a failure. NVIDIA_TF32_OVERRIDE=0
// makes the libraries run every TF32 request in strict fp32: a TF32 row would time fp32.
// True when skipped.
static bool skip_without_math(HarnessState *st, bool tf32, bool bf16)
{
    const char *override = getenv("NVIDIA_TF32_OVERRIDE");
    if (tf32 && override && strcmp(override, "0") == 0) {
        harness_skip(st, "NVIDIA_TF32_OVERRIDE=0 turns TF32 off in cuBLAS and cuDNN: unset it to measure TF32");
        return true;
    }
    int dev = 0, major = 0, minor = 0;
    if (!(tf32 || bf16) || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess || major >= 8) {
        (void)cudaGetLastError();
        return false;  // a CUDA error here shows up, with its kind, in the run itself
    }
    char why[120];
    snprintf(why, sizeof why, "TF32 and bf16 need compute capability 8.0 or newer (this GPU: sm_%d%d)", major, minor);
    harness_skip(st, why);
    return true;
}

// Times `count` GEMMs one after the other per iteration; checks each first.
static void run_gemms(HarnessState *st, AmpMath math, const int (*mnk)[3], int count, const char *what)
{
    if (skip_without_math(st, math == AMP_MATH_TF32, math == AMP_MATH_BF16)) return;
    AmpGemm *g[MAX_LINEAR] = {NULL};
    int made = 0, rc = 0;
    double worst = 0.0, flops = 0.0, seconds = 0.0, total = 0.0;
    int64_t iterations = 0;
    for (; made < count && rc == 0; made++) rc = amp_gemm_create(math, mnk[made][0], mnk[made][1], mnk[made][2], &g[made]);
    if (rc != 0) made--;
    for (int i = 0; i < made && rc == 0; i++) {  // untimed warm-up GEMM, then its check
        double err = 0.0;
        rc = amp_gemm_time(g[i], &seconds);
        if (rc == 0) rc = amp_gemm_check(g[i], GEMM_SAMPLES, &err);
        if (isnan(err) || err > worst) worst = err;
        flops += amp_gemm_flops(g[i]);
    }
    // The strict-fp32 probe (operands TF32 cannot represent): strict fp32's error must stay
    // below what TF32 rounding gives, so a "strict" baseline that ran TF32 is caught; the
    // strict row also measures TF32's, the evidence that the probe tells them apart.
    bool probed = math == AMP_MATH_FP32 || math == AMP_MATH_TF32;
    double probe_err = 0.0, probe_tf32_err = 0.0;
    if (rc == 0 && probed) rc = amp_gemm_probe(math, GEMM_SAMPLES, &probe_err);
    if (rc == 0 && math == AMP_MATH_FP32) rc = amp_gemm_probe(AMP_MATH_TF32, GEMM_SAMPLES, &probe_tf32_err);
    while (rc == 0 && harness_keep_running(st)) {
        double it = 0.0;
        for (int i = 0; i < made && rc == 0; i++) {
            rc = amp_gemm_time(g[i], &seconds);
            it += seconds;
        }
        harness_set_iteration_time(st, it);
        total += it;
        iterations++;
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "the GEMM");
    } else {
        char how[200], label[600];
        double peak = device_peak(math, how, sizeof how);
        double tflops = total > 0 ? flops * iterations / total / 1e12 : 0.0;
        bool strict_like_tf32 = math == AMP_MATH_FP32 && !(probe_err < AMP_PROBE_STRICT_LIMIT);
        bool wrong = !(worst <= amp_gemm_tolerance(math)) || strict_like_tf32;
        harness_counter(st, "tflops", tflops, HARNESS_COUNTER_PLAIN);
        if (probed) harness_counter(st, "probe_err", probe_err, HARNESS_COUNTER_PLAIN);
        if (math == AMP_MATH_FP32) harness_counter(st, "probe_tf32_err", probe_tf32_err, HARNESS_COUNTER_PLAIN);
        if (peak > 0) {
            harness_counter(st, "peak_tflops", peak / 1e12, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "fraction_of_peak", tflops * 1e12 / peak, HARNESS_COUNTER_PLAIN);
        }
        harness_counter(st, "max_rel_err", worst, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "tolerance", amp_gemm_tolerance(math), HARNESS_COUNTER_PLAIN);
        harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
        snprintf(label, sizeof label, "cuBLAS cublasGemmEx %s, %s; CUDA events around the GEMMs alone; "
                 "warm caches (the same operands every iteration); %s; %d sampled entries checked against "
                 "the exact product (tolerance %g of sum |a b|)", what, gemm_math_text(math), how,
                 GEMM_SAMPLES, amp_gemm_tolerance(math));
        harness_set_label(st, label);
        if (strict_like_tf32) {
            char msg[240];
            snprintf(msg, sizeof msg, "strict fp32 GEMM rounded like TF32: probe error %.3g, not below %g "
                     "(TF32's: %.3g)", probe_err, AMP_PROBE_STRICT_LIMIT, probe_tf32_err);
            harness_fail(st, msg);
        } else if (wrong) {
            char msg[200];
            snprintf(msg, sizeof msg, "GEMM result off: relative error %.3g > tolerance %g", worst,
                     amp_gemm_tolerance(math));
            harness_fail(st, msg);
        }
    }
    for (int i = 0; i < made; i++) amp_gemm_free(g[i]);
}

static void bench_gemm_square(HarnessState *st, void *user)
{
    AmpMath math = *(const AmpMath *)user;
    if (practice_skip_without_gpu(st)) return;
    int64_t n = harness_axis_int(st, "size");
    if (n < 1 || n > 65536) {
        harness_fail(st, "size out of range 1..65536");
        return;
    }
    int mnk[1][3] = {{(int)n, (int)n, (int)n}};
    char what[80];
    snprintf(what, sizeof what, "m = n = k = %d", (int)n);
    run_gemms(st, math, mnk, 1, what);
}

// The forward GEMMs of a preset's linear layers: m = out features, n = batch, k = in features.
static void bench_gemm_linear(HarnessState *st, void *user)
{
    AmpMath math = *(const AmpMath *)user;
    if (practice_skip_without_gpu(st)) return;
    CoreConfig cfg;
    ModelGraph *g = malloc(sizeof *g);
    if (!g || practice_config(st, CORE_BACKEND_CUDA, NULL, &cfg) != 0 || model_build(&cfg.model, g) != 0) {
        if (!g) error_set(ERROR_OUT_OF_MEMORY, "model graph: out of memory (host)");
        practice_fail_or_skip(st, "the preset");
        free(g);
        return;
    }
    int n = cfg.batch_size;
    int mnk[MAX_LINEAR][3], count = 0;
    char what[300] = "";
    size_t used = 0;
    for (int i = 0; i < g->n_ops && count < MAX_LINEAR; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind != OP_LINEAR) continue;
        mnk[count][0] = op->cout;
        mnk[count][1] = n;
        mnk[count][2] = op->cin;
        count++;
        int w = snprintf(what + used, sizeof what - used, "%s%dx%dx%d", used ? " + " : "the forward GEMMs (m x n x k) ",
                         op->cout, n, op->cin);
        if (w > 0 && (size_t)w < sizeof what - used) used += (size_t)w;
    }
    free(g);
    if (count == 0) {
        harness_skip(st, "the preset has no linear layer");
        return;
    }
    run_gemms(st, math, (const int (*)[3])mnk, count, what);
}

// ---- micro: convolutions ------------------------------------------------------------------------

typedef struct ConvVariant {
    CorePrecision precision;
} ConvVariant;

static const ConvVariant conv_variants[] = {
    {CORE_PRECISION_FP32}, {CORE_PRECISION_FP16}, {CORE_PRECISION_BF16},
    {CORE_PRECISION_FP32_STRICT}, {CORE_PRECISION_TF32},
};

// "c64h56k128r3s2": C x H x H input, K filters of R x R, stride S (padding R / 2, as the models').
static char conv_shapes[1024];

static int conv_shape_parse(const char *name, int n, ConvShape *s)
{
    int c, h, k, r, stride, used = 0;
    if (sscanf(name, "c%dh%dk%dr%ds%d%n", &c, &h, &k, &r, &stride, &used) != 5 || name[used] ||
        c < 1 || h < 1 || k < 1 || r < 1 || stride < 1 || c > 65536 || k > 65536 || h > 65536 || r > h + 2 * (r / 2))
        return error_set(ERROR_BAD_USAGE, "shape '%s': want cChHkKrRsS, e.g. c64h56k64r3s1", name);
    int pad = r / 2;
    int p = conv_out_size(h, r, stride, pad);
    *s = (ConvShape){n, c, h, h, k, r, stride, pad, p, p};
    return 0;
}

// The distinct convolution shapes of the resnet18 preset, in the order of the model.
static void conv_shapes_of_resnet18(void)
{
    CoreConfig cfg;
    ModelGraph *g = malloc(sizeof *g);
    size_t used = 0;
    if (g && core_config_preset(&cfg, "resnet18") == 0 && model_build(&cfg.model, g) == 0) {
        for (int i = 0; i < g->n_ops; i++) {
            if (g->ops[i].kind != OP_CONV) continue;
            ConvShape s = model_conv_shape(g, &g->ops[i], 1);
            char name[64];
            snprintf(name, sizeof name, "c%dh%dk%dr%ds%d", s.c, s.h, s.k, s.r, s.stride);
            bool seen = false;
            for (const char *p = conv_shapes; *p && !seen; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
                size_t len = strcspn(p, ",");
                seen = len == strlen(name) && strncmp(p, name, len) == 0;
            }
            int w = seen ? 0 : snprintf(conv_shapes + used, sizeof conv_shapes - used, "%s%s", used ? "," : "", name);
            if (w > 0 && (size_t)w < sizeof conv_shapes - used) used += (size_t)w;
        }
    }
    free(g);
    if (!used) snprintf(conv_shapes, sizeof conv_shapes, "c64h56k64r3s1");
}

static void bench_conv(HarnessState *st, void *user)
{
    const ConvVariant *cv = user;
    if (practice_skip_without_gpu(st)) return;
    const char *pass_name = harness_axis_str(st, "pass"), *layout_name = harness_axis_str(st, "layout");
    ConvPass pass = strcmp(pass_name, "fwd") == 0 ? CONV_PASS_FWD
                    : strcmp(pass_name, "bwd_data") == 0 ? CONV_PASS_BWD_DATA : CONV_PASS_BWD_FILTER;
    CoreLayout layout;
    CoreConfig cfg;
    core_config_preset(&cfg, "resnet18");
    int64_t batch = harness_axis_int(st, "batch");
    ConvShape s;
    if ((strcmp(pass_name, "fwd") && strcmp(pass_name, "bwd_data") && strcmp(pass_name, "bwd_filter")) ||
        core_layout_parse(layout_name, &layout) != 0) {
        harness_fail(st, "pass must be fwd, bwd_data or bwd_filter; layout nchw or nhwc");
        return;
    }
    if (batch < 0 || batch > 65536 ||
        conv_shape_parse(harness_axis_str(st, "shape"), batch > 0 ? (int)batch : cfg.batch_size, &s) != 0) {
        if (batch < 0 || batch > 65536) error_set(ERROR_BAD_USAGE, "batch %lld out of range 0..65536", (long long)batch);
        practice_fail_or_skip(st, "the shape");
        return;
    }
    if (skip_without_math(st, cv->precision == CORE_PRECISION_TF32, cv->precision == CORE_PRECISION_BF16)) return;
    AmpConv *c = NULL;
    double seconds = 0.0, total = 0.0;
    int64_t iterations = 0;
    double err = 0.0;
    int rc = amp_conv_create(&s, cv->precision, layout, &c);
    if (rc == 0) rc = amp_conv_time(c, pass, &seconds);  // untimed warm-up
    if (rc == 0 && pass == CONV_PASS_FWD) rc = amp_conv_check_forward(c, CONV_SAMPLES, &err);
    // The strict-fp32 probe on the forward rows stored in fp32 (strict, PyTorch's fp32, TF32):
    // a strict row must stay below what TF32 rounding gives (amp_conv_tf32's two rows show both).
    bool probed = pass == CONV_PASS_FWD && cv->precision != CORE_PRECISION_FP16 && cv->precision != CORE_PRECISION_BF16;
    double probe_err = 0.0;
    if (rc == 0 && probed) rc = amp_conv_probe_forward(c, CONV_SAMPLES, &probe_err);
    while (rc == 0 && harness_keep_running(st)) {
        rc = amp_conv_time(c, pass, &seconds);
        harness_set_iteration_time(st, seconds);
        total += seconds;
        iterations++;
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "the convolution");
    } else {
        char algo[128], label[640], checked[160];
        amp_conv_algo(c, pass, algo, sizeof algo);
        double tol = amp_conv_tolerance(cv->precision);
        bool strict_like_tf32 = probed && cv->precision == CORE_PRECISION_FP32_STRICT &&
                                !(probe_err < AMP_PROBE_STRICT_LIMIT);
        bool wrong = (pass == CONV_PASS_FWD && !(err <= tol)) || strict_like_tf32;
        harness_counter(st, "tflops", total > 0 ? amp_conv_flops(&s) * iterations / total / 1e12 : 0.0,
                        HARNESS_COUNTER_PLAIN);
        if (pass == CONV_PASS_FWD) {
            harness_counter(st, "max_rel_err", err, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "tolerance", tol, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
            if (probed) harness_counter(st, "probe_err", probe_err, HARNESS_COUNTER_PLAIN);
            snprintf(checked, sizeof checked, "%d sampled outputs checked against the exact result (tolerance %g "
                     "of sum |x w|)", CONV_SAMPLES, tol);
        } else {
            snprintf(checked, sizeof checked, "not checked here (tests/test_layers_gpu.c checks every pass "
                     "against the CPU reference)");
        }
        snprintf(label, sizeof label, "cuDNN %s %s, %s, (%d, %d, %d, %d) > %d k%d s%d: %s (the core's plan: "
                 "heuristics, first candidate that runs); CUDA events around the call alone; warm caches "
                 "(the same operands every iteration); %s", conv_pass_name(pass), core_precision_name(cv->precision),
                 layout_name, s.n, s.c, s.h, s.w, s.k, s.r, s.stride, algo, checked);
        harness_set_label(st, label);
        if (strict_like_tf32) {
            char msg[200];
            snprintf(msg, sizeof msg, "strict fp32 convolution rounded like TF32: probe error %.3g, not "
                     "below %g", probe_err, AMP_PROBE_STRICT_LIMIT);
            harness_fail(st, msg);
        } else if (wrong) {
            char msg[200];
            snprintf(msg, sizeof msg, "convolution result off: relative error %.3g > tolerance %g", err, tol);
            harness_fail(st, msg);
        }
    }
    amp_conv_free(c);
}

// ---- registration -----------------------------------------------------------------------------------

static void register_micro(const char *practice, const char *variant, HarnessRole role, HarnessFn fn,
                           const void *user, HarnessAxis a0, HarnessAxis a1, HarnessAxis a2, HarnessAxis a3)
{
    harness_register(&(HarnessSpec){
        .practice = practice, .variant = variant, .role = role, .timing = HARNESS_TIMING_CUDA_EVENTS,
        .fn = fn, .user = (void *)user, .axes = {a0, a1, a2, a3}, .unit = HARNESS_US, .min_time = 0.05,
        .cache = HARNESS_CACHE_WARM});
}

int main(int argc, char **argv)
{
    harness_option_int("amp_max_steps", PARITY_MAX_STEPS, PARITY_EVAL_EVERY, 1000000, NULL,
                       "step budget of every amp_parity and amp_scaler run (a run that misses the target "
                       "in it says so: reached_target = 0)");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    const char *all_presets = "tiny,mlp,small,medium,resnet18";

    // micro
    static const char *math_variant[] = {"fp32_strict", "tf32", "fp16", "bf16"};
    for (int i = 0; i < 4; i++) {
        HarnessRole role = i == 0 ? HARNESS_BASELINE : HARNESS_TUNED;
        register_micro("amp_gemm", math_variant[i], role, bench_gemm_square, &gemm_maths[i],
                       (HarnessAxis){"size", "1024,2048,4096,8192,10240,16384", false}, (HarnessAxis){0}, (HarnessAxis){0},
                       (HarnessAxis){0});
        register_micro("amp_gemm_linear", math_variant[i], role, bench_gemm_linear, &gemm_maths[i],
                       (HarnessAxis){"preset", all_presets, true}, (HarnessAxis){"batch", "0", false},
                       (HarnessAxis){0}, (HarnessAxis){0});
    }
    conv_shapes_of_resnet18();
    static const struct { const char *practice, *variant; HarnessRole role; int index; } convs[] = {
        {"amp_conv", "fp32", HARNESS_BASELINE, 0},
        {"amp_conv", "fp16", HARNESS_TUNED, 1},
        {"amp_conv", "bf16", HARNESS_TUNED, 2},
        {"amp_conv_tf32", "fp32_strict", HARNESS_BASELINE, 3},
        {"amp_conv_tf32", "tf32", HARNESS_TUNED, 4},
    };
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
        register_micro(convs[i].practice, convs[i].variant, convs[i].role, bench_conv,
                       &conv_variants[convs[i].index], (HarnessAxis){"shape", conv_shapes, true},
                       (HarnessAxis){"pass", "fwd,bwd_data,bwd_filter", true},
                       (HarnessAxis){"layout", "nchw,nhwc", true}, (HarnessAxis){"batch", "0", false});

    // macro (GPU)
    static Practice macro[] = {
        {.name = "amp", .variants = macro_nchw, .variant_count = 4,
         .label = "NCHW; fp32 = PyTorch's default (TF32 convolutions, strict fp32 GEMMs)"},
        {.name = "amp_nhwc", .variants = macro_nhwc, .variant_count = 4,
         .label = "NHWC (channels_last); fp32 = PyTorch's default (TF32 convolutions, strict fp32 GEMMs)"},
        {.name = "amp_tf32", .variants = macro_tf32, .variant_count = 2,
         .label = "NCHW; strict fp32 everywhere vs TF32 in convolutions and GEMMs"},
        {.name = "amp_strict", .variants = macro_strict, .variant_count = 3,
         .label = "NCHW; strict fp32 everywhere vs fp16/bf16 autocast"},
    };
    static const PracticeHooks macro_hooks = {NULL, NULL, macro_finish, NULL};
    for (size_t i = 0; i < sizeof macro / sizeof macro[0]; i++) {
        macro[i].hooks = &macro_hooks;
        macro[i].presets = all_presets;
        macro[i].batches = "0";
        macro[i].mode = PRACTICE_THROUGHPUT;
        macro[i].gpu_only = true;
        macro[i].steps = 10;
        macro[i].min_time = 0.5;
        macro[i].check = PRACTICE_CHECK_PARAMS;
        macro[i].tolerance = MACRO_TOLERANCE;
        macro[i].check_steps = 3;
        practice_register(&macro[i]);
    }

    // parity and GradScaler (CPU and GPU)
    static AmpHooksCtx parity_ctx, scaler_ctx = {.clip_variants = true};
    static const PracticeHooks parity_hooks = {hooks_core_created, hooks_after_step, hooks_finish, &parity_ctx};
    static const PracticeHooks scaler_hooks = {hooks_core_created, hooks_after_step, hooks_finish, &scaler_ctx};
    static const PracticeHooks cost_hooks = {NULL, NULL, cost_finish, NULL};
    const char *cpu_note = gpu ? "" : "; CPU backend: every precision computes in fp32 (fp16 runs GradScaler's "
                                      "scale, unscale, inf/nan check and update), so fp16 and bf16 take fp32's steps";
    static char parity_label[512], scaler_label[512];
    snprintf(parity_label, sizeof parity_label, "to %.2f held-out accuracy; parity: best accuracies within %.2f%s",
             PARITY_TARGET, PARITY_TOLERANCE, cpu_note);
    snprintf(scaler_label, sizeof scaler_label, "fp16, clip_grad_norm_(max_norm=%.1f) after or before unscaling; "
             "a gradient hook reads the norm every step in both variants (a device sync inside the timed step)%s", CLIP_NORM, cpu_note);
    static Practice parity = {
        .name = "amp_parity", .variants = parity_variants, .variant_count = 3, .batches = "0",
        .mode = PRACTICE_TIME_TO_ACCURACY, .target_accuracy = PARITY_TARGET,
        .eval_every = PARITY_EVAL_EVERY, .hooks = &parity_hooks};
    if (!gpu) parity.variants = parity_variants_cpu;
    parity.max_steps = (int)harness_option_int_value("amp_max_steps");
    parity.presets = gpu ? "tiny,small" : "tiny";
    parity.label = parity_label;
    practice_register(&parity);
    static Practice scaler = {
        .name = "amp_scaler", .variants = scaler_variants, .variant_count = 2, .batches = "0",
        .mode = PRACTICE_TIME_TO_ACCURACY, .target_accuracy = PARITY_TARGET,
        .eval_every = PARITY_EVAL_EVERY, .hooks = &scaler_hooks};
    scaler.max_steps = parity.max_steps;
    scaler.presets = gpu ? "tiny,small" : "tiny";
    scaler.label = scaler_label;
    practice_register(&scaler);
    static Practice cost = {
        .name = "amp_scaler_cost", .variants = scaler_cost_variants, .variant_count = 1, .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .min_time = 0.3, .hooks = &cost_hooks,
        .label = "GradScaler pass (unscale + inf/nan check + update, the core's code) timed alone over every "
                 "gradient: median of 51, warm caches (the same gradient buffer every pass)"};
    cost.presets = gpu ? all_presets : "tiny,mlp,small";
    cost.steps = gpu ? 10 : 3;  // a step of small takes seconds on a CPU
    practice_register(&cost);
    return harness_run();
}
