// bench_zero_grad.c: the zero_grad practice, optimizer.zero_grad(set_to_none=True) (the
// default since PyTorch 2.0) against set_to_none=False, which zeroes every .grad and lets
// backward accumulate into it.
// Macro (zero_grad/*): whole training steps of each core preset, memset + accumulate
//   (baseline) vs set_to_none (the first write of backward is a plain store), on the CUDA
//   backend with a GPU and the fast CPU backend without; the parameters after 3 steps must
//   be bit-identical between the two: accumulating into a zero adds +0.0, which changes no
//   float, so the update is the same bits (measured on the CPU: difference 0); a frozen or
//   skipped update differs by all of it.
// Micro (zero_grad_memset/*): zeroing every gradient of a preset, one memset per parameter
//   tensor as PyTorch does (baseline) vs one over a flat buffer.
// Micro (zero_grad_wgrad/*): the weight-gradient pass of every conv and linear layer of a
//   preset with beta = 1, accumulating into zeroed gradients (baseline), vs beta = 0.
#include <stdio.h>
#include <string.h>

#include "bench/zero_grad/grad_pass.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"

static void use_memset(CoreConfig *c) { c->zero_grad = CORE_ZERO_GRAD_MEMSET; }
static void use_set_to_none(CoreConfig *c) { c->zero_grad = CORE_ZERO_GRAD_SET_TO_NONE; }

static const PracticeVariant steps_variants[] = {
    {"memset", HARNESS_BASELINE, use_memset, NULL},
    {"set_to_none", HARNESS_TUNED, use_set_to_none, NULL},
};

// ---- micro: the two pieces set_to_none changes --------------------------------------------------

typedef enum { MICRO_ZERO_PER_TENSOR, MICRO_ZERO_FLAT, MICRO_WGRAD_ACCUM, MICRO_WGRAD_OVERWRITE } Micro;

static int micro_once(GradPass *p, Micro micro, double *seconds)
{
    if (micro == MICRO_ZERO_PER_TENSOR || micro == MICRO_ZERO_FLAT)
        return grad_pass_zero(p, micro == MICRO_ZERO_PER_TENSOR, seconds);
    return grad_pass_weights(p, micro == MICRO_WGRAD_ACCUM, seconds);
}

static void bench_micro(HarnessState *st, void *user)
{
    const Micro micro = *(const Micro *)user;
    CoreConfig cfg;
    if (!practice_run_config(st, false, NULL, &cfg)) return;
    int n = cfg.batch_size;
    GradPass *p = NULL;
    if (grad_pass_create(&cfg.model, n, cfg.backend == CORE_BACKEND_CUDA, &p) != 0) {
        practice_fail_or_skip(st, "setting up");
        return;
    }
    bool zeroing = micro == MICRO_ZERO_PER_TENSOR || micro == MICRO_ZERO_FLAT;
    double seconds = 0.0;
    int rc = micro_once(p, micro, &seconds);  // untimed warm-up: first touch, plans, set-up
    while (rc == 0 && harness_keep_running(st)) {
        rc = micro_once(p, micro, &seconds);
        harness_set_iteration_time(st, seconds);
    }
    if (rc != 0) {
        practice_fail_or_skip(st, zeroing ? "zeroing" : "the weight-gradient pass");
    } else {
        harness_counter(st, "tensors", grad_pass_tensors(p), HARNESS_COUNTER_PLAIN);
        harness_counter(st, "gradient_mib", grad_pass_floats(p) * 4.0 / 1048576.0, HARNESS_COUNTER_PLAIN);
        bool gpu = cfg.backend == CORE_BACKEND_CUDA;
        const char *how = zeroing ? (gpu ? "cudaMemsetAsync" : "memset")
                                  : (gpu ? "cuDNN backward-filter and cuBLAS, strict fp32"
                                         : "the fast CPU layers");
        char label[200];
        snprintf(label, sizeof label, "%s: %s, %d parameter tensors, batch %d; %s",
                 core_backend_name(cfg.backend), how, grad_pass_tensors(p), n,
                 gpu ? "CUDA events" : "wall clock");
        harness_set_label(st, label);
    }
    grad_pass_free(p);
}

static const Micro micros[] = {MICRO_ZERO_PER_TENSOR, MICRO_ZERO_FLAT, MICRO_WGRAD_ACCUM,
                               MICRO_WGRAD_OVERWRITE};

static void register_micro(const char *practice, const char *variant, HarnessRole role,
                           const Micro *m, const char *presets)
{
    harness_register(&(HarnessSpec){
        .practice = practice, .variant = variant, .role = role, .timing = HARNESS_TIMING_MANUAL,
        .fn = bench_micro, .user = (void *)m,
        .axes = {{"preset", presets, true}, {"batch", "0"}}, .unit = HARNESS_US, .min_time = 0.2,
        // on the GPU the L2 is flushed before every timed pass (grad_pass_cuda.cu)
        .cache = practice_on_gpu() ? HARNESS_CACHE_COLD : HARNESS_CACHE_UNSTATED});
}

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    // The presets that fit: all of them on a GPU; those a CPU steps through in seconds.
    const char *presets = practice_on_gpu() ? "tiny,mlp,small,medium,resnet18" : "tiny,mlp,small";
    static Practice steps = {
        .name = "zero_grad", .variants = steps_variants, .variant_count = 2, .batches = "0",
        .mode = PRACTICE_THROUGHPUT, .steps = 10, .min_time = 0.5,
        .check = PRACTICE_CHECK_PARAMS, .tolerance = 0.0 /* bit-identical */, .check_steps = 3,
        .label = "memset + accumulate vs set_to_none"};
    steps.presets = presets;
    // A CPU step of small takes a few hundred ms: 4 steps per timed iteration keep the
    // 5 repetitions of `make bench` within a minute or two there.
    practice_register(&steps);
    register_micro("zero_grad_memset", "per_tensor", HARNESS_BASELINE, &micros[0], presets);
    register_micro("zero_grad_memset", "flat_buffer", HARNESS_TUNED, &micros[1], presets);
    register_micro("zero_grad_wgrad", "accumulate", HARNESS_BASELINE, &micros[2], presets);
    register_micro("zero_grad_wgrad", "overwrite", HARNESS_TUNED, &micros[3], presets);
    return harness_run();
}
