// bench_fused_optimizer.c: the tuning guide's advice to use the foreach / fused optimizer
// implementations (torch.optim's `foreach=` and `fused=`, https://pytorch.org/docs/stable/optim.html,
// "foreach and fused implementations"): one pass over all parameter tensors instead of a
// loop over them. Micro benchmark (fused_optimizer/*): one optimizer update over the
// parameter tensors of a core preset (their sizes from the model), per tensor (baseline:
// one call, on CUDA one kernel launch, per tensor, as foreach=False) against multi-tensor
// (tuned: one threaded loop over the flat buffers on the CPU; on CUDA multi_tensor_apply's
// launches over a table of tensor addresses and sizes), for SGD with momentum and weight
// decay (the core's formula, the preset's hyper-parameters) and AdamW (torch.optim.AdamW's
// defaults), the axis `optimizer`. CUDA events on the GPU, the wall clock on the CPU.
// Check (every multi_tensor row, before it is timed): after OPTIM_CHECK_UPDATES updates from
// the same start, multi_tensor's parameters and optimizer state equal per_tensor's bit for
// bit (the same arithmetic per element); --practice_selftest=MODE (any mode) leaves the last
// tensor out of multi_tensor's update, which the check must catch.
// Counters: tensors, launches_per_update (calls on the CPU), parameter_mib; checked rows
// wrong and wrong_values.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "bench/fused_optimizer/optim_update.h"
#include "kernels/error.h"

#define OPTIM_CHECK_UPDATES 3

typedef struct Way {
    bool multi_tensor;
} Way;

static const Way per_tensor = {false}, multi_tensor = {true};

static int parse_optimizer(const char *name, OptimKind *kind)
{
    if (strcmp(name, "sgd") == 0) *kind = OPTIM_SGD;
    else if (strcmp(name, "adamw") == 0) *kind = OPTIM_ADAMW;
    else return error_set(ERROR_BAD_USAGE, "optimizer '%s': sgd or adamw", name);
    return 0;
}

static OptimHyper hyper_of(OptimKind kind, const CoreConfig *cfg)
{
    if (kind == OPTIM_SGD)
        return (OptimHyper){.lr = core_lr_at(&cfg->optim, cfg->batch_size, 0),
                            .momentum = cfg->optim.momentum, .weight_decay = cfg->optim.weight_decay};
    return (OptimHyper){.lr = 1e-3f, .weight_decay = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
}

// k updates from the start one way; parameters then state into out (floats + state floats).
static int updates_from_start(OptimUpdate *u, bool multi, bool broken, int k, float *out)
{
    TRY(optim_update_reset(u));
    for (int i = 0; i < k; i++) {
        double seconds = 0.0;
        int launches = 0;
        TRY(optim_update_step(u, multi, broken, &seconds, &launches));
    }
    return optim_update_read(u, out, out + optim_update_floats(u));
}

// The check: multi_tensor against per_tensor after OPTIM_CHECK_UPDATES updates. The count of
// values (parameters and state) that differ into *wrong. 0 or -1.
static int check_multi_tensor(OptimUpdate *u, bool broken, size_t *wrong, size_t *first)
{
    size_t n = optim_update_floats(u) + optim_update_state_floats(u);
    float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    int rc = want && got ? 0 : error_set(ERROR_OUT_OF_MEMORY, "check: out of memory (host)");
    if (rc == 0) rc = updates_from_start(u, false, false, OPTIM_CHECK_UPDATES, want);
    if (rc == 0) rc = updates_from_start(u, true, broken, OPTIM_CHECK_UPDATES, got);
    *wrong = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (memcmp(&want[i], &got[i], sizeof(float)) != 0 && (*wrong)++ == 0) *first = i;
    free(want);
    free(got);
    if (rc == 0) rc = optim_update_reset(u);
    return rc;
}

// A checked row's check; false when the row has ended (failed, naming the difference).
static bool checked(HarnessState *st, OptimUpdate *u)
{
    bool broken = false;
    size_t wrong = 0, first = 0;
    if (practice_selftest_broken(&broken) != 0 || check_multi_tensor(u, broken, &wrong, &first) != 0) {
        practice_fail_or_skip(st, "checking against per_tensor");
        return false;
    }
    harness_counter(st, "wrong", wrong > 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wrong_values", (double)wrong, HARNESS_COUNTER_PLAIN);
    if (wrong == 0) return true;
    char msg[300];
    size_t np = optim_update_floats(u);
    snprintf(msg, sizeof msg, "multi_tensor's parameters and state differ from per_tensor's after %d "
             "updates: %zu of %zu values, the first at %s %zu", OPTIM_CHECK_UPDATES, wrong,
             np + optim_update_state_floats(u), first < np ? "parameter" : "state value",
             first < np ? first : first - np);
    harness_fail(st, msg);
    return false;
}

static void bench_update(HarnessState *st, void *user)
{
    const Way *way = user;
    CoreConfig cfg;
    OptimKind kind;
    if (!practice_run_config(st, false, NULL, &cfg)) return;
    if (parse_optimizer(harness_axis_str(st, "optimizer"), &kind) != 0) {
        practice_fail_or_skip(st, "the optimizer axis");
        return;
    }
    bool gpu = cfg.backend == CORE_BACKEND_CUDA;
    OptimHyper hyper = hyper_of(kind, &cfg);
    OptimUpdate *u = NULL;
    if (optim_update_create(&cfg.model, cfg.seed, kind, &hyper, gpu, &u) != 0) {
        practice_fail_or_skip(st, "setting up");
        return;
    }
    if (way->multi_tensor && !checked(st, u)) {
        optim_update_free(u);
        return;
    }
    double seconds = 0.0;
    int launches = 0;
    int rc = optim_update_step(u, way->multi_tensor, false, &seconds, &launches);  // untimed warm-up
    while (rc == 0 && harness_keep_running(st)) {
        rc = optim_update_step(u, way->multi_tensor, false, &seconds, &launches);
        harness_set_iteration_time(st, seconds);
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "the update");
    } else {
        harness_counter(st, "tensors", optim_update_tensors(u), HARNESS_COUNTER_PLAIN);
        harness_counter(st, "launches_per_update", launches, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "parameter_mib", optim_update_floats(u) * 4.0 / 1048576.0, HARNESS_COUNTER_PLAIN);
        char label[240];
        snprintf(label, sizeof label, "%s: %s %s, %d parameter tensors, %d %s per update; %s",
                 core_backend_name(cfg.backend), kind == OPTIM_SGD ? "SGD momentum+wd" : "AdamW",
                 way->multi_tensor ? "multi-tensor" : "per tensor", optim_update_tensors(u), launches,
                 gpu ? "kernel launch(es)" : "threaded call(s)", gpu ? "CUDA events" : "wall clock");
        harness_set_label(st, label);
    }
    optim_update_free(u);
}

static void register_way(const char *variant, HarnessRole role, const Way *way, const char *presets)
{
    harness_register(&(HarnessSpec){
        .practice = "fused_optimizer", .variant = variant, .role = role,
        .timing = HARNESS_TIMING_MANUAL, .fn = bench_update, .user = (void *)way,
        .axes = {{"preset", presets, true}, {"batch", "0"}, {"optimizer", "sgd,adamw", true}},
        .unit = HARNESS_US, .min_time = 0.2,
        .cache = practice_on_gpu() ? HARNESS_CACHE_WARM : HARNESS_CACHE_UNSTATED});
}

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    // every preset's parameters fit a GPU; a CPU updates the smaller ones in microseconds
    const char *presets = practice_on_gpu() ? "tiny,mlp,small,medium,resnet18" : "tiny,mlp,small";
    register_way("per_tensor", HARNESS_BASELINE, &per_tensor, presets);
    register_way("multi_tensor", HARNESS_TUNED, &multi_tensor, presets);
    return harness_run();
}
