// synth.h: a learnable synthetic image-classification task, generated on the fly.
// Class c is a plane wave with its own spatial frequency/orientation and per-channel
// amplitudes; each sample has a random phase (so position does not give it away),
// a random contrast and Gaussian noise. Batches are deterministic in (seed, index).
#ifndef SYNTH_H
#define SYNTH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct SynthTask {
    int channels, image_size, num_classes;
    float noise;    // std of the additive Gaussian noise (signal amplitude is ~1)
    uint64_t seed;
} SynthTask;

// Writes batch number `index` of n samples: images (n, C, S, S) NCHW, labels (n).
void synth_batch(const SynthTask *task, uint64_t index, int n, float *images, int32_t *labels);

// A learnable token task for the GPT models, with a known loss floor: sequences from a random
// source over `vocab` tokens. The first `order` tokens of a sequence are uniform; after them
// each token is drawn among `branch` candidates (weights 1 + 4u, u uniform; a candidate drawn
// twice counts twice) fixed by the seed and the context: the `context` tokens starting
// `order` places back. The task's default (order 2, context 1: a skip-bigram) makes the next
// token depend on the token before the current one alone, so a model learns it only once an
// attention head looks one position back (the current token tells nothing); a plain Markov
// chain of order k is order = context = k. Deterministic in (seed, index).
typedef struct SynthTokens {
    int vocab, seq_len;
    int order;   // the context starts `order` tokens back...
    int context; // ...and spans this many tokens (1..order; order: a plain Markov chain)
    int branch;  // candidates per context
    uint64_t seed;
} SynthTokens;

// The task for a GPT model config's vocabulary and length: order 2, context 1, 4 candidates.
SynthTokens synth_tokens_task(int vocab, int seq_len, uint64_t seed);
// Writes batch `index` of n sequences: tokens (n, seq_len) and labels (n, seq_len), the
// next token of each position. Returns the mean entropy in nats of the distributions the
// labels were drawn from: the expected cross-entropy of the ideal predictor on this batch.
double synth_tokens_batch(const SynthTokens *task, uint64_t index, int n, int32_t *tokens,
                          int32_t *labels);
// The task's loss floor in nats: the mean of synth_tokens_batch's entropies over 64
// sequences drawn apart from the training batches (nothing written).
double synth_tokens_floor(const SynthTokens *task);

#ifdef __cplusplus
}
#endif
#endif
