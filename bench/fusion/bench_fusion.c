// bench_fusion.c: the pointwise-fusion practice of PyTorch's tuning guide ("fuse
// pointwise operations": torch.compile, or a scripted fuser, turns BN+ReLU and add+ReLU
// into one kernel each, so an activation is read and written once instead of twice).
// Macro (fusion/*): whole training steps of each core preset, the same model, data and
//   number of steps, with separate BN, add and ReLU kernels (baseline, PyTorch eager) vs
//   fused BN+ReLU and add+ReLU (CoreConfig.pointwise = CORE_POINTWISE_FUSED), on the CUDA
//   backend with a GPU and the fast CPU backend without (where the fused loops save the
//   ReLU's pass over memory). Wall clock over the timed steps, ending in core_sync.
// Check of the fused variant against the separate one, from the same start on the same
//   batches: the update after 3 steps (the driver's check) and the training-mode loss of
//   one batch. On the CPU both must be bit-identical (the fused loops compute the same
//   expressions in the same order); on CUDA the fused kernels sum in another order, so
//   they must agree within FUSION_GPU_TOL (update) and FUSION_LOSS_TOL (loss).
// Counters beside the driver's: activation_mib (the memory plan's arena: activations and
//   their gradients, kernels/model_plan.h), fused_ops (BN+ReLU and add+ReLU pairs the core
//   runs as one op; the fused row fails at 0) and check_loss_rel_diff.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/error.h"

// CUDA fused vs separate: relative L2 of the update after 3 steps (of the separate run's
// update). The fused kernels reduce in another order: fp32 order alone moves the update by
// 2.6e-6 (tiny) to 5e-4 (small) in 3 steps (fast CPU vs reference, measured), 20x below this;
// a wrong mask or a missing ReLU changes the gradients by O(1), a frozen update is 1.
#define FUSION_GPU_TOL 1e-2
// CUDA fused vs separate: relative difference of the loss of one batch at the initial
// weights (one forward: rounding order only, ~1e-6; a missing ReLU is O(1)).
#define FUSION_LOSS_TOL 1e-4

static void use_separate(CoreConfig *c) { c->pointwise = CORE_POINTWISE_SEPARATE; }
static void use_fused(CoreConfig *c) { c->pointwise = CORE_POINTWISE_FUSED; }

static const PracticeVariant variants[] = {
    {"separate", HARNESS_BASELINE, use_separate, NULL},
    {"fused", HARNESS_TUNED, use_fused, NULL},
};

// The training-mode loss of cfg at its initial weights on synthetic batch 0.
static int loss_of(const CoreConfig *cfg, float *loss)
{
    Core *core = NULL;
    PracticeHostBatch b;
    TRY(practice_host_batch(&b, cfg, cfg->batch_size, 0));
    int rc = core_create(cfg, &core);
    if (rc == 0) rc = core_loss_grad(core, &b.b, loss, NULL);
    practice_host_batch_free(&b);
    core_free(core);
    return rc;
}

static double loss_tolerance(const CoreConfig *cfg)
{
    return cfg->backend == CORE_BACKEND_CUDA ? FUSION_LOSS_TOL : 0.0;
}

// After every run: the plan's activation bytes and fused operations; the fused variant fails
// when it fused nothing (it would time the separate kernels under the fused name), then
// its loss check.
static void finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                   const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx;
    (void)core;
    const CoreStats *cs = &o->stats;
    harness_counter(st, "activation_mib", cs->activation_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "fused_ops", cs->fused_ops, HARNESS_COUNTER_PLAIN);
    if (v->role != HARNESS_TUNED) return;
    if (cs->fused_ops <= 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "the fused variant fused no operation (%s backend, preset %s): it "
                 "ran the separate kernels", core_backend_name(cs->backend), harness_axis_str(st, "preset"));
        harness_fail(st, msg);
        return;
    }
    // A kept core's later runs (o->first false) repeat the first's steps: the loss check,
    // made at its first run (which failed the row if it was wrong), is the same. Row groups
    // run one after the other, and one fused row is checked per group: the last figures
    // are this row's.
    static double checked_rel, checked_tol;
    if (!o->first) {
        harness_counter(st, "check_loss_rel_diff", checked_rel, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "check_loss_tolerance", checked_tol, HARNESS_COUNTER_PLAIN);
        return;
    }
    CoreConfig base = *cfg;
    use_separate(&base);
    float fused_loss = NAN, separate_loss = NAN;
    if (loss_of(&base, &separate_loss) != 0 || loss_of(cfg, &fused_loss) != 0) {
        practice_fail_or_skip(st, "the loss check");
        return;
    }
    double rel = fabs((double)fused_loss - separate_loss) / fmax(fabs((double)separate_loss), 1e-30);
    harness_counter(st, "check_loss_rel_diff", rel, HARNESS_COUNTER_PLAIN);
    double tol = loss_tolerance(cfg);
    harness_counter(st, "check_loss_tolerance", tol, HARNESS_COUNTER_PLAIN);  // 0: bit for bit
    bool wrong = tol > 0 ? !(rel <= tol) : memcmp(&fused_loss, &separate_loss, sizeof(float)) != 0;
    checked_rel = rel;
    checked_tol = tol;
    if (wrong) {
        char msg[200];
        snprintf(msg, sizeof msg, "fused loss %.9g differs from the separate one's %.9g (relative "
                 "%.3g; tolerance %g relative, 0: bit-identical)", fused_loss, separate_loss, rel, tol);
        harness_fail(st, msg);
    }
}

static const PracticeHooks hooks = {.finish = finish};

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    // Presets with BN and residual adds (the MLP has nothing to fuse): all of them on a
    // GPU; those a CPU steps through in seconds.
    static Practice practice = {
        .name = "fusion", .variants = variants, .variant_count = 2, .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 10, .min_time = 0.5,
        .check = PRACTICE_CHECK_PARAMS, .check_steps = 3, .hooks = &hooks,
        .label = "separate BN, add and ReLU kernels vs fused BN+ReLU and add+ReLU"};
    practice.presets = gpu ? "tiny,small,medium,resnet18" : "tiny,small";
    practice.tolerance = gpu ? FUSION_GPU_TOL : 0.0;
    // A CPU step of small takes a few hundred ms: 4 steps per timed iteration.
    practice_register(&practice);
    return harness_run();
}
