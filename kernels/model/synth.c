// synth.c: the synthetic plane-wave classification task (see synth.h).
#include "kernels/synth.h"

#include <math.h>

#include "kernels/model.h"
#include "kernels/rng.h"

// The frequency pair of class c: distinct (fx, fy) with |f| <= 3, then repeats
// (later repeats differ only in their per-channel amplitudes).
static void class_freq(int c, int *fx, int *fy)
{
    static const int pairs[][2] = {{1, 0}, {0, 1}, {1, 1}, {1, -1}, {2, 0}, {0, 2}, {2, 1},
                                   {1, 2}, {2, -1}, {1, -2}, {2, 2}, {2, -2}, {3, 0}, {0, 3},
                                   {3, 1}, {1, 3}, {3, -1}, {1, -3}, {3, 2}, {2, 3}};
    int n = (int)(sizeof pairs / sizeof pairs[0]);
    *fx = pairs[c % n][0];
    *fy = pairs[c % n][1];
}

static float class_amp(const SynthTask *t, int c, int ch)
{
    Rng r = {t->seed * 7919u + (uint64_t)c * 131u + (uint64_t)ch};
    float a = 0.5f + 0.5f * rng_uniform_float(&r);
    return (rng_next(&r) & 1) ? a : -a;
}

void synth_batch(const SynthTask *t, uint64_t index, int n, float *images, int32_t *labels)
{
    Rng r = {(t->seed + 1) * 0x9E3779B97F4A7C15ull ^ (index * 0xD1B54A32D192ED03ull)};
    int s = t->image_size;
    float two_pi = 6.28318530718f;
    for (int i = 0; i < n; i++) {
        int c = (int)(rng_next(&r) % (uint64_t)t->num_classes);
        labels[i] = c;
        int fx, fy;
        class_freq(c, &fx, &fy);
        float phase = two_pi * rng_uniform_float(&r);
        float contrast = 0.7f + 0.6f * rng_uniform_float(&r);
        for (int ch = 0; ch < t->channels; ch++) {
            float amp = contrast * class_amp(t, c, ch);
            float *img = images + ((size_t)i * t->channels + ch) * s * s;
            for (int y = 0; y < s; y++)
                for (int x = 0; x < s; x++)
                    img[y * s + x] = amp * sinf(two_pi * (float)(fx * x + fy * y) / (float)s + phase) +
                                     t->noise * rng_normal_float(&r);
        }
    }
}
