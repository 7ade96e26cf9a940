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
// The parts, one file each beside the kernels they time (amp_practice.h declares them): the
// GEMM micro (amp_micro_gemm.c), the convolution micro (amp_micro_conv.c), and the hooks of
// the training rows, parity and GradScaler (amp_macro.c). This file holds the variants and
// registers every practice.
#include <stdio.h>

#include "bench/amp/amp_peak.h"
#include "bench/amp/amp_practice.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/core.h"

// Relative L2 of the update after 3 steps vs fp32's (of fp32's update). fp16 and bf16 round
// every activation and gradient (2^-11, 2^-8), TF32 every convolution and GEMM input (2^-11);
// fp32 order alone moves the update by 5e-4 (small, 3 steps: fast CPU vs reference, measured;
// on the CPU every precision computes in fp32, so the measured fp16/bf16 figure is 0). A
// frozen update is 1, an update not unscaled 65535, the first of 3 steps skipped ~0.5
// (measured, fp16 on the CPU: tiny 0.49, mlp 0.57, small 0.51): all far above. A start-up
// skip is taken out (the driver reruns from the settled scale).
#define MACRO_TOLERANCE 0.1

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

// ---- GradScaler: the clipping orders (amp_macro.c's hooks measure them) ------------------------

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

// ---- GradScaler under the check: clipping, and a backoff and a growth in the checked steps ------

// Clipping by global norm in every variant, below every preset's first gradient norm (tiny
// 0.49, mlp 0.67, small 1.98 on the CPU), so that the checked steps clip: an fp16 run must
// unscale before it clips, and --practice_selftest=clip_before_unscale (clipping the gradients
// that still carry the scale, 65536 times the norm) must fail it.
#define AMP_CHECK_CLIP 0.25f

static void clip_fp32(CoreConfig *c) { fp32(c); c->optim.clip_norm = AMP_CHECK_CLIP; }
static void clip_fp16(CoreConfig *c) { fp16(c); c->optim.clip_norm = AMP_CHECK_CLIP; }
static void clip_bf16(CoreConfig *c) { bf16(c); c->optim.clip_norm = AMP_CHECK_CLIP; }

static const PracticeVariant clip_variants[] = {
    {"fp32", HARNESS_BASELINE, clip_fp32, NULL},
    {"fp16", HARNESS_TUNED, clip_fp16, NULL},
    {"bf16", HARNESS_TUNED, clip_bf16, NULL},
};
// On a CPU every precision computes in fp32: checked, no speedup claimed.
static const PracticeVariant clip_variants_cpu[] = {
    {"fp32", HARNESS_BASELINE, clip_fp32, NULL},
    {"fp16", HARNESS_REFERENCE, clip_fp16, NULL},
    {"bf16", HARNESS_REFERENCE, clip_bf16, NULL},
};

// The scale grows after every clean step (growth_interval 1) and amp_backoff_hooks force an
// overflow into each fp16 core's 2nd step: the check's 3 steps grow, back off (the step
// skipped, which the baseline leaves out) and grow again, so unscaling must follow the scale.
// A constant LR (no warm-up, no decay) keeps the baseline's steps at the tuned run's LR.
static void steady_lr(CoreConfig *c)
{
    c->optim.warmup_steps = 0;
    c->optim.decay = CORE_LR_CONSTANT;
}
static void steady_fp32(CoreConfig *c) { fp32(c); steady_lr(c); }
static void growing_fp16(CoreConfig *c)
{
    fp16(c);
    steady_lr(c);
    c->scaler.growth_interval = 1;
}

// fp16's time includes the steps it skips by design: a reference everywhere.
static const PracticeVariant backoff_variants[] = {
    {"fp32", HARNESS_BASELINE, steady_fp32, NULL},
    {"fp16", HARNESS_REFERENCE, growing_fp16, NULL},
};

// ---- micro variants -------------------------------------------------------------------------------

static const AmpMath gemm_maths[] = {AMP_MATH_FP32, AMP_MATH_TF32, AMP_MATH_FP16, AMP_MATH_BF16};

static const ConvVariant conv_variants[] = {
    {CORE_PRECISION_FP32}, {CORE_PRECISION_FP16}, {CORE_PRECISION_BF16},
    {CORE_PRECISION_FP32_STRICT}, {CORE_PRECISION_TF32},
};

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
        register_micro("amp_gemm", math_variant[i], role, amp_bench_gemm_square, &gemm_maths[i],
                       (HarnessAxis){"size", "1024,2048,4096,8192,10240,16384", false}, (HarnessAxis){0}, (HarnessAxis){0},
                       (HarnessAxis){0});
        register_micro("amp_gemm_linear", math_variant[i], role, amp_bench_gemm_linear, &gemm_maths[i],
                       (HarnessAxis){"preset", all_presets, true}, (HarnessAxis){"batch", "0", false},
                       (HarnessAxis){0}, (HarnessAxis){0});
    }
    const char *conv_shapes = amp_bench_resnet18_conv_shapes();
    static const struct { const char *practice, *variant; HarnessRole role; int index; } convs[] = {
        {"amp_conv", "fp32", HARNESS_BASELINE, 0},
        {"amp_conv", "fp16", HARNESS_TUNED, 1},
        {"amp_conv", "bf16", HARNESS_TUNED, 2},
        {"amp_conv_tf32", "fp32_strict", HARNESS_BASELINE, 3},
        {"amp_conv_tf32", "tf32", HARNESS_TUNED, 4},
    };
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
        register_micro(convs[i].practice, convs[i].variant, convs[i].role, amp_bench_conv,
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
    for (size_t i = 0; i < sizeof macro / sizeof macro[0]; i++) {
        macro[i].hooks = &amp_macro_hooks;
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
        .eval_every = PARITY_EVAL_EVERY, .hooks = &amp_parity_hooks};
    if (!gpu) parity.variants = parity_variants_cpu;
    parity.max_steps = (int)harness_option_int_value("amp_max_steps");
    parity.presets = gpu ? "tiny,small" : "tiny";
    parity.label = parity_label;
    amp_parity_bind(&parity);
    practice_register(&parity);
    static Practice scaler = {
        .name = "amp_scaler", .variants = scaler_variants, .variant_count = 2, .batches = "0",
        .mode = PRACTICE_TIME_TO_ACCURACY, .target_accuracy = PARITY_TARGET,
        .eval_every = PARITY_EVAL_EVERY, .hooks = &amp_scaler_hooks};
    scaler.max_steps = parity.max_steps;
    scaler.presets = gpu ? "tiny,small" : "tiny";
    scaler.label = scaler_label;
    practice_register(&scaler);
    static Practice cost = {
        .name = "amp_scaler_cost", .variants = scaler_cost_variants, .variant_count = 1, .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .min_time = 0.3, .hooks = &amp_scaler_cost_hooks,
        .label = "GradScaler pass (unscale + inf/nan check + update, the core's code) timed alone over every "
                 "gradient: median of 51, warm caches (the same gradient buffer every pass)"};
    cost.presets = gpu ? all_presets : "tiny,mlp,small";
    cost.steps = gpu ? 10 : 3;  // a step of small takes seconds on a CPU
    practice_register(&cost);

    // GradScaler's parts under the check (CPU and GPU)
    static Practice clip = {
        .name = "amp_clip", .variants = clip_variants, .variant_count = 3, .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 10, .check = PRACTICE_CHECK_PARAMS,
        .tolerance = MACRO_TOLERANCE, .check_steps = 3, .hooks = &amp_macro_hooks,
        .label = "clip_grad_norm_(max_norm=0.25) in every variant, below the first gradient norm: "
                 "fp16 unscales, then clips"};
    if (!gpu) clip.variants = clip_variants_cpu;
    clip.presets = gpu ? all_presets : "tiny";
    clip.min_time = gpu ? 0.5 : 0.1;
    practice_register(&clip);
    static Practice backoff = {
        .name = "amp_backoff_growth", .variants = backoff_variants, .variant_count = 2, .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 10, .check = PRACTICE_CHECK_PARAMS,
        .tolerance = MACRO_TOLERANCE, .check_steps = 3, .hooks = &amp_backoff_hooks,
        .label = "GradScaler moving in the checked steps: growth after every clean step, an overflow "
                 "forced into each fp16 core's 2nd step, constant LR; fp16's time includes its skipped "
                 "steps (a reference)"};
    backoff.presets = gpu ? "tiny,small" : "tiny";
    backoff.min_time = gpu ? 0.5 : 0.1;
    practice_register(&backoff);
    return harness_run();
}
