// layers_cpu_fast_internal.h: what the fast CPU layers' files share (private to
// kernels/cpu/): the instruction-set cloning (CPU_SIMD), how work is cut into tasks, the
// GEMM call, and the loops and sizes one file defines and another uses. The layers
// themselves: layers_cpu_fast.c (workspace, pointwise, pooling, linear, SGD),
// layers_cpu_fast_conv.c (convolutions), layers_cpu_fast_bn.c (batch normalisation).
#ifndef KERNELS_CPU_LAYERS_CPU_FAST_INTERNAL_H
#define KERNELS_CPU_LAYERS_CPU_FAST_INTERNAL_H

#include <cblas.h>
#include <stdbool.h>
#include <stddef.h>

#include "kernels/layers_cpu_fast.h"
#include "kernels/model.h"

#if defined(__x86_64__) && !defined(__clang__)
#define CPU_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_SIMD
#endif

// Below this many floats a pointwise op runs on one thread: waking a second costs more.
#define PARALLEL_MIN 131072
// Span granularity of pointwise work split into tasks (floats; keeps vectors aligned).
#define SPAN_ALIGN 64
// Tasks per thread for work that splits freely (spans, channel blocks), so that a thread
// the OS runs late leaves less for the others to wait for.
#define TASKS_PER_THREAD 4

// Region sizes per task of conv_fwd_fast/conv_bwd_fast (layers_cpu_fast_conv.c): see the
// convolutions' notes there.
size_t conv_region_floats(const ConvShape *s, bool threaded);
static inline size_t conv_weight_floats(const ConvShape *s) { return (size_t)s->k * s->c * s->r * s->r; }

// Loops several layers use (layers_cpu_fast.c).
CPU_SIMD float sum_span(const float *x, size_t n);
CPU_SIMD void add_span(const float *a, const float *b, float *y, size_t n);
CPU_SIMD void fill_span(float *y, size_t n, float v);

// ---- helpers -------------------------------------------------------------------------

static inline int min_int(int a, int b) { return a < b ? a : b; }

// Row-major C (m, n) = op(A) op(B) + beta C through OpenBLAS (alpha = 1).
static inline void sgemm(bool ta, bool tb, int m, int n, int k, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

// Tasks for pointwise work over count floats (1: run it here).
static inline int span_tasks(const CpuWorkspace *ws, size_t count)
{
    if (ws->threads <= 1 || count < PARALLEL_MIN) return 1;
    size_t most = count / (PARALLEL_MIN / 2), want = (size_t)ws->threads * TASKS_PER_THREAD;
    return (int)(want < most ? want : most);
}

// Tasks over c channels of n*c*hw floats.
static inline int channel_tasks(const CpuWorkspace *ws, int c, size_t count)
{
    if (span_tasks(ws, count) == 1) return 1;
    return min_int(c, ws->threads * TASKS_PER_THREAD);
}

// [*lo, *hi) of count floats for task t of nt, in SPAN_ALIGN multiples.
static inline void span_of(size_t count, int t, int nt, size_t *lo, size_t *hi)
{
    size_t blocks = (count + SPAN_ALIGN - 1) / SPAN_ALIGN;
    size_t b0 = blocks * (size_t)t / (size_t)nt, b1 = blocks * (size_t)(t + 1) / (size_t)nt;
    *lo = b0 * SPAN_ALIGN < count ? b0 * SPAN_ALIGN : count;
    *hi = b1 * SPAN_ALIGN < count ? b1 * SPAN_ALIGN : count;
}

#endif
