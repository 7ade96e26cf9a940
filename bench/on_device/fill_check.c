// fill_check.c: host construction and checks of the on_device practice (fill_check.h).
#include "bench/on_device/fill_check.h"

#include <math.h>

#include "kernels/rng.h"

void fill_host_normal(float *dst, size_t n, uint64_t seed, uint64_t stream)
{
    // Box-Muller with both outputs of each pair of uniforms, as PyTorch's CPU normal_ does
    // (it vectorises them 16 at a time; this is the scalar loop)
    Rng r = rng_make(seed, stream, 0x6e6f726d616cull);  // "normal"
    for (size_t i = 0; i < n; i += 2) {
        float u1 = rng_uniform_float(&r), u2 = rng_uniform_float(&r);
        if (u1 < 1e-7f) u1 = 1e-7f;
        float radius = sqrtf(-2.0f * logf(u1)), angle = 6.28318530718f * u2;
        dst[i] = radius * cosf(angle);
        if (i + 1 < n) dst[i + 1] = radius * sinf(angle);
    }
}

void fill_host_arange(int32_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (int32_t)i;
}

size_t check_zeros(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; i++) wrong += b[i] != 0;
    return wrong;
}

size_t check_arange(const int32_t *p, size_t n)
{
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += p[i] != (int32_t)i;
    return wrong;
}

NormalCheck check_normal(const float *x, size_t n)
{
    NormalCheck c = {.n = n};
    if (n < 2) return c;
    // Two passes in double: the sums of 64M floats must not lose the digits we test.
    double sum = 0.0;
    bool finite = true;
    for (size_t i = 0; i < n; i++) {
        finite = finite && isfinite(x[i]);
        sum += x[i];
    }
    c.mean = sum / (double)n;
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - c.mean;
        sq += d * d;
    }
    c.std = sqrt(sq / (double)(n - 1));
    c.mean_tol = FILL_CHECK_SIGMAS / sqrt((double)n);
    c.std_tol = FILL_CHECK_SIGMAS / sqrt(2.0 * (double)(n - 1));
    c.ok = finite && fabs(c.mean) <= c.mean_tol && fabs(c.std - 1.0) <= c.std_tol;
    return c;
}
