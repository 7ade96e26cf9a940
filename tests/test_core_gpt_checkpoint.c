// test_core_gpt_checkpoint.c: activation checkpointing on the GPT models
// (CoreConfig.checkpoint_segments). The units are the embedding, each transformer block
// (ln_1 .. second residual add) and the head (final LayerNorm and LM head); on both CPU
// backends and both attention forms, training with 2 segments and with every unit
// checkpointed is bit for bit training without (3 AdamW steps, parameters compared with
// memcmp); CoreStats.checkpointed_segments is 1 and units - 1; the fast backend's arena
// (CoreStats.activation_bytes) shrinks, by the amounts printed.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/model.h"
#include "kernels/model_plan.h"
#include "kernels/synth.h"

#define BATCH 8
#define STEPS 3

// gpt-tiny (2 layers, width 64, 4 heads, 64 tokens, vocabulary 64) at batch BATCH.
static CoreConfig tiny(CoreBackend backend, CoreAttention attention, int segments)
{
    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "gpt-tiny"), 0);
    cfg.backend = backend;
    cfg.model.attention = attention;
    cfg.batch_size = BATCH;
    cfg.checkpoint_segments = segments;
    return cfg;
}

// The units of a GPT: the embedding (op 0), each block of 10 ops (ln_1, q|k|v, attention,
// proj, add, ln_2, fc, GELU, fc2, add), then the head (ln_f, LM head).
static void test_units_are_the_blocks(void **state)
{
    (void)state;
    ModelGraph *g = malloc(sizeof *g);
    assert_non_null(g);
    for (int layers = 1; layers <= 4; layers++)
        for (int form = 0; form < 2; form++) {
            CoreConfig cfg = tiny(CORE_BACKEND_CPU, form ? CORE_ATTENTION_FUSED : CORE_ATTENTION_UNFUSED, 0);
            cfg.model.gpt_layers = layers;
            assert_int_equal(model_build(&cfg.model, g), 0);
            int first[MODEL_MAX_OPS];
            int units = model_plan_units(g, first, MODEL_MAX_OPS);
            assert_int_equal(units, layers + 2);
            assert_int_equal(first[0], 0);
            assert_int_equal(g->ops[0].kind, OP_EMBED);
            for (int u = 1; u <= layers; u++) {
                assert_int_equal(first[u], 1 + 10 * (u - 1));
                assert_int_equal(g->ops[first[u]].kind, OP_LAYERNORM);
                assert_int_equal(g->ops[first[u] + 9].kind, OP_ADD);  // the block's second add
            }
            assert_int_equal(first[layers + 1], g->n_ops - 2);  // ln_f, LM head
            assert_int_equal(g->ops[g->n_ops - 2].kind, OP_LAYERNORM);
        }
    free(g);
}

typedef struct Run {
    float *params;
    size_t np;
    CoreStats stats;
} Run;

// STEPS training steps of cfg from its seed's start, a new batch each step.
static Run train(const CoreConfig *cfg)
{
    Core *core;
    if (core_create(cfg, &core) != 0) fail_msg("core_create: %s", error_message());
    size_t count = (size_t)BATCH * cfg->model.seq_len;
    int32_t *tokens = malloc(count * sizeof(int32_t)), *labels = malloc(count * sizeof(int32_t));
    assert_non_null(tokens);
    assert_non_null(labels);
    SynthTokens task = synth_tokens_task(cfg->model.num_classes, cfg->model.seq_len, 7);
    CoreBatch b = {.labels = labels, .tokens = tokens, .n = BATCH, .memory = CORE_MEMORY_HOST};
    for (int s = 0; s < STEPS; s++) {
        synth_tokens_batch(&task, (uint64_t)s, BATCH, tokens, labels);
        if (core_step(core, &b, NULL) != 0) fail_msg("core_step: %s", error_message());
    }
    Run r = {.np = core_param_count(core)};
    r.params = malloc(r.np * sizeof(float));
    assert_non_null(r.params);
    assert_int_equal(core_params_get(core, r.params, r.np), 0);
    assert_int_equal(core_stats(core, &r.stats), 0);
    core_free(core);
    free(tokens);
    free(labels);
    return r;
}

static const char *backend_name(CoreBackend b) { return b == CORE_BACKEND_CPU ? "cpu" : "cpu-ref"; }

// gpt-tiny (2 blocks) and gpt-tiny with 4 blocks: with 2 segments the first half of the
// units is checkpointed and the second half's activations kept; every unit checkpointed
// keeps about one block's at a time (with 2 blocks both keep about one block's: their arenas
// differ by a few percent, either way).
static void test_checkpointed_training_is_bit_identical(void **state)
{
    (void)state;
    static const int segments[3] = {0, 2, CORE_CHECKPOINT_EACH_UNIT};
    static const CoreBackend backends[2] = {CORE_BACKEND_CPU_REF, CORE_BACKEND_CPU};
    for (int layers = 2; layers <= 4; layers += 2)
        for (int k = 0; k < 2; k++)
            for (int form = 0; form < 2; form++) {
                CoreAttention attention = form ? CORE_ATTENTION_FUSED : CORE_ATTENTION_UNFUSED;
                const char *fname = form ? "fused" : "unfused";
                Run run[3];
                for (int m = 0; m < 3; m++) {
                    CoreConfig cfg = tiny(backends[k], attention, segments[m]);
                    cfg.model.gpt_layers = layers;
                    run[m] = train(&cfg);
                }
                int units = layers + 2;  // the embedding, the blocks, the head
                assert_int_equal(run[0].stats.checkpointed_segments, 0);
                assert_int_equal(run[1].stats.checkpointed_segments, 1);
                assert_int_equal(run[2].stats.checkpointed_segments, units - 1);
                for (int m = 1; m < 3; m++) {
                    assert_int_equal(run[m].np, run[0].np);
                    if (memcmp(run[m].params, run[0].params, run[0].np * sizeof(float)) != 0)
                        fail_msg("%d layers, %s %s, checkpoint_segments %d: parameters after %d "
                                 "steps differ from training without checkpointing", layers,
                                 backend_name(backends[k]), fname, segments[m], STEPS);
                }
                size_t a0 = run[0].stats.activation_bytes, a1 = run[1].stats.activation_bytes,
                       a2 = run[2].stats.activation_bytes;
                print_message("gpt-tiny %d layers batch %d, %s, %s attention: activation_bytes %zu "
                              "plain, %zu with 2 segments (%.2fx), %zu every unit (%.2fx); "
                              "parameters after %d AdamW steps identical\n", layers, BATCH,
                              backend_name(backends[k]), fname, a0, a1, (double)a1 / (double)a0, a2,
                              (double)a2 / (double)a0, STEPS);
                // The fast backend reuses buffers by liveness: checkpointing shrinks its
                // arena. The reference keeps every value in its own buffer, the recomputed
                // ones too: its arena grows.
                if (backends[k] == CORE_BACKEND_CPU) {
                    assert_true(a1 < a0 && a2 < a0);
                    if (layers == 4) assert_true(a2 < a1);
                } else {
                    assert_true(a1 > a0 && a2 > a1);
                }
                for (int m = 0; m < 3; m++) free(run[m].params);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_are_the_blocks),
        cmocka_unit_test(test_checkpointed_training_is_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
