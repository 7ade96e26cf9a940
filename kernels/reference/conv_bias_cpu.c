// conv_bias_cpu.c: the reference convolution bias (plain C, one thread, double sums).
#include "kernels/conv_bias_cpu.h"

#include <stddef.h>

void conv_bias_fwd_cpu(int n, int c, int hw, const float *b, float *y)
{
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++) {
            float *yp = y + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++) yp[j] += b[ch];
        }
}

void conv_bias_bwd_cpu(int n, int c, int hw, const float *dy, float *db, bool accum)
{
    for (int ch = 0; ch < c; ch++) {
        double s = 0.0;
        for (int i = 0; i < n; i++) {
            const float *d = dy + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++) s += d[j];
        }
        db[ch] = accum ? db[ch] + (float)s : (float)s;
    }
}
