// train_gpt.c: the training run of `train --preset gpt-*`: batches of the generated token
// task (kernels/synth.h, seeded by --seed) or of the user's token file (--tokens,
// token_file.h), a log line every --log-every steps (loss, next-token accuracy, LR,
// tokens/s), then the held-out loss beside the task's floor (the source's own entropy: no
// model can go below it; unknown for a file) and the uniform guess's log(vocabulary).
#include "bench/tools/train_gpt.h"
#include "bench/tools/token_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/synth.h"

#define HELD_OUT_INDEX 1000000000ull  // batch indices no training step reaches

typedef struct TokenBatch { int32_t *tokens, *labels; CoreBatch batch; } TokenBatch;

static int batch_open(TokenBatch *b, int n, int seq_len)
{
    size_t count = (size_t)n * seq_len;
    b->tokens = malloc(count * sizeof(int32_t));
    b->labels = malloc(count * sizeof(int32_t));
    if (!b->tokens || !b->labels) {
        fprintf(stderr, "train: out of memory (host): a batch of %d sequences of %d tokens\n", n, seq_len);
        return -1;
    }
    b->batch = (CoreBatch){.labels = b->labels, .tokens = b->tokens, .n = n, .memory = CORE_MEMORY_HOST};
    return 0;
}

static void batch_close(TokenBatch *b) { free(b->tokens); free(b->labels); }

// Where batches come from: the generated task, or the user's token file.
typedef struct TokenSource {
    SynthTokens task;
    TokenFile file;
    bool from_file;
    uint64_t seed;
} TokenSource;

static void source_batch(const TokenSource *s, uint64_t index, bool held_out, TokenBatch *b, int seq_len)
{
    if (s->from_file)
        token_file_batch(&s->file, s->seed, index, b->batch.n, seq_len, held_out, b->tokens, b->labels);
    else
        synth_tokens_batch(&s->task, held_out ? HELD_OUT_INDEX + index : index, b->batch.n, b->tokens,
                           b->labels);
}

static void print_header(Core *core, const CoreConfig *cfg, const TrainArgs *a)
{
    CoreStats st;
    core_stats(core, &st);
    const CoreModelConfig *m = &cfg->model;
    printf("train: preset %s data %s backend %s precision %s zero_grad %s readback %s "
           "batch %d sequences x %d tokens, vocabulary %d, %d layers, width %d, %d heads, "
           "attention %s, params %zu\n", a->preset, a->tokens_file ? "token-file" : "markov-tokens",
           core_backend_name(st.backend),
           core_precision_name(cfg->precision), core_zero_grad_name(cfg->zero_grad),
           core_readback_name(cfg->readback), cfg->batch_size, m->seq_len, m->num_classes,
           m->gpt_layers, m->width, m->gpt_heads, core_attention_name(m->attention), st.param_count);
    if (st.backend == CORE_BACKEND_CPU)
        printf("train: cpu threads %d (%s)\n", core_cpu_threads(), core_cpu_kernels());
    else if (st.backend == CORE_BACKEND_CPU_REF)
        printf("train: cpu-ref threads 1 (plain C reference)\n");
}

static void print_plan(Core *core)
{
    CoreStats st;
    if (core_stats(core, &st) == 0)
        printf("train: activations and their gradients %.1f MiB (memory plan)\n",
               st.activation_bytes / 1048576.0);
    printf("%8s %10s %9s %10s %12s %12s\n", "step", "loss", "accuracy", "lr", "loss_scale",
           "tokens/s");
}

int train_gpt(const CoreConfig *cfg, const TrainArgs *a)
{
    const CoreModelConfig *m = &cfg->model;
    if (a->ddp) {
        fprintf(stderr, "train: --ddp with a gpt preset: not yet (the CNN presets take it)\n");
        return 1;
    }
    Core *core = NULL;
    TokenBatch b = {0};
    int status = 1;
    if (core_create(cfg, &core) != 0) {
        fprintf(stderr, "train: cannot create the core: %s\n", error_message());
        return 1;
    }
    print_header(core, cfg, a);
    if (batch_open(&b, cfg->batch_size, m->seq_len) != 0) goto out;
    TokenSource src = {.task = synth_tokens_task(m->num_classes, m->seq_len, cfg->seed),
                       .from_file = a->tokens_file != NULL, .seed = cfg->seed};
    double floor = NAN, uniform = log((double)m->num_classes);
    if (src.from_file) {
        if (token_file_open(&src.file, a->tokens_file, m->num_classes, m->seq_len) != 0) {
            fprintf(stderr, "train: %s\n", error_message());
            goto out;
        }
        printf("train: token file %s (%s): %zu tokens, the largest %d; %zu for training, %zu held "
               "out (uniform guess %.4f)\n", a->tokens_file, src.file.format, src.file.count,
               src.file.max_token, src.file.train_end, src.file.count - src.file.train_end, uniform);
    } else {
        floor = synth_tokens_floor(&src.task);
        printf("train: task floor %.4f nats per token (uniform guess %.4f)\n", floor, uniform);
    }

    double t0 = clock_seconds(), t_log = t0;
    int64_t since_log = 0, tokens_seen = 0;
    CoreStepResult r = {0};
    for (int s = 0; s < a->steps; s++) {
        source_batch(&src, (uint64_t)s, false, &b, m->seq_len);
        if (core_step(core, &b.batch, &r) != 0) {
            fprintf(stderr, "train: step %d failed%s: %s\n", s,
                    error_kind() == ERROR_OUT_OF_MEMORY ? " (out of memory)" : "", error_message());
            goto out;
        }
        if (s == 0) print_plan(core);
        since_log += (int64_t)b.batch.n * m->seq_len;
        tokens_seen += (int64_t)b.batch.n * m->seq_len;
        if ((s + 1) % a->log_every == 0 || s + 1 == a->steps) {
            core_sync(core);
            double t = clock_seconds();
            CoreStats st;
            core_stats(core, &st);
            char loss[32] = "-", acc[32] = "-";
            if (r.loss_ready) {
                snprintf(loss, sizeof loss, "%.4f", r.loss);
                snprintf(acc, sizeof acc, "%.3f", r.accuracy);
            }
            printf("%8d %10s %9s %10.5f %12g %12.1f\n", s + 1, loss, acc, r.lr, st.loss_scale,
                   since_log / (t - t_log));
            fflush(stdout);
            t_log = t;
            since_log = 0;
        }
    }
    double train_s = clock_seconds() - t0;

    int eval_batches = a->eval_batches < 0 ? 4 : a->eval_batches;
    double loss_sum = 0.0, correct = 0.0;
    int64_t seen = 0;
    for (int e = 0; e < eval_batches; e++) {
        source_batch(&src, (uint64_t)e, true, &b, m->seq_len);
        CoreEvalResult er;
        if (core_eval(core, &b.batch, &er) != 0) {
            fprintf(stderr, "train: eval failed: %s\n", error_message());
            goto out;
        }
        int64_t count = (int64_t)b.batch.n * m->seq_len;
        loss_sum += (double)er.loss * count;
        correct += (double)er.accuracy * count;
        seen += count;
    }
    CoreStats st;
    core_stats(core, &st);
    printf("train: %d steps in %.2f s (%.1f tokens/s), skipped %d, loss scale %g, peak %.1f MiB\n",
           a->steps, train_s, tokens_seen / train_s, st.skipped_steps, st.loss_scale,
           st.peak_bytes / 1048576.0);
    float acc = seen ? (float)(correct / seen) : 0.0f;
    if (seen && src.from_file)
        printf("eval: loss %.4f (floor unknown: your data; uniform %.4f) next-token accuracy %.4f on "
               "%lld held-out tokens\n", loss_sum / seen, uniform, acc, (long long)seen);
    else if (seen)
        printf("eval: loss %.4f (floor %.4f, uniform %.4f) next-token accuracy %.4f on %lld "
               "held-out tokens\n", loss_sum / seen, floor, uniform, acc, (long long)seen);
    status = 0;
    if (a->target_accuracy >= 0.0f && acc < a->target_accuracy) {
        fprintf(stderr, "train: accuracy %.4f below target %.4f\n", acc, a->target_accuracy);
        status = 2;
    }
out:
    token_file_close(&src.file);
    batch_close(&b);
    core_free(core);
    return status;
}
