// rng.h: the project's one small deterministic random-number generator (splitmix64),
// for weight initialisation, synthetic data, shuffling, augmentation and the dataset
// generator. Every stream is derived from (seed, purpose, index...) by hashing, so
// results never depend on who draws them or in which order.
#ifndef RNG_H
#define RNG_H

#include <math.h>
#include <stdint.h>

typedef struct {
    uint64_t state;
} Rng;

// One splitmix64 step: a well-mixed 64-bit hash of x.
static inline uint64_t rng_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A stream seeded from up to three values (e.g. seed, epoch, sample index).
static inline Rng rng_make(uint64_t a, uint64_t b, uint64_t c)
{
    Rng r = {rng_mix(rng_mix(rng_mix(a) ^ b) ^ c)};
    return r;
}

// Next 64 random bits.
static inline uint64_t rng_next(Rng *r)
{
    r->state += 0x9E3779B97F4A7C15ull;
    uint64_t x = r->state;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Uniform double in [0, 1).
static inline double rng_uniform(Rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

// Uniform integer in [0, n) for n > 0 (bias below 2^-32 for the sizes used here).
static inline int64_t rng_below(Rng *r, int64_t n)
{
    return (int64_t)(((unsigned __int128)rng_next(r) * (uint64_t)n) >> 64);
}

// Uniform float in [0, 1) with 24 random bits.
static inline float rng_uniform_float(Rng *r) { return (float)(rng_next(r) >> 40) / 16777216.0f; }

// Standard normal float (Box-Muller; u1 floored at 1e-7).
static inline float rng_normal_float(Rng *r)
{
    float u1 = rng_uniform_float(r), u2 = rng_uniform_float(r);
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

#endif
