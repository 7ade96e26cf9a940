// bench_conv_bias.c: the conv_bias practice of PyTorch's tuning guide ("disable bias for
// convolutions directly followed by a batch norm": nn.Conv2d(..., bias=False)). A bias
// before a training-mode BN is subtracted again with the batch mean: it changes neither
// the output nor any other parameter's gradient, and its own gradient is 0 (rounding
// aside); it only costs a pass over each convolution's output forward, a reduction over
// its gradient backward, and its parameters in the update.
// Macro (conv_bias/*): whole training steps of each core preset with a bias on every
//   convolution (baseline `bias`, CoreModelConfig.conv_bias: PyTorch's Conv2d default) vs
//   none (tuned `no_bias`, the guide's advice), on the CUDA backend with a GPU and the fast
//   CPU backend without. Wall clock over the timed steps, ending in core_sync.
// Check (the driver's, over the parameters both variants have: Practice.shared_params):
//   from the same shared weights (the no_bias run starts from the bias run's initial
//   weights), on the same batches, the update of every shared parameter after 3 steps must
//   agree within CONV_BIAS_TOL, relative L2 of the baseline's update; the biases' own
//   updates (weight decay and rounding only) are left out.
//   --practice_selftest=frozen|skip_all breaks the no_bias run, which the check catches.
// Counters beside the driver's: param_count (the biases add one per output channel).
#include <stdio.h>
#include <stdlib.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/error.h"
#include "kernels/model.h"

// The two runs differ by the rounding of conv + b before the BN subtracts the batch mean,
// which the steps then carry like any change of summation order: the update after 3 steps
// measured 1.7e-6 (tiny) and 6.1e-4 (small) of the baseline's update on the fast CPU
// backend, as bench_fusion measured for summation order alone (2.6e-6 to 5e-4); on CUDA,
// cuDNN's TF32 rounding and non-deterministic algorithms add as much again. Asserted at
// bench_fusion's tolerance for a change of summation order, on both; a bias that leaked
// through (no BN after it) or a frozen update is O(1).
#define CONV_BIAS_TOL 1e-2

static void with_bias(CoreConfig *c) { c->model.conv_bias = true; }
static void without_bias(CoreConfig *c) { c->model.conv_bias = false; }

static const PracticeVariant variants[] = {
    {"bias", HARNESS_BASELINE, with_bias, NULL},
    {"no_bias", HARNESS_TUNED, without_bias, NULL},
};

// Every parameter but the conv biases, in the flat order (the same order with and without
// biases: a conv's bias sits right after its weight).
static size_t shared_params(const CoreConfig *cfg, size_t *index)
{
    ModelGraph *g = malloc(sizeof *g);
    if (!g || model_build(&cfg->model, g) != 0) {
        free(g);
        return 0;  // counts that cannot match: the check reports it
    }
    size_t count = 0, at = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        size_t n = op->kind == OP_CONV ? (size_t)op->cout * op->cin * op->k * op->k
                 : op->kind == OP_BN ? 2 * (size_t)op->cin
                 : op->kind == OP_LINEAR ? (size_t)op->cout * op->cin + (size_t)op->cout : 0;
        if (n == 0) continue;
        at = op->w_off;
        for (size_t j = 0; j < n; j++, count++)
            if (index) index[count] = at + j;
    }
    free(g);
    return count;
}

static void finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                   const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx;
    (void)cfg;
    (void)v;
    (void)o;
    harness_counter(st, "parameters", (double)core_param_count(core), HARNESS_COUNTER_PLAIN);
}

static const PracticeHooks hooks = {.finish = finish};

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    // ResNet presets (the MLP has no convolution): all of them on a GPU; those a CPU steps
    // through in seconds.
    static Practice practice = {
        .name = "conv_bias", .variants = variants, .variant_count = 2, .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 10, .min_time = 0.5,
        .check = PRACTICE_CHECK_PARAMS, .check_steps = 3, .hooks = &hooks,
        .tolerance = CONV_BIAS_TOL, .shared_params = shared_params,
        .label = "bias=True on every conv (PyTorch's default) vs bias=False before each BN"};
    practice.presets = gpu ? "tiny,small,medium,resnet18" : "tiny,small";
    practice_register(&practice);
    return harness_run();
}
