// test_adamw.c: the core's AdamW (CORE_OPTIM_ADAMW) against torch.optim.AdamW's formula,
// replayed here in double precision by a loop of its own (not kernels/adamw.h):
//   t += 1 per update applied; p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// The update alone: a before_update hook overwrites every step's gradients with fixed
// synthetic values (wide dynamic range, both signs, exact zeros), so that the reference,
// the fast CPU and the CUDA backends apply the same update to the same gradients and each is
// compared with the replay. With real gradients: a hook captures what each core_step used.
// Every comparison is the relative L2 error of the update (params after - initial), and each
// test also replays the realistic bugs (no bias correction, L2-coupled weight decay, t
// advanced by a skipped fp16 step, betas swapped) and asserts they land far outside the
// tolerance, so the tolerance is shown to catch them. The reference also equals
// bench/fused_optimizer's optim_adamw_span bit for bit. The CUDA test is skipped, visibly,
// without a device.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/fused_optimizer/optim_update.h"
#include "kernels/check.h"
#include "kernels/core.h"
#include "tests/support.h"

// fp32 rounding of the update against float64: a few ulps of each parameter per step over
// an update of ~lr per step (measured ~1e-7 on the CPU backends); the bugs below move it by
// 1e-2 or more.
#define UPDATE_TOL 1e-5
// CUDA: the same arithmetic, but nvcc contracts to FMAs and sqrtf/division may round
// differently; still far below every bug.
#define CUDA_TOL 1e-5
// Fast against reference, on the same gradients: FMA contraction in the SIMD clones only.
#define FAST_TOL 1e-5
#define STEPS 5

typedef enum { EXACT, NO_BIAS_CORRECTION, L2_COUPLED, T_ADVANCES_ON_SKIP, BETAS_SWAPPED,
               VARIANTS } Variant;
static const char *variant_names[] = {"exact", "no bias correction", "L2-coupled weight decay",
                                      "t advanced by a skipped step", "betas swapped"};

// The AdamW config of the tests: none of torch's defaults, so that a default hard-coded
// somewhere (or two values swapped) shows; a weight decay large enough to matter per step.
static CoreConfig adamw_config(const char *preset, CoreBackend backend, CorePrecision precision)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, preset), 0);
    cfg.backend = backend;
    cfg.precision = precision;
    cfg.batch_size = 8;
    cfg.deterministic = true;
    cfg.optim.optimizer = CORE_OPTIM_ADAMW;
    cfg.optim.base_lr = 0.01f;
    cfg.optim.weight_decay = 0.1f;
    cfg.optim.beta1 = 0.8f;
    cfg.optim.beta2 = 0.95f;
    cfg.optim.eps = 1e-6f;
    cfg.optim.warmup_steps = 2;  // a different LR at every step
    cfg.optim.decay = CORE_LR_COSINE;
    cfg.optim.total_steps = 12;
    return cfg;
}

// The hook's state: `write` synthetic gradients (times the loss scale), else capture them.
typedef struct Grads {
    bool write;
    int step;
    float scale;     // the GradScaler's scale at this step (1 unless fp16)
    size_t n;
    float *g;        // this step's (unscaled) gradients
} Grads;

static float synthetic_grad(int step, size_t i)
{
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ (uint64_t)(step + 1) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    if (h % 17 == 0) return 0.0f;  // exact zeros: m and v decay, p only decays
    double u = (double)(h >> 11) / 9007199254740992.0;                  // [0, 1)
    double mag = pow(10.0, -4.0 + 4.0 * (double)((h >> 3) % 1000) / 1000.0);  // 1e-4 .. 1
    return (float)((u < 0.5 ? -1.0 : 1.0) * mag);
}

static int hook_ready(void *user, const CoreGradReady *ready) { (void)user; (void)ready; return 0; }

static int hook_before_update(void *user, float *grads, size_t count, void *stream)
{
    Grads *s = user;
    assert_int_equal(count, s->n);
    if (s->write) {
        for (size_t i = 0; i < count; i++) s->g[i] = synthetic_grad(s->step, i);
        float *scaled = malloc(count * sizeof(float));
        assert_non_null(scaled);
        for (size_t i = 0; i < count; i++) scaled[i] = s->g[i] * s->scale;  // powers of 2: exact
        if (stream) {
            cudaStream_t st = (cudaStream_t)stream;
            assert_int_equal(cudaMemcpyAsync(grads, scaled, count * sizeof(float),
                                             cudaMemcpyHostToDevice, st), cudaSuccess);
            assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
        } else {
            memcpy(grads, scaled, count * sizeof(float));
        }
        free(scaled);
    } else {
        assert_null(stream);  // capturing: the CPU backends only
        for (size_t i = 0; i < count; i++) s->g[i] = grads[i] / s->scale;
    }
    return 0;
}

// What one core did over STEPS steps: initial and final parameters, each step's gradients,
// LR and whether it was skipped.
typedef struct Trace {
    size_t np;
    float *p0, *p1;
    float *g[STEPS];
    float lr[STEPS];
    bool skipped[STEPS];
} Trace;

// STEPS steps of cfg on synthetic batches; `write`: synthetic gradients through the hook;
// inject_at >= 0: an inf gradient at that step (fp16: the GradScaler skips it).
static Trace run_core(const CoreConfig *cfg, bool write, int inject_at)
{
    Core *core = test_core_create(cfg);
    Trace t = {.np = core_param_count(core)};
    t.p0 = malloc(t.np * sizeof(float));
    t.p1 = malloc(t.np * sizeof(float));
    assert_true(t.p0 && t.p1);
    assert_int_equal(core_params_get(core, t.p0, t.np), 0);
    Grads s = {.write = write, .n = t.np};
    CoreGradHooks hooks = {.ready = hook_ready, .before_update = hook_before_update, .user = &s};
    assert_int_equal(core_set_grad_hooks(core, &hooks), 0);
    TestBatch b;
    test_batch_open(&b, cfg, cfg->batch_size, 0);
    int skipped = 0;
    for (int i = 0; i < STEPS; i++) {
        CoreStats st;
        assert_int_equal(core_stats(core, &st), 0);
        s.step = i;
        s.scale = st.loss_scale;
        s.g = t.g[i] = malloc(t.np * sizeof(float));
        assert_non_null(t.g[i]);
        synth_batch(&b.task, (uint64_t)i, cfg->batch_size, b.images, b.labels);
        if (i == inject_at) assert_int_equal(core_inject_grad_fault(core, INFINITY), 0);
        CoreStepResult r;
        int rc = core_step(core, &b.b, &r);
        if (rc != 0) fail_msg("core_step: %s", error_message());
        t.lr[i] = r.lr;
        assert_int_equal(core_stats(core, &st), 0);
        t.skipped[i] = st.skipped_steps > skipped;
        skipped = st.skipped_steps;
    }
    assert_int_equal(core_params_get(core, t.p1, t.np), 0);
    test_batch_close(&b);
    core_free(core);
    return t;
}

static void trace_free(Trace *t)
{
    free(t->p0);
    free(t->p1);
    for (int i = 0; i < STEPS; i++) free(t->g[i]);
}

// The trace's steps replayed in double from its initial parameters, as `variant` computes
// them: the final parameters into out.
static void replay(const Trace *t, const CoreOptimConfig *o, Variant variant, double *out)
{
    size_t np = t->np;
    double *m = calloc(np, sizeof(double)), *v = calloc(np, sizeof(double));
    assert_true(m && v);
    for (size_t i = 0; i < np; i++) out[i] = t->p0[i];
    double b1 = o->beta1, b2 = o->beta2, eps = o->eps, wd = o->weight_decay;
    if (variant == BETAS_SWAPPED) { double x = b1; b1 = b2; b2 = x; }
    int step = 0;
    for (int s = 0; s < STEPS; s++) {
        if (t->skipped[s]) {  // optimizer.step() is not called
            step += variant == T_ADVANCES_ON_SKIP;
            continue;
        }
        step++;
        double lr = t->lr[s];
        double bc1 = variant == NO_BIAS_CORRECTION ? 1.0 : 1.0 - pow(b1, step);
        double bc2 = variant == NO_BIAS_CORRECTION ? 1.0 : 1.0 - pow(b2, step);
        for (size_t i = 0; i < np; i++) {
            double g = t->g[s][i];
            if (variant == L2_COUPLED) g += wd * out[i];  // Adam's weight_decay, not AdamW's
            else out[i] *= 1.0 - lr * wd;
            m[i] = b1 * m[i] + (1.0 - b1) * g;
            v[i] = b2 * v[i] + (1.0 - b2) * g * g;
            out[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
        }
    }
    free(m);
    free(v);
}

// ||(got - p0) - (want - p0)|| / ||want - p0||: the error of the update.
static double update_err(const Trace *t, const float *got, const double *want)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < t->np; i++) {
        double d = (double)got[i] - want[i], u = want[i] - t->p0[i];
        num += d * d;
        den += u * u;
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

// The trace against the exact replay (within tol) and against every bug the config can
// show (each at least 100x tol off, else the assertion could not tell it from rounding).
static void assert_replays(const char *what, const CoreConfig *cfg, const Trace *t, double tol)
{
    double *want = malloc(t->np * sizeof(double));
    assert_non_null(want);
    bool any_skipped = false;
    for (int s = 0; s < STEPS; s++) any_skipped |= t->skipped[s];
    for (int v = 0; v < VARIANTS; v++) {
        if (v == T_ADVANCES_ON_SKIP && !any_skipped) continue;
        replay(t, &cfg->optim, (Variant)v, want);
        double e = update_err(t, t->p1, want);
        printf("%s: update against the float64 replay (%s): rel err %.2e (tol %.0e)\n", what,
               variant_names[v], e, tol);
        if (v == EXACT) assert_true(e <= tol);
        else assert_true(e >= 100.0 * tol);
    }
    free(want);
}

static void test_adamw_config(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "mlp", "small", "medium", "resnet18"};
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        CoreConfig c;
        assert_int_equal(core_config_preset(&c, presets[i]), 0);
        assert_int_equal(c.optim.optimizer, CORE_OPTIM_SGD);
        assert_true(c.optim.beta1 == 0.9f && c.optim.beta2 == 0.999f && c.optim.eps == 1e-8f);
    }
    CoreConfig c;
    assert_int_equal(core_config_preset(&c, "tiny"), 0);
    c.optim.optimizer = CORE_OPTIM_ADAMW;
    assert_int_equal(core_config_validate(&c), 0);
    const struct { float b1, b2, eps; } bad[] = {
        {1.0f, 0.999f, 1e-8f}, {-0.1f, 0.999f, 1e-8f}, {0.9f, 1.0f, 1e-8f},
        {0.9f, 0.999f, 0.0f}, {0.9f, 0.999f, -1e-8f}, {NAN, 0.999f, 1e-8f}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        c.optim.beta1 = bad[i].b1;
        c.optim.beta2 = bad[i].b2;
        c.optim.eps = bad[i].eps;
        c.optim.optimizer = CORE_OPTIM_ADAMW;
        assert_int_equal(core_config_validate(&c), -1);
        assert_int_equal(error_kind(), ERROR_BAD_USAGE);
        c.optim.optimizer = CORE_OPTIM_SGD;  // SGD ignores them
        assert_int_equal(core_config_validate(&c), 0);
    }
    c.optim.optimizer = (CoreOptimizer)2;
    assert_int_equal(core_config_validate(&c), -1);
    CoreOptimizer o;
    assert_int_equal(core_optimizer_parse("adamw", &o), 0);
    assert_int_equal(o, CORE_OPTIM_ADAMW);
    assert_int_equal(core_optimizer_parse("sgd", &o), 0);
    assert_int_equal(o, CORE_OPTIM_SGD);
    assert_int_equal(core_optimizer_parse("adam", &o), -1);
    assert_string_equal(core_optimizer_name(CORE_OPTIM_ADAMW), "adamw");
}

// The update alone, synthetic gradients, on both CPU backends; then fast against reference.
static void test_adamw_update_cpu(void **state)
{
    (void)state;
    CoreConfig ref_cfg = adamw_config("tiny", CORE_BACKEND_CPU_REF, CORE_PRECISION_FP32);
    CoreConfig fast_cfg = adamw_config("tiny", CORE_BACKEND_CPU, CORE_PRECISION_FP32);
    Trace ref = run_core(&ref_cfg, true, -1), fast = run_core(&fast_cfg, true, -1);
    assert_replays("cpu-ref", &ref_cfg, &ref, UPDATE_TOL);
    assert_replays("cpu", &fast_cfg, &fast, UPDATE_TOL);
    assert_memory_equal(ref.p0, fast.p0, ref.np * sizeof(float));
    double *want = malloc(ref.np * sizeof(double));
    assert_non_null(want);
    for (size_t i = 0; i < ref.np; i++) want[i] = ref.p1[i];
    double e = update_err(&ref, fast.p1, want);
    printf("cpu against cpu-ref, same gradients: update rel err %.2e (tol %.0e)\n", e, FAST_TOL);
    assert_true(e <= FAST_TOL);
    free(want);
    // bench/fused_optimizer's AdamW (its per-tensor and multi-tensor kernels are checked
    // against optim_adamw_span) runs the same per-element arithmetic: bit for bit.
    float *p = malloc(ref.np * sizeof(float)), *m = calloc(ref.np, sizeof(float)),
          *v = calloc(ref.np, sizeof(float));
    assert_true(p && m && v);
    memcpy(p, ref.p0, ref.np * sizeof(float));
    const CoreOptimConfig *o = &ref_cfg.optim;
    for (int s = 0; s < STEPS; s++) {
        OptimHyper h = {.lr = ref.lr[s], .weight_decay = o->weight_decay, .beta1 = o->beta1,
                        .beta2 = o->beta2, .eps = o->eps};
        AdamwStep k = optim_adamw_step_of(&h, s);  // s updates taken before this one
        optim_adamw_span(p, ref.g[s], m, v, 0, ref.np, &k);
    }
    assert_memory_equal(p, ref.p1, ref.np * sizeof(float));
    free(p); free(m); free(v);
    trace_free(&ref);
    trace_free(&fast);
}

// Real gradients: core_step on tiny (BN, convolutions) and mlp, the gradients each step
// used captured by the hook, on both CPU backends.
static void test_adamw_steps_real_gradients(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "mlp"};
    const CoreBackend backends[] = {CORE_BACKEND_CPU_REF, CORE_BACKEND_CPU};
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < 2; b++) {
            CoreConfig cfg = adamw_config(presets[p], backends[b], CORE_PRECISION_FP32);
            Trace t = run_core(&cfg, false, -1);
            char what[64];
            snprintf(what, sizeof what, "%s %s", presets[p], core_backend_name(backends[b]));
            assert_replays(what, &cfg, &t, UPDATE_TOL);
            trace_free(&t);
        }
}

// fp16: the GradScaler skips the step with an inf gradient; the parameters do not move and
// t does not advance (torch: optimizer.step() is not called).
static void test_adamw_skipped_step_keeps_t(void **state)
{
    (void)state;
    const CoreBackend backends[] = {CORE_BACKEND_CPU_REF, CORE_BACKEND_CPU};
    for (int b = 0; b < 2; b++) {
        CoreConfig cfg = adamw_config("tiny", backends[b], CORE_PRECISION_FP16);
        Trace t = run_core(&cfg, true, 1);
        for (int s = 0; s < STEPS; s++) assert_int_equal(t.skipped[s], s == 1);
        char what[64];
        snprintf(what, sizeof what, "%s fp16, step 1 skipped", core_backend_name(backends[b]));
        assert_replays(what, &cfg, &t, UPDATE_TOL);
        trace_free(&t);
    }
}

// core_params_set starts a fresh AdamW: a core that trained, then had its parameters set,
// steps exactly as a new core with those parameters (m, v and t reset).
static void test_adamw_params_set_resets_state(void **state)
{
    (void)state;
    CoreConfig cfg = adamw_config("tiny", CORE_BACKEND_CPU_REF, CORE_PRECISION_FP32);
    cfg.optim.decay = CORE_LR_CONSTANT;  // the LR does not depend on the step index
    cfg.optim.warmup_steps = 0;
    Core *used = test_core_create(&cfg), *fresh = test_core_create(&cfg);
    size_t np = core_param_count(used);
    float *p0 = malloc(np * sizeof(float)), *a = malloc(np * sizeof(float)),
          *b = malloc(np * sizeof(float));
    assert_true(p0 && a && b);
    assert_int_equal(core_params_get(fresh, p0, np), 0);
    TestBatch batch;
    test_batch_open(&batch, &cfg, cfg.batch_size, 0);
    for (int i = 0; i < 3; i++) {
        synth_batch(&batch.task, (uint64_t)i, cfg.batch_size, batch.images, batch.labels);
        assert_int_equal(core_step(used, &batch.b, NULL), 0);
    }
    assert_int_equal(core_params_set(used, p0, np), 0);
    assert_int_equal(core_params_set(fresh, p0, np), 0);
    synth_batch(&batch.task, 7, cfg.batch_size, batch.images, batch.labels);
    assert_int_equal(core_step(used, &batch.b, NULL), 0);
    assert_int_equal(core_step(fresh, &batch.b, NULL), 0);
    assert_int_equal(core_params_get(used, a, np), 0);
    assert_int_equal(core_params_get(fresh, b, np), 0);
    assert_memory_equal(a, b, np * sizeof(float));
    test_batch_close(&batch);
    core_free(used);
    core_free(fresh);
    free(p0); free(a); free(b);
}

// CUDA: the same synthetic gradients against the replay (fp32 and fp16 with a skipped
// step), and against the CPU reference on the same gradients.
static void test_adamw_cuda_matches_cpu_reference(void **state)
{
    (void)state;
    REQUIRE_GPU();
    CoreConfig ref_cfg = adamw_config("tiny", CORE_BACKEND_CPU_REF, CORE_PRECISION_FP32);
    CoreConfig gpu_cfg = adamw_config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP32_STRICT);
    Trace ref = run_core(&ref_cfg, true, -1), gpu = run_core(&gpu_cfg, true, -1);
    assert_replays("cuda", &gpu_cfg, &gpu, CUDA_TOL);
    assert_memory_equal(ref.p0, gpu.p0, ref.np * sizeof(float));
    double *want = malloc(ref.np * sizeof(double));
    assert_non_null(want);
    for (size_t i = 0; i < ref.np; i++) want[i] = ref.p1[i];
    double e = update_err(&ref, gpu.p1, want);
    printf("cuda against cpu-ref, same gradients: update rel err %.2e (tol %.0e)\n", e, CUDA_TOL);
    assert_true(e <= CUDA_TOL);
    free(want);
    trace_free(&ref);
    trace_free(&gpu);
    CoreConfig fp16 = adamw_config("tiny", CORE_BACKEND_CUDA, CORE_PRECISION_FP16);
    Trace t = run_core(&fp16, true, 1);
    for (int s = 0; s < STEPS; s++) assert_int_equal(t.skipped[s], s == 1);
    assert_replays("cuda fp16, step 1 skipped", &fp16, &t, CUDA_TOL);
    trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_config),
        cmocka_unit_test(test_adamw_update_cpu),
        cmocka_unit_test(test_adamw_steps_real_gradients),
        cmocka_unit_test(test_adamw_skipped_step_keeps_t),
        cmocka_unit_test(test_adamw_params_set_resets_state),
        cmocka_unit_test(test_adamw_cuda_matches_cpu_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
