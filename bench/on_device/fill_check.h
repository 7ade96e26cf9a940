// fill_check.h: the host side of the on_device practice: what torch.randn(n) and
// torch.arange(n) do on the CPU (the baselines' host construction), and the checks every
// constructed tensor passes, wherever it was built: zeros and ranges exact, random
// normal values within a tolerance on their mean and standard deviation that follows
// from the sample size.
#ifndef FILL_CHECK_H
#define FILL_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Standard errors allowed on the mean and the standard deviation of a normal sample: a
// correct generator fails a check with a probability of about 2e-9 each.
#define FILL_CHECK_SIGMAS 6.0

// n standard normal floats from the project's generator (kernels/rng.h) by Box-Muller,
// one thread, as PyTorch's CPU generator: the same (seed, stream) gives the same values.
void fill_host_normal(float *dst, size_t n, uint64_t seed, uint64_t stream);
// dst[i] = i for i < n (an arange; int32 so that every value is exact).
void fill_host_arange(int32_t *dst, size_t n);

// Bytes of p that are not zero.
size_t check_zeros(const void *p, size_t bytes);
// Elements with p[i] != i.
size_t check_arange(const int32_t *p, size_t n);

typedef struct NormalCheck {
    size_t n;
    double mean, std;         // of the sample (std with n - 1)
    double mean_tol, std_tol; // allowed |mean - 0| and |std - 1|: FILL_CHECK_SIGMAS standard
                              // errors, 1/sqrt(n) for the mean, 1/sqrt(2(n-1)) for the std
    bool ok;                  // both within tolerance and every value finite (n >= 2)
} NormalCheck;

// Checks that x[0..n) looks like a standard normal sample.
NormalCheck check_normal(const float *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
