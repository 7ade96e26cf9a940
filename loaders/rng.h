// rng.h: small deterministic random numbers for shuffling, augmentation and the
// dataset generator. splitmix64 seeds and steps; every stream is derived from
// (seed, purpose, index...) by hashing, so results never depend on who draws them.
#ifndef LOADERS_RNG_H
#define LOADERS_RNG_H

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

#endif
