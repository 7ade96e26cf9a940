// bench_grad_accum.c: the gradient-accumulation practice of PyTorch's tuning guide: K
// micro-batches, each `(loss / K).backward()` adding into .grad, then one optimizer.step(),
// against one step on the K-times-larger batch. It buys the large batch's update with the
// micro-batch's activation memory, and pays in time (K smaller, less efficient passes).
// Macro (grad_accum/*, through the practice driver): training steps of each core preset at
//   each batch B of the batch axis (the batch of one optimizer step), as one_batch (baseline:
//   core_step on B images) or accumulate_K for K = 2, 4, 8 (Practice.micro_batches:
//   B split into K micro-batches of B/K, core_forward_backward_weighted with loss weight 1/K
//   accumulating, one core_apply_update at the LR of B images; the core is created for B/K
//   images, so its memory plan and peak are the micro-batch's); on the CUDA backend with a
//   GPU and the fast CPU backend without. Wall clock over the timed optimizer steps ending
//   in core_sync: step_ms is per optimizer step, images_per_second counts B per step.
// Check against the exact reference of accumulation, from one_batch's start on the run's
//   batches: one_batch's core applying, each of 3 optimizer steps, the sum of the K
//   micro-batches' own gradients (core_loss_grad, weighted part / B), so that BatchNorm (the
//   ResNet presets) normalises each micro-batch by itself there too, as accumulation does
//   (and as PyTorch does, the same as DDP without SyncBatchNorm). The two differ by the
//   order of the sums alone: within ACCUM_TOL, over all parameters and per tensor. The
//   difference BatchNorm makes against one step on the whole batch is not in the check.
// Counters beside the driver's (peak_mib, step_ms, images_per_second, check_*):
//   accumulation_steps (K, 1 for one_batch), micro_batch (images per forward/backward) and
//   activation_mib (the memory plan's arena of the micro-batch, kernels/model_plan.h).
#include <stdio.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"

// Relative L2 of the update after 3 optimizer steps, accumulate_K vs the exact reference
// (of the reference's update), globally and per tensor: rounding only, the gradient summed
// in K float partial sums (the core) vs in double (the reference). Measured on the fast CPU
// backend, K = 2..8, batches 32 and 256: mlp up to 2.2e-6 (worst tensor 4.8e-6), tiny
// (BatchNorm) up to 3.1e-6 (worst tensor 1.4e-5): 7x below it at the worst. The bugs it must
// catch are far above: half the LR 0.5, a dropped step (drop_step) 0.63 to 0.68, a frozen
// update 1. On the GPU (TF32 convolutions under PyTorch's default fp32, possibly
// non-deterministic backward atomics) the two runs take the same micro-batch shapes, so the
// same algorithms; ACCUM_GPU_TOL allows 2^-11 (TF32's rounding) compounded over the 3 steps
// and K terms, and stays 50x below half the LR's 0.5; the first GPU run calibrates it.
#define ACCUM_TOL 1e-4
#define ACCUM_GPU_TOL 1e-2

static const PracticeVariant variants[] = {
    {"one_batch", HARNESS_BASELINE, NULL, NULL},
    {"accumulate_2", HARNESS_TUNED, NULL, NULL},
    {"accumulate_4", HARNESS_TUNED, NULL, NULL},
    {"accumulate_8", HARNESS_TUNED, NULL, NULL},
};
// Practice.micro_batches: K of each variant above.
static const int micro_batches[] = {1, 2, 4, 8};

static void finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                   const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx;
    (void)core;
    int k = micro_batches[v - variants];
    harness_counter(st, "accumulation_steps", k, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "micro_batch", cfg->batch_size / k, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "activation_mib", o->stats.activation_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
}

static const PracticeHooks hooks = {.finish = finish};

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    static Practice practice = {
        .name = "grad_accum", .variants = variants, .variant_count = 4,
        .mode = PRACTICE_THROUGHPUT, .steps = 10, .min_time = 0.5,
        .check = PRACTICE_CHECK_PARAMS, .check_steps = 3, .hooks = &hooks, .micro_batches = micro_batches,
        .label = "one step on the batch vs K accumulated micro-batches (loss / K), one update"};
    // Batches (of one optimizer step) that divide by 8: the presets' own (32, 128, 256) and
    // a larger one, where accumulation is what makes the batch fit.
    // On a CPU the presets it steps through in seconds (small: seconds per row and batch).
    practice.presets = gpu ? "mlp,tiny,small,medium,resnet18" : "mlp,tiny";
    practice.batches = gpu ? "0,512" : "0,256";
    practice.tolerance = gpu ? ACCUM_GPU_TOL : ACCUM_TOL;
    // A CPU step of small takes a few hundred ms: 4 steps per timed iteration.
    practice_register(&practice);
    return harness_run();
}
