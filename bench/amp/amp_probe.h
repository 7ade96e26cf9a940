// amp_probe.h: operands that TF32 cannot represent, to prove that a "strict fp32" GEMM or
// convolution really computed in fp32. amp_fill.cuh's operands are exact in every type, so
// they catch a wrong result but not TF32 rounding; these catch TF32 rounding. Every probe
// value is 1 + m 2^-12 with m = 4j + 1, j in [0, 63]: exact in fp32 (13 significant bits),
// but TF32 (and fp16) keep 10 fraction bits, a grid of 2^-10 on [1, 2), so rounding to
// TF32, to nearest or toward zero, always moves a value down by exactly 2^-12 (about 2e-4
// of it). All values are positive, so the errors of a dot product add up instead of
// cancelling: with TF32 inputs every product is ~4e-4 low, a sum of them too.
#ifndef AMP_PROBE_H
#define AMP_PROBE_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define AMP_PROBE_HD __host__ __device__
#else
#define AMP_PROBE_HD
#endif

// The largest error, relative to sum |a b|, that a strict fp32 result of probe operands may
// have: fp32 accumulation over k terms is within k 2^-24 (1.5e-5 at k = 256, 6x below),
// while TF32's input rounding makes every product 2 x 2^-12 / 1.25 = 3.9e-4 low or more
// (4x above). A "strict" result above it was computed from TF32-rounded inputs.
#define AMP_PROBE_STRICT_LIMIT 1e-4

// Entry `index` of probe operand `which`: 1 + (4j + 1) 2^-12, j from a hash of both.
static inline AMP_PROBE_HD float amp_probe_value(uint64_t which, uint64_t index)
{
    uint64_t x = (which + 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull + index;  // splitmix64
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    int j = (int)(x % 64u);
    return 1.0f + (float)(4 * j + 1) / 4096.0f;
}

// v rounded to TF32 (10 fraction bits, to nearest, ties to even): what tensor cores read
// of an fp32 input; for host emulation of TF32 in the tests.
static inline double amp_tf32_round(float v)
{
    if (!isfinite(v) || v == 0.0f) return v;
    int e = 0;
    double m = frexp((double)v, &e);          // v = m 2^e, 0.5 <= |m| < 1: 11 significant bits
    double scaled = ldexp(m, 11);             // the kept bits as an integer part
    double kept = nearbyint(scaled);          // the default rounding mode: to nearest even
    return ldexp(kept, e - 11);
}

#endif
