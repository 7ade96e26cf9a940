// test_core_gpu.c: the CUDA backend against the CPU reference (CORE_BACKEND_CPU_REF, the
// plain-C oracle, not the fast CPU backend). Every test starts by
// checking for a device and is skipped visibly ("skipped: no CUDA device") without one.
// Tolerances are relative L2 errors of the whole gradient vector (and of the loss),
// stated per precision in grad_tol/loss_tol below.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/core.h"
#include "kernels/gpu_device.h"
#include "tests/support.h"
#include "kernels/synth.h"

// Gradient vs the CPU: strict fp32 differs only by summation order and cuDNN's
// algorithms (Winograd/FFT); fp32 (PyTorch's default) lets cuDNN's convolutions round
// their inputs to TF32 (10 mantissa bits), tf32 the GEMMs too; fp16 stores activations
// with 10 bits; bf16 with 7 bits.
static double grad_tol(CorePrecision p)
{
    switch (p) {
    case CORE_PRECISION_FP32_STRICT: return 2e-3;
    case CORE_PRECISION_FP32: return 3e-2;
    case CORE_PRECISION_TF32: return 3e-2;
    case CORE_PRECISION_FP16: return 5e-2;
    case CORE_PRECISION_BF16: return 1.5e-1;
    case CORE_PRECISION_COUNT: break;
    }
    return 0.0;
}

static double loss_tol(CorePrecision p)
{
    switch (p) {
    case CORE_PRECISION_FP32_STRICT: return 1e-4;
    case CORE_PRECISION_FP32: return 5e-3;
    case CORE_PRECISION_TF32: return 5e-3;
    case CORE_PRECISION_FP16: return 1e-2;
    case CORE_PRECISION_BF16: return 3e-2;
    case CORE_PRECISION_COUNT: break;
    }
    return 0.0;
}

static CoreConfig config(const char *preset, CoreBackend be, CorePrecision p, int batch)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, preset), 0);
    cfg.backend = be;
    cfg.precision = p;
    cfg.batch_size = batch;
    cfg.deterministic = true;  // tight comparisons: no run-to-run variation from cuDNN
    return cfg;
}

// Loss and gradient of `cfg` on one batch, with the parameters of `params` (if not NULL).
static float loss_grad(const CoreConfig *cfg, const TestBatch *b, const float *params, float *grad)
{
    Core *core = test_core_create(cfg);
    size_t np = core_param_count(core);
    if (params) assert_int_equal(core_params_set(core, params, np), 0);
    float loss = NAN;
    int rc = core_loss_grad(core, &b->b, &loss, grad);
    if (rc != 0) printf("core_loss_grad: %s\n", error_message());
    assert_int_equal(rc, 0);
    core_free(core);
    return loss;
}

static void test_gpu_grads_match_cpu_per_precision(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const char *presets[] = {"tiny", "mlp"};
    for (int pi = 0; pi < 2; pi++) {
        CoreConfig ccfg = config(presets[pi], CORE_BACKEND_CPU_REF, CORE_PRECISION_FP32, 8);
        TestBatch b;
        test_batch_open(&b, &ccfg, 8, 3);
        Core *cpu = test_core_create(&ccfg);
        size_t np = core_param_count(cpu);
        float *params = malloc(np * sizeof(float)), *gc = malloc(np * sizeof(float)),
              *gg = malloc(np * sizeof(float));
        assert_int_equal(core_params_get(cpu, params, np), 0);
        float lc;
        assert_int_equal(core_loss_grad(cpu, &b.b, &lc, gc), 0);
        core_free(cpu);
        for (int p = 0; p < CORE_PRECISION_COUNT; p++) {
            CoreConfig gcfg = config(presets[pi], CORE_BACKEND_CUDA, (CorePrecision)p, 8);
            float lg = loss_grad(&gcfg, &b, params, gg);
            double e = test_rel_l2(gg, gc, np), el = fabs((double)lg - lc) / fabs((double)lc);
            printf("%s %s: loss gpu %.6f cpu %.6f (rel %.2e, tol %.0e); grad rel err %.2e (tol %.1e)\n",
                   presets[pi], core_precision_name((CorePrecision)p), lg, lc, el,
                   loss_tol((CorePrecision)p), e, grad_tol((CorePrecision)p));
            assert_true(el <= loss_tol((CorePrecision)p));
            assert_true(e <= grad_tol((CorePrecision)p));
        }
        free(params); free(gc); free(gg);
        test_batch_close(&b);
    }
}

static void compare_variants(CoreConfig a, CoreConfig b, double tol, const char *what)
{
    TestBatch bt;
    test_batch_open(&bt, &a, 8, 4);
    Core *ca = test_core_create(&a);
    size_t np = core_param_count(ca);
    float *params = malloc(np * sizeof(float)), *ga = malloc(np * sizeof(float)),
          *gb = malloc(np * sizeof(float));
    assert_int_equal(core_params_get(ca, params, np), 0);
    float la;
    assert_int_equal(core_loss_grad(ca, &bt.b, &la, ga), 0);
    core_free(ca);
    float lb = loss_grad(&b, &bt, params, gb);
    double e = test_rel_l2(gb, ga, np);
    printf("%s: loss %.6f vs %.6f, grad rel err %.2e (tol %.0e)\n", what, la, lb, e, tol);
    assert_true(e <= tol);
    assert_true(fabs((double)la - lb) <= tol * fabs((double)la));
    free(params); free(ga); free(gb);
    test_batch_close(&bt);
}

static void test_gpu_nhwc_matches_nchw(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CorePrecision ps[] = {CORE_PRECISION_FP32, CORE_PRECISION_FP16};
    for (int i = 0; i < 2; i++) {
        CoreConfig a = config("tiny", CORE_BACKEND_CUDA, ps[i], 8), b = a;
        b.layout = CORE_LAYOUT_NHWC;
        char what[64];
        snprintf(what, sizeof what, "nhwc vs nchw (%s)", core_precision_name(ps[i]));
        compare_variants(a, b, grad_tol(ps[i]), what);
    }
}

// Fused BN+ReLU and add+ReLU, in both layouts, against the CPU reference (which runs
// them separately), at each precision's tolerance: the memory plan's aliases and the fused
// kernels together.
static void test_gpu_fused_matches_cpu_reference(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CorePrecision ps[] = {CORE_PRECISION_FP32_STRICT, CORE_PRECISION_FP16};
    for (int i = 0; i < 2; i++)
        for (int nhwc = 0; nhwc <= 1; nhwc++) {
            CoreConfig ref = config("tiny", CORE_BACKEND_CPU_REF, CORE_PRECISION_FP32, 8);
            CoreConfig fused = config("tiny", CORE_BACKEND_CUDA, ps[i], 8);
            fused.pointwise = CORE_POINTWISE_FUSED;
            fused.layout = nhwc ? CORE_LAYOUT_NHWC : CORE_LAYOUT_NCHW;
            char what[80];
            snprintf(what, sizeof what, "fused %s %s vs cpu-ref", core_precision_name(ps[i]),
                     core_layout_name(fused.layout));
            compare_variants(ref, fused, grad_tol(ps[i]), what);
        }
}

static void test_gpu_autotune_matches_heuristic(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig a = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 8), b = a;
    b.conv_algo = CORE_CONV_ALGO_AUTOTUNE;
    compare_variants(a, b, grad_tol(CORE_PRECISION_FP32), "autotune vs heuristic (fp32)");
    // A fresh autotuned core on the same shapes finds every choice in the cache.
    b.batch_size = 8;
    Core *c1 = test_core_create(&b), *c2 = test_core_create(&b);
    CoreStats s1, s2;
    assert_int_equal(core_stats(c1, &s1), 0);
    assert_int_equal(core_stats(c2, &s2), 0);
    printf("autotune: first core hits %d misses %d (%.1f ms); second hits %d misses %d\n",
           s1.algo_cache_hits, s1.algo_cache_misses, s1.autotune_ms, s2.algo_cache_hits,
           s2.algo_cache_misses);
    assert_int_equal(s2.algo_cache_misses, 0);
    assert_true(s2.algo_cache_hits > 0);
    assert_true(s2.autotune_ms == 0.0);
    core_free(c1);
    core_free(c2);
    // A new shape (batch 5) is tuned once, timed, then cached.
    b.batch_size = 5;
    Core *c3 = test_core_create(&b);
    CoreStats s3;
    assert_int_equal(core_stats(c3, &s3), 0);
    assert_true(s3.algo_cache_misses > 0);
    assert_true(s3.autotune_ms > 0.0);
    core_free(c3);
}

// Trains `steps` steps of the tiny preset and returns per-step losses and the final
// held-out accuracy (256 images).
static float train(CoreConfig cfg, int steps, float *losses)
{
    cfg.optim.total_steps = steps;
    Core *core = test_core_create(&cfg);
    TestBatch b;
    test_batch_open(&b, &cfg, cfg.batch_size, 0);
    for (int s = 0; s < steps; s++) {
        synth_batch(&b.task, (uint64_t)s, cfg.batch_size, b.images, b.labels);
        CoreStepResult r;
        int rc = core_step(core, &b.b, &r);
        if (rc != 0) printf("core_step: %s\n", error_message());
        assert_int_equal(rc, 0);
        if (losses) losses[s] = r.loss;
    }
    test_batch_close(&b);
    TestBatch e;
    test_batch_open(&e, &cfg, 256, 999999);
    CoreEvalResult er;
    assert_int_equal(core_eval(core, &e.b, &er), 0);
    test_batch_close(&e);
    core_free(core);
    return er.accuracy;
}

#define CURVE_STEPS 40
static void test_gpu_training_follows_cpu_curve(void **state)
{
    (void)state;
    REQUIRE_GPU();
    float lc[CURVE_STEPS], lg[CURVE_STEPS];
    float ac = train(config("tiny", CORE_BACKEND_CPU_REF, CORE_PRECISION_FP32, 32), CURVE_STEPS, lc);
    float ag = train(config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 32), CURVE_STEPS, lg);
    double worst = 0.0;
    for (int s = 0; s < CURVE_STEPS; s++) {
        double d = fabs((double)lg[s] - lc[s]) / (0.02 + lc[s]);
        if (d > worst) worst = d;
    }
    printf("curve over %d steps: final loss cpu %.4f gpu %.4f, worst rel diff %.3f (tol 0.05); "
           "accuracy cpu %.3f gpu %.3f\n", CURVE_STEPS, lc[CURVE_STEPS - 1], lg[CURVE_STEPS - 1],
           worst, ac, ag);
    assert_true(worst <= 0.05);
    assert_true(fabsf(ac - ag) <= 0.05f);
}

#define ACC_STEPS 120
#define ACC_MARGIN 0.05f  // mixed precision may lose at most 5 points of accuracy
static void test_gpu_mixed_precision_reaches_fp32_accuracy(void **state)
{
    (void)state;
    REQUIRE_GPU();
    float a32 = train(config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 32), ACC_STEPS, NULL);
    printf("fp32: held-out accuracy %.3f after %d steps\n", a32, ACC_STEPS);
    assert_true(a32 >= 0.90f);
    for (int p = CORE_PRECISION_TF32; p <= CORE_PRECISION_BF16; p++) {
        float a = train(config("tiny", CORE_BACKEND_CUDA, (CorePrecision)p, 32), ACC_STEPS, NULL);
        printf("%s: held-out accuracy %.3f (fp32 %.3f, margin %.2f)\n",
               core_precision_name((CorePrecision)p), a, a32, ACC_MARGIN);
        assert_true(a >= a32 - ACC_MARGIN);
    }
}

static void test_gpu_scaler_trajectory(void **state)
{
    (void)state;
    REQUIRE_GPU();
    // test_amp.c's hand-worked table divided by 64: init_scale 1024 (so that real fp16
    // overflow cannot add skips of its own), interval 4, inf/nan at steps 3, 4 and 10.
    static const bool inf[12] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0};
    static const float scale[12] = {1024, 1024, 1024, 512, 256, 256, 256, 256, 512, 512, 256, 256};
    static const int tracker[12] = {1, 2, 3, 0, 0, 1, 2, 3, 0, 1, 0, 1};
    CoreConfig cfg = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP16, 8);
    cfg.scaler.growth_interval = 4;
    cfg.scaler.init_scale = 1024.0f;
    Core *core = test_core_create(&cfg);
    TestBatch b;
    test_batch_open(&b, &cfg, 8, 0);
    size_t np = core_param_count(core);
    float *before = malloc(np * sizeof(float)), *after = malloc(np * sizeof(float));
    int skipped = 0;
    for (int i = 0; i < 12; i++) {
        synth_batch(&b.task, (uint64_t)i, 8, b.images, b.labels);
        if (inf[i]) assert_int_equal(core_inject_grad_fault(core, i == 10 ? NAN : INFINITY), 0);
        assert_int_equal(core_params_get(core, before, np), 0);
        assert_int_equal(core_step(core, &b.b, NULL), 0);
        assert_int_equal(core_params_get(core, after, np), 0);
        if (inf[i]) assert_memory_equal(before, after, np * sizeof(float));
        else assert_memory_not_equal(before, after, np * sizeof(float));
        CoreStats st;
        assert_int_equal(core_stats(core, &st), 0);
        skipped += inf[i];
        assert_true(st.loss_scale == scale[i]);
        assert_int_equal(st.growth_tracker, tracker[i]);
        assert_int_equal(st.skipped_steps, skipped);
    }
    free(before); free(after);
    test_batch_close(&b);
    core_free(core);
}

static void test_gpu_zero_grad_modes_agree(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig a = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 8), b = a;
    b.zero_grad = CORE_ZERO_GRAD_SET_TO_NONE;
    Core *ca = test_core_create(&a), *cb = test_core_create(&b);
    TestBatch bt;
    test_batch_open(&bt, &a, 8, 0);
    for (int s = 0; s < 6; s++) {
        synth_batch(&bt.task, (uint64_t)s, 8, bt.images, bt.labels);
        assert_int_equal(core_step(ca, &bt.b, NULL), 0);
        assert_int_equal(core_step(cb, &bt.b, NULL), 0);
    }
    size_t np = core_param_count(ca);
    float *pa = malloc(np * sizeof(float)), *pb = malloc(np * sizeof(float));
    assert_int_equal(core_params_get(ca, pa, np), 0);
    assert_int_equal(core_params_get(cb, pb, np), 0);
    // Bit-identical unless cuDNN picked a non-deterministic (atomics) algorithm.
    double e = test_rel_l2(pb, pa, np);
    printf("zero-grad memset vs set_to_none on GPU: weights rel diff %.2e (tol 1e-6), %s\n", e,
           memcmp(pa, pb, np * sizeof(float)) == 0 ? "bit-identical" : "not bit-identical");
    assert_true(e <= 1e-6);
    free(pa); free(pb);
    test_batch_close(&bt);
    core_free(ca);
    core_free(cb);
}

static void test_gpu_deferred_readback(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig a = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 16), b = a;
    b.readback = CORE_READBACK_DEFERRED;
    b.readback_interval = 4;
    Core *ca = test_core_create(&a), *cb = test_core_create(&b);
    TestBatch bt;
    test_batch_open(&bt, &a, 16, 0);
    double sum = 0.0, acc_sum = 0.0;
    for (int s = 0; s < 8; s++) {
        synth_batch(&bt.task, (uint64_t)s, 16, bt.images, bt.labels);
        CoreStepResult ra, rb;
        assert_int_equal(core_step(ca, &bt.b, &ra), 0);
        assert_int_equal(core_step(cb, &bt.b, &rb), 0);
        assert_true(ra.loss_ready);
        sum += ra.loss;
        acc_sum += ra.accuracy;
        assert_int_equal(rb.loss_ready, (s + 1) % 4 == 0);
        if (rb.loss_ready) {
            printf("deferred loss %.5f, mean of every-step losses %.5f\n", rb.loss, sum / 4);
            assert_int_equal(rb.loss_steps, 4);
            assert_true(fabs(rb.loss - sum / 4) <= 1e-3 * fabs(sum / 4));
            assert_true(fabs(rb.accuracy - acc_sum / 4) <= 1.0 / 16 + 1e-6);  // one image at most
            sum = acc_sum = 0.0;
        }
    }
    test_batch_close(&bt);
    core_free(ca);
    core_free(cb);
}

static void test_gpu_device_batch_matches_host(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 8);
    TestBatch b;
    test_batch_open(&b, &cfg, 8, 5);
    Core *core = test_core_create(&cfg);
    size_t np = core_param_count(core), img = (size_t)8 * 3 * 16 * 16;
    float *gh = malloc(np * sizeof(float)), *gd = malloc(np * sizeof(float));
    float lh, ld;
    assert_int_equal(core_loss_grad(core, &b.b, &lh, gh), 0);
    float *dimg = NULL;
    int32_t *dlab = NULL;
    assert_int_equal(cudaMalloc((void **)&dimg, img * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&dlab, 8 * sizeof(int32_t)), cudaSuccess);
    assert_int_equal(cudaMemcpy(dimg, b.images, img * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemcpy(dlab, b.labels, 8 * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);  // the core's stream is non-blocking
    CoreBatch db = {.images = dimg, .labels = dlab, .n = 8, .memory = CORE_MEMORY_DEVICE};
    assert_int_equal(core_loss_grad(core, &db, &ld, gd), 0);
    double e = test_rel_l2(gd, gh, np);
    printf("device vs host batch: loss %.6f vs %.6f, grad rel diff %.2e (tol 1e-6)\n", ld, lh, e);
    assert_true(e <= 1e-6);
    assert_int_equal(core_step(core, &db, NULL), 0);
    cudaFree(dimg);
    cudaFree(dlab);
    free(gh); free(gd);
    test_batch_close(&b);
    core_free(core);
}

static void test_gpu_batch_size_changes(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP16, 8);
    cfg.layout = CORE_LAYOUT_NHWC;
    Core *core = test_core_create(&cfg);
    int sizes[] = {8, 5, 8, 13, 8};
    for (int i = 0; i < 5; i++) {
        TestBatch b;
        test_batch_open(&b, &cfg, sizes[i], (uint64_t)i);
        CoreStepResult r;
        int rc = core_step(core, &b.b, &r);
        if (rc != 0) printf("core_step(n=%d): %s\n", sizes[i], error_message());
        assert_int_equal(rc, 0);
        assert_true(isfinite(r.loss));
        test_batch_close(&b);
    }
    core_free(core);
}

// ---- split step and gradient hooks (what DDP builds on) ----------------------------------

// What the hooks saw: each ready range is copied, on a side stream that waits on the
// hook's event, into snap; a range copied before its gradients were final would differ
// from the gradient computed without hooks.
typedef struct HookLog {
    cudaStream_t side;
    float *snap;       // device, np floats
    size_t np, covered, last_end;
    int ready_calls, before_calls;
    bool args_ok, order_ok;
} HookLog;

static int log_ready(void *user, const CoreGradReady *r)
{
    HookLog *h = user;
    h->ready_calls++;
    h->args_ok = h->args_ok && r->event && r->stream && r->grads && r->count > 0 &&
                 r->offset + r->count <= h->np;
    if (!h->args_ok) return 0;
    if (h->covered % h->np == 0) h->last_end = h->np;  // a new backward begins
    h->order_ok = h->order_ok && r->offset + r->count <= h->last_end;  // backward order
    h->last_end = r->offset;
    h->covered += r->count;
    if (cudaStreamWaitEvent(h->side, (cudaEvent_t)r->event, 0) != cudaSuccess ||
        cudaMemcpyAsync(h->snap + r->offset, r->grads + r->offset, r->count * sizeof(float),
                        cudaMemcpyDeviceToDevice, h->side) != cudaSuccess)
        return error_set(ERROR_LIBRARY, "hook: %s", cudaGetErrorString(cudaGetLastError()));
    return 0;
}

static int log_before_update(void *user, float *grads, size_t count, void *stream)
{
    HookLog *h = user;
    (void)grads;
    h->before_calls++;
    h->args_ok = h->args_ok && count == h->np && stream;
    return cudaStreamSynchronize(h->side) == cudaSuccess ? 0 : error_set(ERROR_LIBRARY, "hook sync");
}

static void log_arm(HookLog *h, Core *core)
{
    h->np = core_param_count(core);
    h->covered = 0;
    h->last_end = h->np;
    h->ready_calls = h->before_calls = 0;
    h->args_ok = h->order_ok = true;
    CoreGradHooks hooks = {log_ready, log_before_update, h};
    assert_int_equal(core_set_grad_hooks(core, &hooks), 0);
}

// core_forward_backward + core_apply_update equals core_step; the hooks report every
// parameter once per backward, in backward order, and their events order the copies after
// the gradients (also through the staged NHWC path); accumulate adds micro-batches.
static void test_gpu_split_step_and_hooks(void **state)
{
    (void)state;
    REQUIRE_GPU();
    for (int layout = 0; layout < 2; layout++)
        for (int mode = 0; mode < 2; mode++) {
            // every core here has this config: same (deterministic) algorithms, same results
            CoreConfig cfg = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 8);
            cfg.layout = layout ? CORE_LAYOUT_NHWC : CORE_LAYOUT_NCHW;
            cfg.zero_grad = mode ? CORE_ZERO_GRAD_SET_TO_NONE : CORE_ZERO_GRAD_MEMSET;
            TestBatch b1, b2;
            test_batch_open(&b1, &cfg, 8, 0);
            test_batch_open(&b2, &cfg, 8, 1);
            Core *ref = test_core_create(&cfg), *plain = test_core_create(&cfg), *split = test_core_create(&cfg), *acc = test_core_create(&cfg);
            size_t np = core_param_count(ref);
            float *g1 = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
            float *snap = malloc(np * sizeof(float)), *pa = malloc(np * sizeof(float));
            float *pb = malloc(np * sizeof(float));
            assert_true(g1 && g2 && snap && pa && pb);
            float loss = NAN;
            assert_int_equal(core_loss_grad(ref, &b1.b, &loss, g1), 0);
            assert_int_equal(core_loss_grad(ref, &b2.b, &loss, g2), 0);
            HookLog h = {0};
            assert_int_equal(cudaStreamCreateWithFlags(&h.side, cudaStreamNonBlocking), cudaSuccess);
            assert_int_equal(cudaMalloc((void **)&h.snap, np * sizeof(float)), cudaSuccess);

            // One step, split and hooked, against core_step.
            assert_int_equal(core_step(plain, &b1.b, NULL), 0);
            log_arm(&h, split);
            int rc = core_forward_backward(split, &b1.b, false);
            if (rc == 0) rc = core_apply_update(split, 8, NULL);
            if (rc != 0) printf("split step: %s\n", error_message());
            assert_int_equal(rc, 0);
            assert_int_equal(cudaMemcpy(snap, h.snap, np * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
            assert_int_equal(core_params_get(plain, pa, np), 0);
            assert_int_equal(core_params_get(split, pb, np), 0);
            double e_params = test_rel_l2(pb, pa, np), e_grad = test_rel_l2(snap, g1, np);
            printf("%s, %s: split vs core_step weights rel %.2e (tol 1e-6); hooked gradient vs "
                   "core_loss_grad rel %.2e (tol 1e-5); %d ready calls covering %zu of %zu\n",
                   core_layout_name(cfg.layout), core_zero_grad_name(cfg.zero_grad), e_params,
                   e_grad, h.ready_calls, h.covered, np);
            assert_true(h.args_ok && h.order_ok);
            assert_int_equal(h.covered, np);
            assert_int_equal(h.before_calls, 1);
            assert_true(e_params <= 1e-6);
            assert_true(e_grad <= 1e-5);

            // Two micro-batches accumulated: the hooked gradient is their sum.
            log_arm(&h, acc);
            rc = core_forward_backward(acc, &b1.b, false);
            if (rc == 0) rc = core_forward_backward(acc, &b2.b, true);
            assert_int_equal(cudaStreamSynchronize(h.side), cudaSuccess);
            assert_int_equal(cudaMemcpy(snap, h.snap, np * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
            CoreStepResult r;
            if (rc == 0) rc = core_apply_update(acc, 16, &r);
            if (rc != 0) printf("accumulated step: %s\n", error_message());
            assert_int_equal(rc, 0);
            for (size_t i = 0; i < np; i++) g1[i] += g2[i];
            double e_acc = test_rel_l2(snap, g1, np);
            printf("  accumulated 2 x 8: gradient vs the sum of core_loss_grad rel %.2e (tol 1e-5), "
                   "loss %.4f over %d micro-batches\n", e_acc, r.loss, r.loss_steps);
            assert_int_equal(h.covered, 2 * np);
            assert_true(e_acc <= 1e-5);
            assert_true(r.loss_ready && isfinite(r.loss) && r.loss_steps == 2);

            cudaFree(h.snap);
            cudaStreamDestroy(h.side);
            free(g1); free(g2); free(snap); free(pa); free(pb);
            core_free(ref); core_free(plain); core_free(split); core_free(acc);
            test_batch_close(&b1);
            test_batch_close(&b2);
        }
}

// core_create plans nothing (buffers and algorithms come with the first batch of each kind
// of pass), so an oversized batch is refused by its first step, as out of memory, and the
// device stays usable. The batch's images are never read: planning fails before the upload.
static void test_gpu_out_of_memory_is_reported(void **state)
{
    (void)state;
    REQUIRE_GPU();
    // 1024x1024 images at batch 4096: terabytes of activations.
    CoreConfig cfg = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 4096);
    cfg.model.image_size = 1024;
    Core *core = test_core_create(&cfg);
    float *images = NULL;
    int32_t *labels = NULL;
    assert_int_equal(cudaMalloc((void **)&images, sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&labels, sizeof(int32_t)), cudaSuccess);
    CoreBatch b = {.images = images, .labels = labels, .n = 4096, .memory = CORE_MEMORY_DEVICE};
    error_clear();
    assert_int_equal(core_step(core, &b, NULL), -1);
    printf("oversized batch: %s\n", error_message());
    assert_int_equal(error_kind(), ERROR_OUT_OF_MEMORY);
    core_free(core);
    cudaFree(images);
    cudaFree(labels);
    // The device is still usable afterwards.
    CoreConfig ok = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 8);
    TestBatch tb;
    test_batch_open(&tb, &ok, 8, 1);
    core = test_core_create(&ok);
    assert_int_equal(core_step(core, &tb.b, NULL), 0);
    core_free(core);
    test_batch_close(&tb);
}

// A new core has no plan: no arena, no algorithm selected or tuned, no convolution shape.
// Its first pass plans exactly what that pass needs.
static void test_gpu_core_plans_lazily(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 8);
    cfg.conv_algo = CORE_CONV_ALGO_AUTOTUNE;
    core_conv_cache_clear();
    Core *core = test_core_create(&cfg);
    CoreStats s;
    assert_int_equal(core_stats(core, &s), 0);
    CoreConvAlgoInfo info[16];
    printf("after core_create: activation bytes %zu, cache misses %d, autotune %.1f ms, "
           "peak %zu\n", s.activation_bytes, s.algo_cache_misses, s.autotune_ms, s.peak_bytes);
    assert_int_equal(s.activation_bytes, 0);
    assert_int_equal(s.algo_cache_misses + s.algo_cache_hits, 0);
    assert_true(s.autotune_ms == 0.0);
    assert_int_equal(core_conv_algos(core, info, 16), 0);
    TestBatch b;
    test_batch_open(&b, &cfg, 8, 2);
    assert_int_equal(core_step(core, &b.b, NULL), 0);
    assert_int_equal(core_stats(core, &s), 0);
    assert_true(s.activation_bytes > 0 && s.algo_cache_misses > 0 && s.autotune_ms > 0.0);
    test_batch_close(&b);
    core_free(core);
}

// Upload buffers exist only for host batches: a core fed from device memory has none (its
// peak is lower by exactly the two staging slots' images and labels), as PyTorch holds no
// copy of a batch that is already on the GPU.
static void test_gpu_device_batches_need_no_upload_buffers(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const int n = 8;
    CoreConfig cfg = config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, n);
    TestBatch b;
    test_batch_open(&b, &cfg, n, 3);
    size_t img = (size_t)n * cfg.model.in_channels * cfg.model.image_size * cfg.model.image_size;
    float *dimg = NULL;
    int32_t *dlab = NULL;
    assert_int_equal(cudaMalloc((void **)&dimg, img * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&dlab, n * sizeof(int32_t)), cudaSuccess);
    assert_int_equal(cudaMemcpy(dimg, b.images, img * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemcpy(dlab, b.labels, n * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
    CoreBatch db = {.images = dimg, .labels = dlab, .n = n, .memory = CORE_MEMORY_DEVICE};
    size_t peak[2];
    for (int host = 0; host < 2; host++) {
        Core *core = test_core_create(&cfg);
        for (int i = 0; i < 2; i++)  // both staging slots in turn
            assert_int_equal(core_step(core, host ? &b.b : &db, NULL), 0);
        CoreStats s;
        assert_int_equal(core_stats(core, &s), 0);
        peak[host] = s.peak_bytes;
        core_free(core);
    }
    size_t slots = 2 * (img * sizeof(float) + n * sizeof(int32_t));
    printf("peak: device batches %zu, host batches %zu (two staging slots: %zu)\n", peak[0],
           peak[1], slots);
    assert_int_equal(peak[1] - peak[0], slots);
    cudaFree(dimg);
    cudaFree(dlab);
    test_batch_close(&b);
}

// The loss is summed in a fixed order (per-sample losses, then one block's sum), so the
// same batch gives the same loss bit for bit, on one core and on two (batch 256: 256
// blocks whose float atomics would add in the order they finish).
static void test_gpu_loss_is_deterministic(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig cfg = config("small", CORE_BACKEND_CUDA, CORE_PRECISION_FP32, 256);
    TestBatch b;
    test_batch_open(&b, &cfg, 256, 4);
    float first = NAN;
    for (int k = 0; k < 2; k++) {
        Core *core = test_core_create(&cfg);
        for (int i = 0; i < 3; i++) {
            CoreEvalResult r;
            assert_int_equal(core_eval(core, &b.b, &r), 0);
            if (k == 0 && i == 0) first = r.loss;
            if (memcmp(&r.loss, &first, sizeof first) != 0)
                fail_msg("core %d eval %d: loss %.9g differs from the first %.9g", k, i, r.loss, first);
        }
        core_free(core);
    }
    printf("small batch 256: the same loss %.9g in 6 evals on two cores\n", first);
    test_batch_close(&b);
}

// Every precision x layout x algorithm policy trains a step on the tiny preset, whose
// 3-channel stem covers the combinations most at risk under cuDNN's legacy API (fp32
// NHWC with FMA math, bf16 NCHW, fp16 NHWC backward-data with 3 input channels): an
// algorithm cuDNN lists but cannot run must fall through to the next candidate. Each
// core reports the algorithm and math type of every convolution shape it planned (FMA
// only in strict fp32), and its device memory figure covers its own allocations.
static void test_gpu_every_precision_layout_and_policy_runs(void **state)
{
    (void)state;
    REQUIRE_GPU();
    for (int p = 0; p < CORE_PRECISION_COUNT; p++)
        for (int l = CORE_LAYOUT_NCHW; l <= CORE_LAYOUT_NHWC; l++)
            for (int a = CORE_CONV_ALGO_HEURISTIC; a <= CORE_CONV_ALGO_AUTOTUNE; a++) {
                CoreConfig cfg = config("tiny", CORE_BACKEND_CUDA, (CorePrecision)p, 8);
                cfg.layout = (CoreLayout)l;
                cfg.conv_algo = (CoreConvAlgo)a;
                cfg.deterministic = false;  // what the benchmarks run
                Core *core = test_core_create(&cfg);
                TestBatch b;
                test_batch_open(&b, &cfg, 8, (uint64_t)p);
                CoreStepResult r;
                int rc = core_step(core, &b.b, &r);
                if (rc != 0) printf("core_step: %s\n", error_message());
                assert_int_equal(rc, 0);
                assert_true(isfinite(r.loss));
                CoreConvAlgoInfo info[16];
                int n = test_conv_algos(core, true, info, 16);
                for (int i = 0; i < n; i++) {
                    if (p == CORE_PRECISION_FP32_STRICT) {
                        assert_string_equal(info[i].fwd_math, "fma");
                        assert_string_equal(info[i].bwd_data_math, "fma");
                        assert_string_equal(info[i].bwd_filter_math, "fma");
                    }
                }
                char summary[2048];
                assert_int_equal(core_conv_algo_summary(core, summary, sizeof summary), 0);
                CoreStats st;
                assert_int_equal(core_stats(core, &st), 0);
                printf("%s %s %s: peak %zu KiB, device used %zu KiB; %s\n",
                       core_precision_name((CorePrecision)p), core_layout_name((CoreLayout)l),
                       core_conv_algo_name((CoreConvAlgo)a), st.peak_bytes >> 10,
                       st.device_used_bytes >> 10, summary);
                assert_true(st.device_used_bytes >= st.peak_bytes / 2);
                // what was asked is what ran: layout, activation type, TF32, tuning
                rc = core_assert_in_effect(core, &cfg);
                if (rc != 0) fail_msg("%s", error_message());
                assert_int_equal(st.conv_shapes_tuned, a == CORE_CONV_ALGO_AUTOTUNE ? st.conv_shapes : 0);
                test_batch_close(&b);
                core_free(core);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_grads_match_cpu_per_precision),
        cmocka_unit_test(test_gpu_nhwc_matches_nchw),
        cmocka_unit_test(test_gpu_autotune_matches_heuristic),
        cmocka_unit_test(test_gpu_training_follows_cpu_curve),
        cmocka_unit_test(test_gpu_mixed_precision_reaches_fp32_accuracy),
        cmocka_unit_test(test_gpu_scaler_trajectory),
        cmocka_unit_test(test_gpu_zero_grad_modes_agree),
        cmocka_unit_test(test_gpu_deferred_readback),
        cmocka_unit_test(test_gpu_device_batch_matches_host),
        cmocka_unit_test(test_gpu_batch_size_changes),
        cmocka_unit_test(test_gpu_split_step_and_hooks),
        cmocka_unit_test(test_gpu_out_of_memory_is_reported),
        cmocka_unit_test(test_gpu_core_plans_lazily),
        cmocka_unit_test(test_gpu_device_batches_need_no_upload_buffers),
        cmocka_unit_test(test_gpu_loss_is_deterministic),
        cmocka_unit_test(test_gpu_every_precision_layout_and_policy_runs),
        cmocka_unit_test(test_gpu_fused_matches_cpu_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
