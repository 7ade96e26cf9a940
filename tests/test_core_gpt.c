// test_core_gpt.c: the GPT models of the core on the CPU backends. The whole model's
// gradient (core_loss_grad on the reference) against central differences of its loss along
// directions confined to each kind of parameter (embeddings, LayerNorms, attention's q|k|v
// projection, the MLP, the LM head); the fast backend against the reference and the fused
// attention against the unfused one (loss, gradient, three training steps); the memory plan
// keeps the T x T probabilities only when unfused; gpt-tiny learns the Markov token task
// towards its known floor; the synthetic task; bad input refused with a reason, never a crash.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/model.h"
#include "kernels/rng.h"
#include "kernels/synth.h"
#include "tests/support.h"

#define FD_STEP 1e-2     // central differences of the fp32 loss along a unit direction
#define FD_TOL 2e-2      // relative: |fd - g.d| / |g.d|; a missing or wrong term of one op's
                         // backward (a dropped 1/sqrt(d), a mean instead of a sum) is O(1)
#define FAST_TOL 1e-4    // fast vs reference, relative L2 of the gradient (summation order)
#define FORM_TOL 1e-5    // fused vs unfused attention, relative L2 (another summation order)
#define TRAIN_STEPS 300   // the preset's schedule: the previous-token head forms at ~130 steps
#define TRAIN_GAP 0.3    // after TRAIN_STEPS, loss - floor below this fraction of log(V) - floor

// A GPT small enough for finite differences: 1 block, width 8, 2 heads, 6 tokens, 11 words.
static CoreConfig small_gpt(CoreBackend backend, CoreAttention attention)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "gpt-tiny"), 0);
    cfg.backend = backend;
    cfg.model.num_classes = 11; cfg.model.seq_len = 6; cfg.model.width = 8;
    cfg.model.gpt_layers = 1; cfg.model.gpt_heads = 2; cfg.model.attention = attention;
    cfg.batch_size = 3;
    return cfg;
}

typedef struct Tokens { int32_t *tokens, *labels; CoreBatch batch; double floor; } Tokens;

static void tokens_open(Tokens *t, const CoreConfig *cfg, int n, uint64_t index)
{
    size_t count = (size_t)n * cfg->model.seq_len;
    t->tokens = malloc(count * sizeof(int32_t));
    t->labels = malloc(count * sizeof(int32_t));
    assert_non_null(t->tokens);
    assert_non_null(t->labels);
    SynthTokens task = synth_tokens_task(cfg->model.num_classes, cfg->model.seq_len, 7);
    t->floor = synth_tokens_batch(&task, index, n, t->tokens, t->labels);
    t->batch = (CoreBatch){.labels = t->labels, .tokens = t->tokens, .n = n, .memory = CORE_MEMORY_HOST};
}

static void tokens_close(Tokens *t) { free(t->tokens); free(t->labels); }

// Loss and gradient of a fresh core of cfg on batch b (gradient: param_count floats).
static float loss_grad(const CoreConfig *cfg, const CoreBatch *b, float **grad, size_t *np)
{
    Core *core;
    assert_int_equal(core_create(cfg, &core), 0);
    *np = core_param_count(core);
    *grad = malloc(*np * sizeof(float));
    float loss;
    assert_int_equal(core_loss_grad(core, b, &loss, *grad), 0);
    core_free(core);
    return loss;
}

// The parameter range of every op of one kind (and, for linears, of one width).
static bool in_group(const ModelOp *op, int group, int width)
{
    switch (group) {
    case 0: return op->kind == OP_EMBED;
    case 1: return op->kind == OP_LAYERNORM;
    case 2: return op->kind == OP_LINEAR && op->cout == 3 * width;   // q|k|v projection
    case 3: return op->kind == OP_LINEAR && op->cin == width && op->cout == width; // proj
    case 4: return op->kind == OP_LINEAR && (op->cout == 4 * width || op->cin == 4 * width);
    default: return op->kind == OP_LINEAR && op->cin == width && op->cout != width &&
                    op->cout != 3 * width && op->cout != 4 * width; // LM head
    }
}

static void test_gradient_matches_finite_differences(void **state)
{
    (void)state;
    for (int form = 0; form < 2; form++) {
        CoreConfig cfg = small_gpt(CORE_BACKEND_CPU_REF, form ? CORE_ATTENTION_FUSED : CORE_ATTENTION_UNFUSED);
        Tokens t;
        tokens_open(&t, &cfg, cfg.batch_size, 3);
        Core *core;
        assert_int_equal(core_create(&cfg, &core), 0);
        ModelGraph g;
        assert_int_equal(model_build(&cfg.model, &g), 0);
        size_t np = core_param_count(core);
        float *p0 = malloc(np * sizeof(float)), *p = malloc(np * sizeof(float));
        float *grad = malloc(np * sizeof(float)), *dir = calloc(np, sizeof(float));
        assert_int_equal(core_params_get(core, p0, np), 0);
        // LayerNorm at gamma 1, beta 0 and zero biases hide terms: move every parameter off
        // its initial value first
        Rng r = rng_make(11, 12, 13);
        for (size_t i = 0; i < np; i++) p0[i] += 0.1f * rng_normal_float(&r);
        assert_int_equal(core_params_set(core, p0, np), 0);
        assert_int_equal(core_loss_grad(core, &t.batch, NULL, grad), 0);
        for (int group = 0; group < 6; group++) {
            double norm = 0.0, gd = 0.0;
            memset(dir, 0, np * sizeof(float));
            for (int i = 0; i < g.n_ops; i++) {
                const ModelOp *op = &g.ops[i];
                size_t count = op->kind == OP_EMBED ? ((size_t)op->cin + op->rows) * op->cout
                             : op->kind == OP_LAYERNORM ? 2 * (size_t)op->cin
                             : op->kind == OP_LINEAR ? (size_t)op->cin * op->cout + op->cout : 0;
                if (!in_group(op, group, cfg.model.width)) continue;
                for (size_t j = 0; j < count; j++) {
                    dir[op->w_off + j] = rng_normal_float(&r);
                    norm += (double)dir[op->w_off + j] * dir[op->w_off + j];
                }
            }
            assert_true(norm > 0.0);
            for (size_t i = 0; i < np; i++) {
                dir[i] = (float)(dir[i] / sqrt(norm));
                gd += (double)grad[i] * dir[i];
            }
            float lp, lm;
            for (size_t i = 0; i < np; i++) p[i] = p0[i] + (float)FD_STEP * dir[i];
            assert_int_equal(core_params_set(core, p, np), 0);
            assert_int_equal(core_loss_grad(core, &t.batch, &lp, NULL), 0);
            for (size_t i = 0; i < np; i++) p[i] = p0[i] - (float)FD_STEP * dir[i];
            assert_int_equal(core_params_set(core, p, np), 0);
            assert_int_equal(core_loss_grad(core, &t.batch, &lm, NULL), 0);
            double fd = ((double)lp - lm) / (2.0 * FD_STEP);
            print_message("gpt %s attention, parameter group %d: g.d %.6g finite difference %.6g\n",
                          form ? "fused" : "unfused", group, gd, fd);
            assert_true(fabs(gd) > 1e-4);
            assert_true(fabs(fd - gd) <= FD_TOL * fabs(gd));
        }
        free(p0); free(p); free(grad); free(dir);
        core_free(core);
        tokens_close(&t);
    }
}

static void test_fast_and_fused_agree_with_the_reference(void **state)
{
    (void)state;
    CoreConfig ref = small_gpt(CORE_BACKEND_CPU_REF, CORE_ATTENTION_UNFUSED);
    ref.model.seq_len = 37; ref.model.width = 48; ref.model.gpt_heads = 4; ref.model.gpt_layers = 2;
    Tokens t;
    tokens_open(&t, &ref, 3, 5);
    float *g_ref, *g;
    size_t np, np2;
    float l_ref = loss_grad(&ref, &t.batch, &g_ref, &np);
    const struct { CoreBackend backend; CoreAttention form; double tol; } other[] = {
        {CORE_BACKEND_CPU_REF, CORE_ATTENTION_FUSED, FORM_TOL},
        {CORE_BACKEND_CPU, CORE_ATTENTION_UNFUSED, FAST_TOL},
        {CORE_BACKEND_CPU, CORE_ATTENTION_FUSED, FAST_TOL},
    };
    for (size_t k = 0; k < sizeof other / sizeof other[0]; k++) {
        CoreConfig cfg = ref;
        cfg.backend = other[k].backend;
        cfg.model.attention = other[k].form;
        float l = loss_grad(&cfg, &t.batch, &g, &np2);
        assert_int_equal(np, np2);
        double d = test_rel_l2(g, g_ref, np);
        print_message("%s %s: loss %.7g (reference %.7g), gradient rel. L2 %.2g (limit %.0e)\n",
                      core_backend_name(cfg.backend), other[k].form ? "fused" : "unfused", l, l_ref,
                      d, other[k].tol);
        assert_true(fabsf(l - l_ref) <= 1e-5f * l_ref);
        assert_true(d <= other[k].tol);
        free(g);
    }
    free(g_ref);
    tokens_close(&t);
}

// Three training steps (SGD, LR warm-up, clipping) on each backend and form: the same update.
static void test_training_steps_agree(void **state)
{
    (void)state;
    CoreConfig ref = small_gpt(CORE_BACKEND_CPU_REF, CORE_ATTENTION_UNFUSED);
    ref.model.seq_len = 16; ref.model.width = 32;
    Tokens t;
    tokens_open(&t, &ref, 4, 9);
    float *after[4];
    size_t np = 0;
    for (int k = 0; k < 4; k++) {
        CoreConfig cfg = ref;
        cfg.backend = k < 2 ? CORE_BACKEND_CPU_REF : CORE_BACKEND_CPU;
        cfg.model.attention = k % 2 ? CORE_ATTENTION_FUSED : CORE_ATTENTION_UNFUSED;
        Core *core;
        assert_int_equal(core_create(&cfg, &core), 0);
        np = core_param_count(core);
        float *p0 = malloc(np * sizeof(float));
        assert_int_equal(core_params_get(core, p0, np), 0);
        for (int s = 0; s < 3; s++) assert_int_equal(core_step(core, &t.batch, NULL), 0);
        after[k] = malloc(np * sizeof(float));
        assert_int_equal(core_params_get(core, after[k], np), 0);
        for (size_t i = 0; i < np; i++) after[k][i] -= p0[i];  // the update
        free(p0);
        core_free(core);
    }
    for (int k = 1; k < 4; k++) {
        double d = test_rel_l2(after[k], after[0], np);
        print_message("update after 3 steps, %s %s vs reference: rel. L2 %.2g\n",
                      k < 2 ? "cpu-ref" : "cpu", k % 2 ? "fused" : "unfused", d);
        assert_true(d <= 1e-3);
    }
    for (int k = 0; k < 4; k++) free(after[k]);
    tokens_close(&t);
}

// The unfused plan holds every layer's n x heads x T x T probabilities from forward to
// backward; the fused one only n x heads x T log-sum-exps.
static void test_fused_attention_needs_less_memory(void **state)
{
    (void)state;
    size_t arena[2];
    CoreConfig cfg;
    for (int form = 0; form < 2; form++) {
        assert_int_equal(core_config_preset(&cfg, "gpt-tiny"), 0);
        cfg.backend = CORE_BACKEND_CPU;
        cfg.model.attention = form ? CORE_ATTENTION_FUSED : CORE_ATTENTION_UNFUSED;
        Tokens t;
        tokens_open(&t, &cfg, 4, 1);
        Core *core;
        assert_int_equal(core_create(&cfg, &core), 0);
        assert_int_equal(core_step(core, &t.batch, NULL), 0);
        CoreStats st;
        assert_int_equal(core_stats(core, &st), 0);
        arena[form] = st.activation_bytes;
        core_free(core);
        tokens_close(&t);
    }
    const CoreModelConfig *m = &cfg.model;
    size_t probs = (size_t)4 * m->gpt_heads * m->seq_len * m->seq_len * sizeof(float);
    print_message("gpt-tiny batch 4: arena unfused %zu bytes, fused %zu (probabilities %zu per layer)\n",
                  arena[0], arena[1], probs);
    assert_true(arena[0] >= arena[1] + (size_t)m->gpt_layers * probs - probs / 8);
}

static void test_gpt_tiny_learns_the_markov_task(void **state)
{
    (void)state;
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "gpt-tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.optim.total_steps = TRAIN_STEPS;
    Core *core;
    assert_int_equal(core_create(&cfg, &core), 0);
    SynthTokens task = synth_tokens_task(cfg.model.num_classes, cfg.model.seq_len, 7);
    double floor = synth_tokens_floor(&task), uniform = log((double)cfg.model.num_classes);
    Tokens t;
    tokens_open(&t, &cfg, cfg.batch_size, 0);
    double t0 = test_now_s();
    for (int s = 0; s < TRAIN_STEPS; s++) {
        synth_tokens_batch(&task, (uint64_t)s, cfg.batch_size, t.tokens, t.labels);
        assert_int_equal(core_step(core, &t.batch, NULL), 0);
    }
    double secs = test_now_s() - t0;
    Tokens held;
    tokens_open(&held, &cfg, 64, 0);
    synth_tokens_batch(&task, 1u << 30, 64, held.tokens, held.labels);
    CoreEvalResult ev;
    assert_int_equal(core_eval(core, &held.batch, &ev), 0);
    print_message("gpt-tiny after %d steps (%.1f s): held-out loss %.3f, floor %.3f, uniform %.3f, "
                  "next-token accuracy %.3f\n", TRAIN_STEPS, secs, ev.loss, floor, uniform, ev.accuracy);
    assert_true(floor > 0.5 && floor < uniform - 1.0);
    assert_true(ev.loss - floor < TRAIN_GAP * (uniform - floor));
    assert_true(ev.loss > floor - 0.05);  // nothing beats the source's own entropy
    core_free(core);
    tokens_close(&t);
    tokens_close(&held);
}

static void test_synthetic_tokens(void **state)
{
    (void)state;
    SynthTokens task = synth_tokens_task(64, 32, 5);
    int32_t a[4 * 32], al[4 * 32], b[4 * 32], bl[4 * 32];
    double ha = synth_tokens_batch(&task, 3, 4, a, al), hb = synth_tokens_batch(&task, 3, 4, b, bl);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(al, bl, sizeof al);
    assert_true(ha == hb);
    for (int s = 0; s < 4; s++)
        for (int i = 0; i + 1 < 32; i++) assert_int_equal(al[s * 32 + i], a[s * 32 + i + 1]);
    synth_tokens_batch(&task, 4, 4, b, bl);
    assert_memory_not_equal(a, b, sizeof a);
    // the label is drawn from the candidates of the token before the current one: at most
    // `branch` distinct labels follow one such token over many sequences, while the current
    // token alone is followed by many
    enum { N = 256, T = 32 };
    int32_t *tok = malloc(N * T * sizeof(int32_t)), *lab = malloc(N * T * sizeof(int32_t));
    synth_tokens_batch(&task, 9, N, tok, lab);
    int32_t c0 = tok[1], seen[64] = {0}, seen_now[64] = {0}, distinct = 0, distinct_now = 0;
    for (int s = 0; s < N; s++)
        for (int i = 1; i < T; i++) {
            if (tok[s * T + i - 1] == c0 && !seen[lab[s * T + i]]++) distinct++;
            if (tok[s * T + i] == c0 && !seen_now[lab[s * T + i]]++) distinct_now++;
        }
    print_message("labels after token %d one back: %d distinct; right after it: %d\n", c0, distinct,
                  distinct_now);
    assert_true(distinct >= 1 && distinct <= task.branch);
    assert_true(distinct_now > 2 * task.branch);
    free(tok); free(lab);
}

static void expect_refused(const CoreConfig *cfg, const char *what)
{
    Core *core = NULL;
    assert_int_equal(core_create(cfg, &core), -1);
    assert_null(core);
    print_message("refused (%s): %s\n", what, error_message());
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
}

static void test_bad_input_is_refused(void **state)
{
    (void)state;
    CoreConfig cfg = small_gpt(CORE_BACKEND_CPU, CORE_ATTENTION_UNFUSED);
    CoreConfig bad = cfg;
    bad.model.gpt_heads = 3;  // 8 % 3 != 0
    expect_refused(&bad, "heads");
    bad = cfg; bad.model.seq_len = 0;
    expect_refused(&bad, "seq_len");
    bad = cfg; bad.model.seq_len = 5000;
    expect_refused(&bad, "seq_len too long");
    bad = cfg; bad.backend = CORE_BACKEND_CUDA;
    expect_refused(&bad, "cuda");
    Core *core;
    assert_int_equal(core_create(&cfg, &core), 0);
    Tokens t;
    tokens_open(&t, &cfg, 2, 1);
    t.tokens[3] = cfg.model.num_classes;  // outside the vocabulary
    assert_int_equal(core_step(core, &t.batch, NULL), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    t.tokens[3] = 0;
    t.labels[5] = -1;
    assert_int_equal(core_step(core, &t.batch, NULL), -1);
    t.labels[5] = 0;
    CoreBatch images = {.images = (const float *)t.tokens, .labels = t.labels, .n = 2};
    assert_int_equal(core_step(core, &images, NULL), -1);  // no tokens
    assert_int_equal(core_set_image_size(core, 32), -1);
    assert_int_equal(core_step(core, &t.batch, NULL), 0);   // and it still works
    core_free(core);
    tokens_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_tokens),
        cmocka_unit_test(test_gradient_matches_finite_differences),
        cmocka_unit_test(test_fast_and_fused_agree_with_the_reference),
        cmocka_unit_test(test_training_steps_agree),
        cmocka_unit_test(test_fused_attention_needs_less_memory),
        cmocka_unit_test(test_gpt_tiny_learns_the_markov_task),
        cmocka_unit_test(test_bad_input_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
