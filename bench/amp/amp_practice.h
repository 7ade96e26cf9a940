// amp_practice.h: the amp practice's own parts, private to bench/amp/: what bench_amp.c's
// main() registers from each family's file. The GEMM micro (amp_micro_gemm.c), the
// convolution micro (amp_micro_conv.c) and the training practices' hooks: macro, parity,
// GradScaler (amp_macro.c). The kernels they time live beside them (amp_gemm.cu,
// amp_conv.cu, amp_scaler.cu).
#ifndef AMP_PRACTICE_H
#define AMP_PRACTICE_H

#include <stdbool.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/core.h"

#define PARITY_TARGET 0.90f     // held-out accuracy every precision must reach
#define PARITY_MAX_STEPS 400    // default step budget (--amp_max_steps)
#define PARITY_EVAL_EVERY 10
#define PARITY_TOLERANCE 0.02   // best held-out accuracies agree within this
#define CLIP_NORM 1.0f          // clip_grad_norm_'s max_norm in amp_scaler

// ---- micro (GPU): one harness function per family, user as below ------------------------------

// amp_gemm/*: one square GEMM of the axis `size`; user is a const AmpMath *.
void amp_bench_gemm_square(HarnessState *st, void *user);
// amp_gemm_linear/*: the forward GEMMs of the preset's linear layers; user is a const AmpMath *.
void amp_bench_gemm_linear(HarnessState *st, void *user);
// TF32 and bf16 need compute capability 8.0, and NVIDIA_TF32_OVERRIDE=0 turns TF32 off:
// skips the row with the reason (true) when the math asked for is not there.
bool amp_bench_skip_without_math(HarnessState *st, bool tf32, bool bf16);

typedef struct ConvVariant {
    CorePrecision precision;
} ConvVariant;

// amp_conv/*, amp_conv_tf32/*: one convolution pass of the axes shape, pass, layout, batch;
// user is a const ConvVariant *.
void amp_bench_conv(HarnessState *st, void *user);
// The distinct convolution shapes of the resnet18 preset, in the order of the model, as
// the shape axis wants them ("c64h56k64r3s1,..."), in a buffer amp_micro_conv.c keeps.
const char *amp_bench_resnet18_conv_shapes(void);

// ---- macro, parity and GradScaler (CPU and GPU): hooks of the practice driver -----------------

extern const PracticeHooks amp_macro_hooks;       // amp, amp_nhwc, amp_tf32, amp_strict: final_loss_scale
extern const PracticeHooks amp_parity_hooks;      // amp_parity: the loss scale's curves, parity with fp32
// The amp_parity practice (it must outlive harness_run), whose baseline each tuned run's parity is
// checked against: trained on demand, whatever order the runs come in.
void amp_parity_bind(const Practice *parity);
extern const PracticeHooks amp_scaler_hooks;      // amp_scaler: the clipping order's norms and curves
extern const PracticeHooks amp_scaler_cost_hooks; // amp_scaler_cost: one GradScaler pass against the step
extern const PracticeHooks amp_backoff_hooks;     // amp_backoff_growth: an overflow in each fp16 core's 2nd step

#endif
