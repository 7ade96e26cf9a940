// bench_layout.c: channels_last (NHWC) against the default NCHW memory layout, per
// precision, from PyTorch's performance guide (model.to(memory_format=torch.channels_last)).
// Macro, GPU (layout_<precision>/*, through the practice driver): training steps of each
//   preset with the activations in NCHW (baseline) or NHWC (tuned), in fp32 (PyTorch's
//   default: TF32 convolutions, strict fp32 GEMMs), strict fp32, TF32, fp16 + GradScaler
//   and bf16; wall clock over 10 steps ending in a synchronize, after 3 untimed warm-up
//   steps; step time, images/s, peak memory, and the cuDNN algorithms of each layout in
//   the label. The layout changes no maths, only the algorithms cuDNN picks, so the
//   update after 3 steps must agree with NCHW's within LAYOUT_TOLERANCE (relative L2 of
//   NCHW's update).
// The CPU backends compute in NCHW only (the layout is a GPU setting of the core), so
// without a GPU every run is skipped with that reason.
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"

// Relative L2 of the update after 3 steps, NHWC vs NCHW (of NCHW's update). The algorithms of
// the two layouts sum in other orders, and in fp16/bf16 round their outputs at other points:
// fp32 order alone moves the update by 5e-4 (small, 3 steps: fast CPU vs reference, measured),
// half-precision roundings (2^-11, 2^-8 per value) by more; a frozen update is 1, half the
// learning rate 0.5, the first of 3 steps skipped ~0.5 (measured, fp16 on the CPU: tiny
// 0.49, mlp 0.57, small 0.51).
#define LAYOUT_TOLERANCE 5e-2

#define LAYOUT_VARIANTS(prec, PREC)                                                                       \
    static void prec##_nchw(CoreConfig *c) { c->precision = PREC; c->layout = CORE_LAYOUT_NCHW; }          \
    static void prec##_nhwc(CoreConfig *c) { c->precision = PREC; c->layout = CORE_LAYOUT_NHWC; }          \
    static const PracticeVariant prec##_variants[] = {{"nchw", HARNESS_BASELINE, prec##_nchw, NULL},     \
                                                      {"channels_last", HARNESS_TUNED, prec##_nhwc, NULL}};

LAYOUT_VARIANTS(fp32, CORE_PRECISION_FP32)
LAYOUT_VARIANTS(fp32_strict, CORE_PRECISION_FP32_STRICT)
LAYOUT_VARIANTS(tf32, CORE_PRECISION_TF32)
LAYOUT_VARIANTS(fp16, CORE_PRECISION_FP16)
LAYOUT_VARIANTS(bf16, CORE_PRECISION_BF16)

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    static Practice practices[] = {
        {.name = "layout_fp32", .variants = fp32_variants,
         .label = "fp32 (PyTorch's default: TF32 convolutions, strict fp32 GEMMs); NCHW vs channels_last"},
        {.name = "layout_fp32_strict", .variants = fp32_strict_variants,
         .label = "strict fp32; NCHW vs channels_last"},
        {.name = "layout_tf32", .variants = tf32_variants, .label = "TF32; NCHW vs channels_last"},
        {.name = "layout_fp16", .variants = fp16_variants,
         .label = "fp16 + GradScaler; NCHW vs channels_last"},
        {.name = "layout_bf16", .variants = bf16_variants, .label = "bf16; NCHW vs channels_last"},
    };
    for (size_t i = 0; i < sizeof practices / sizeof practices[0]; i++) {
        Practice *p = &practices[i];
        p->variant_count = 2;
        p->presets = "tiny,small,medium,resnet18";  // mlp has no convolution: nothing to lay out
        p->batches = "0";
        p->mode = PRACTICE_THROUGHPUT;
        p->gpu_only = true;
        p->steps = 10;
        p->min_time = 0.5;
        p->check = PRACTICE_CHECK_PARAMS;
        p->tolerance = LAYOUT_TOLERANCE;
        p->check_steps = 3;
        practice_register(p);
    }
    return harness_run();
}
