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

#ifdef __cplusplus
}
#endif
#endif
