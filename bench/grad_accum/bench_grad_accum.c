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
// Check against one_batch, from the same start on the same batches: the update after 3
//   optimizer steps. Without BatchNorm (preset mlp) the maths is the same up to the order
//   of the sums (the weight gradient of K micro-batches added vs one GEMM over B): within
//   ACCUM_TOL. With BatchNorm (the ResNet presets) each micro-batch is normalised with its
//   own mean and variance, as PyTorch does (the same as DDP without SyncBatchNorm), so the
//   update differs for real: within ACCUM_BN_TOL, which still fails a frozen or skipped
//   update (1) or a missing 1/K (K - 1); check_rel_diff is the difference BN makes.
// Counters beside the driver's (peak_mib, step_ms, images_per_second, check_*):
//   accumulation_steps (K, 1 for one_batch), micro_batch (images per forward/backward) and
//   activation_mib (the memory plan's arena of the micro-batch, kernels/model_plan.h).
#include <stdio.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"

// Relative L2 of the update after 3 optimizer steps, accumulate_K vs one_batch (of
// one_batch's update), without BatchNorm: rounding only (the sums over the batch split into
// K partial sums). Measured on the fast CPU backend, mlp, batches 32 and 256, K = 2..8:
// 4e-7 to 4e-6, 25x below this. The loss weight 1/K is a power of 2 (exact).
#define ACCUM_TOL 1e-4
// The same with BatchNorm: each micro-batch normalised by its own statistics. Measured on
// the fast CPU backend, 3 steps: tiny 0.03-0.09 (batch 32), small about 0.1 (batch 128,
// K = 8). A frozen or skipped update is 1, a gradient K times too large (no 1/K) K - 1 >= 1.
#define ACCUM_BN_TOL 0.5

static const PracticeVariant variants[] = {
    {"one_batch", HARNESS_BASELINE, NULL, NULL},
    {"accumulate_2", HARNESS_TUNED, NULL, NULL},
    {"accumulate_4", HARNESS_TUNED, NULL, NULL},
    {"accumulate_8", HARNESS_TUNED, NULL, NULL},
};
// Practice.micro_batches: K of each variant above.
static const int micro_batches[] = {1, 2, 4, 8};

// BatchNorm normalises each micro-batch by itself: a ResNet's update differs for real.
static double tolerance_for(const CoreConfig *cfg)
{
    return cfg->model.kind == CORE_MODEL_MLP ? ACCUM_TOL : ACCUM_BN_TOL;
}

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
        .check = PRACTICE_CHECK_PARAMS, .tolerance = ACCUM_BN_TOL, .tolerance_for = tolerance_for,
        .check_steps = 3, .hooks = &hooks, .micro_batches = micro_batches,
        .label = "one step on the batch vs K accumulated micro-batches (loss / K), one update"};
    // Batches (of one optimizer step) that divide by 8: the presets' own (32, 128, 256) and
    // a larger one, where accumulation is what makes the batch fit.
    // On a CPU the presets it steps through in seconds (small: seconds per row and batch).
    practice.presets = gpu ? "mlp,tiny,small,medium,resnet18" : "mlp,tiny";
    practice.batches = gpu ? "0,512" : "0,256";
    // A CPU step of small takes a few hundred ms: 4 steps per timed iteration.
    if (!gpu) practice.steps = 4;
    practice_register(&practice);
    return harness_run();
}
