// synth_tokens.c: the Markov token task of synth.h (the GPT models' generated data).
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "kernels/rng.h"
#include "kernels/synth.h"

#define SYNTH_MAX_BRANCH 16
#define GOLDEN 0x9E3779B97F4A7C15ull

// (synth.h says what order and context mean.)
SynthTokens synth_tokens_task(int vocab, int seq_len, uint64_t seed)
{
    return (SynthTokens){.vocab = vocab, .seq_len = seq_len, .order = 2, .context = 1, .branch = 4,
                         .seed = seed};
}

// The distribution of s[i] given its context (s[i - order] .. s[i - order + context - 1]):
// candidates and their probabilities; returns the candidates' count.
static int context_distribution(const SynthTokens *task, const int32_t *s, int i, int32_t *cand,
                                double *prob)
{
    uint64_t h = rng_mix(task->seed ^ 0xC0FFEEull);
    for (int k = i - task->order; k < i - task->order + task->context; k++)
        h = rng_mix(h ^ ((uint64_t)s[k] + 1) * GOLDEN);
    int b = task->branch < SYNTH_MAX_BRANCH ? task->branch : SYNTH_MAX_BRANCH;
    double sum = 0.0;
    for (int j = 0; j < b; j++) {
        uint64_t u = rng_mix(h + (uint64_t)(2 * j + 1) * GOLDEN);
        cand[j] = (int32_t)(u % (uint64_t)task->vocab);
        prob[j] = 1.0 + 4.0 * (double)(rng_mix(u) >> 11) * 0x1.0p-53;
        sum += prob[j];
    }
    for (int j = 0; j < b; j++) prob[j] /= sum;
    return b;
}

// Entropy of a candidate list whose tokens may repeat (repeats pool their probability).
static double entropy(const int32_t *cand, const double *prob, int b)
{
    double h = 0.0;
    for (int j = 0; j < b; j++) {
        bool first = true;
        double p = 0.0;
        for (int k = 0; k < b; k++) {
            if (cand[k] != cand[j]) continue;
            if (k < j) first = false;
            p += prob[k];
        }
        if (first) h -= p * log(p);
    }
    return h;
}

// One sequence of seq_len + 1 tokens into s; returns the summed entropy of s[1..seq_len].
static double sequence(const SynthTokens *task, Rng *r, int32_t *s)
{
    int32_t cand[SYNTH_MAX_BRANCH];
    double prob[SYNTH_MAX_BRANCH], h = 0.0;
    for (int i = 0; i <= task->seq_len; i++) {
        if (i < task->order) {
            s[i] = (int32_t)rng_below(r, task->vocab);
            if (i > 0) h += log((double)task->vocab);
            continue;
        }
        int b = context_distribution(task, s, i, cand, prob);
        double u = rng_uniform(r), acc = 0.0;
        int pick = b - 1;
        for (int j = 0; j < b; j++) {
            acc += prob[j];
            if (u < acc) { pick = j; break; }
        }
        s[i] = cand[pick];
        h += entropy(cand, prob, b);
    }
    return h;
}

double synth_tokens_batch(const SynthTokens *task, uint64_t index, int n, int32_t *tokens,
                          int32_t *labels)
{
    int t = task->seq_len;
    int32_t *s = malloc(((size_t)t + 1) * sizeof *s);
    if (!s) return NAN;
    double h = 0.0;
    for (int b = 0; b < n; b++) {
        Rng r = rng_make(task->seed, index, (uint64_t)b);
        h += sequence(task, &r, s);
        for (int i = 0; i < t; i++) {
            if (tokens) tokens[(size_t)b * t + i] = s[i];
            if (labels) labels[(size_t)b * t + i] = s[i + 1];
        }
    }
    free(s);
    return h / ((double)n * t);
}

double synth_tokens_floor(const SynthTokens *task)
{
    return synth_tokens_batch(task, UINT64_MAX, 64, NULL, NULL);
}
