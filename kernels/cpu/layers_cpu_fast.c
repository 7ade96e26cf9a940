// layers_cpu_fast.c: the fast CPU layers (see layers_cpu_fast.h). Compiled with -O3 and
// -fopenmp-simd (Makefile; OpenMP's simd pragmas only, no OpenMP runtime). Each layer
// is cut into tasks run by the thread pool of cpu_pool.h: a fixed run of images per task
// (convolutions), a block of channels (BN) or a span of floats (pointwise). A task's work
// and scratch depend on its index only, never on the thread that runs it, so results
// depend on the thread count (the weight-gradient sum order) but never on scheduling.
// The loops are plain C that GCC vectorises, cloned per instruction set (CPU_SIMD) and
// picked by an ifunc resolver at load time, so the binary still runs on any x86-64.
// Floating-point contraction stays off (-std=c11), so elementwise results (ReLU, add,
// SGD) are bit-identical to the reference; reductions differ by summation order only.
#include "kernels/layers_cpu_fast.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/cpu_pool.h"
#include "kernels/model.h"

// OpenBLAS's own controls (declared here too in case cblas.h is another vendor's).
void openblas_set_num_threads(int num_threads);
char *openblas_get_config(void);
char *openblas_get_corename(void);

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

// ---- workspace and facts -------------------------------------------------------------

// Region sizes per task of conv_fwd_fast/conv_bwd_fast: see the convolutions' notes.
static size_t conv_region_floats(const ConvShape *s, bool threaded);
static size_t conv_weight_floats(const ConvShape *s) { return (size_t)s->k * s->c * s->r * s->r; }

int cpu_workspace_init(CpuWorkspace *ws, const ConvShape *convs, int count, int threads)
{
    if (threads < 1) threads = 1;
    size_t per = 0, shared = 0;
    for (int i = 0; i < count; i++) {
        size_t t = conv_region_floats(&convs[i], threads > 1), w = conv_weight_floats(&convs[i]);
        if (t > per) per = t;
        if (w > shared) shared = w;
    }
    per = (per + 15) / 16 * 16; // whole cache lines: every region starts 64-byte aligned
    shared = (shared + 15) / 16 * 16;
    float *p = aligned_alloc(64, (shared + per * (size_t)threads + 16) * sizeof(float));
    if (!p) {
        *ws = (CpuWorkspace){0};
        return error_set(ERROR_OUT_OF_MEMORY, "cpu_workspace_init: out of memory");
    }
    *ws = (CpuWorkspace){threads, per, shared, p};
    return 0;
}

void cpu_workspace_free(CpuWorkspace *ws)
{
    free(ws->scratch);
    *ws = (CpuWorkspace){0};
}

size_t cpu_workspace_bytes(const CpuWorkspace *ws)
{
    return ws->scratch ? (ws->shared_floats + ws->region_floats * (size_t)ws->threads + 16) * sizeof(float) : 0;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

// OpenBLAS's pthread build starts its own worker threads when it loads; they spin-yield
// for a while after every threaded call. With one BLAS thread they are never used, so
// they are stopped (what OpenBLAS itself does before a fork) instead of competing with
// our threads. The symbol is OpenBLAS's; weak, in case another BLAS is linked.
int blas_thread_shutdown_(void) __attribute__((weak));

static void blas_single_thread(void)
{
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
}

void cpu_fast_init(void) { pthread_once(&init_once, blas_single_thread); }

const char *cpu_fast_isa(void)
{
#if defined(__x86_64__) && !defined(__clang__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "avx512f";
    if (__builtin_cpu_supports("avx2")) return "avx2";
    return "x86-64";
#else
    return "generic";
#endif
}

static char blas_name[128];
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_name_init(void)
{
    // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64" -> first two words
    char version[64] = "OpenBLAS";
    const char *cfg = openblas_get_config();
    if (cfg) {
        const char *sp = strchr(cfg, ' ');
        if (sp) sp = strchr(sp + 1, ' ');
        size_t len = sp ? (size_t)(sp - cfg) : strlen(cfg);
        if (len >= sizeof version) len = sizeof version - 1;
        memcpy(version, cfg, len);
        version[len] = '\0';
    }
    const char *core = openblas_get_corename();
    snprintf(blas_name, sizeof blas_name, "%s %s", version, core ? core : "unknown");
}

const char *cpu_fast_blas(void)
{
    pthread_once(&blas_once, blas_name_init);
    return blas_name;
}

// ---- helpers -------------------------------------------------------------------------

static int min_int(int a, int b) { return a < b ? a : b; }

// Row-major C (m, n) = op(A) op(B) + beta C through OpenBLAS (alpha = 1).
static void sgemm(bool ta, bool tb, int m, int n, int k, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

// Tasks for pointwise work over count floats (1: run it here).
static int span_tasks(const CpuWorkspace *ws, size_t count)
{
    if (ws->threads <= 1 || count < PARALLEL_MIN) return 1;
    size_t most = count / (PARALLEL_MIN / 2), want = (size_t)ws->threads * TASKS_PER_THREAD;
    return (int)(want < most ? want : most);
}

// Tasks over c channels of n*c*hw floats.
static int channel_tasks(const CpuWorkspace *ws, int c, size_t count)
{
    if (span_tasks(ws, count) == 1) return 1;
    return min_int(c, ws->threads * TASKS_PER_THREAD);
}

// [*lo, *hi) of count floats for task t of nt, in SPAN_ALIGN multiples.
static void span_of(size_t count, int t, int nt, size_t *lo, size_t *hi)
{
    size_t blocks = (count + SPAN_ALIGN - 1) / SPAN_ALIGN;
    size_t b0 = blocks * (size_t)t / (size_t)nt, b1 = blocks * (size_t)(t + 1) / (size_t)nt;
    *lo = b0 * SPAN_ALIGN < count ? b0 * SPAN_ALIGN : count;
    *hi = b1 * SPAN_ALIGN < count ? b1 * SPAN_ALIGN : count;
}

// ---- vectorised loops (cloned per instruction set) ------------------------------------

// col (C*R*R, (p_hi-p_lo)*Q), rows ld floats apart: output rows [p_lo, p_hi) of the
// im2col of one image x (C, H, W); out-of-image taps are 0. A stride-1 convolution that
// keeps the size (P = H, Q = W) shifts each channel plane as a whole: one contiguous copy
// per tap, then the wrapped-around edge columns are zeroed; anything else goes pixel row
// by pixel row.
CPU_SIMD static void im2col_image(const ConvShape *s, const float *restrict x,
                                  float *restrict col, size_t ld, int p_lo, int p_hi)
{
    int st = s->stride;
    if (st == 1 && s->p == s->h && s->q == s->w) {
        int w = s->w, h = s->h;
        size_t hw = (size_t)h * w, base = (size_t)p_lo * w, end = (size_t)p_hi * w;
        for (int c = 0; c < s->c; c++)
            for (int i = 0; i < s->r; i++)
                for (int j = 0; j < s->r; j++) {
                    float *row = col + (size_t)((c * s->r + i) * s->r + j) * ld; // pixel base
                    const float *xc = x + (size_t)c * hw;
                    int di = i - s->pad, dj = j - s->pad; // input pixel = output pixel + (di, dj)
                    // output rows whose input row exists: [p0, p1)
                    int p0 = di < 0 ? -di : 0, p1 = di > 0 ? h - di : h;
                    if (p0 > h) p0 = h;
                    if (p1 < p0) p1 = p0;
                    int z0 = p0 < p_hi ? p0 : p_hi, z1 = p1 > p_lo ? p1 : p_lo;
                    for (size_t k = base; k < (size_t)z0 * w; k++) row[k - base] = 0.0f;
                    for (size_t k = (size_t)z1 * w; k < end; k++) row[k - base] = 0.0f;
                    long shift = (long)di * w + dj;
                    size_t lo = (size_t)p0 * w + (dj < 0 ? -dj : 0);
                    size_t hi = (size_t)p1 * w - (dj > 0 ? dj : 0);
                    if (lo < base) lo = base;
                    if (hi > end) hi = end;
                    if (hi > lo) memcpy(row + (lo - base), xc + (long)lo + shift, (hi - lo) * sizeof *row);
                    if (dj != 0)
                        for (int p = p0 > p_lo ? p0 : p_lo; p < (p1 < p_hi ? p1 : p_hi); p++) {
                            float *r = row + (size_t)(p - p_lo) * w;
                            if (dj < 0)
                                for (int q = 0; q < -dj && q < w; q++) r[q] = 0.0f;
                            else
                                for (int q = w - dj < 0 ? 0 : w - dj; q < w; q++) r[q] = 0.0f;
                        }
                }
        return;
    }
    for (int c = 0; c < s->c; c++)
        for (int i = 0; i < s->r; i++)
            for (int j = 0; j < s->r; j++) {
                float *row = col + (size_t)((c * s->r + i) * s->r + j) * ld;
                int off = j - s->pad; // input column of output column q: q*st + off
                int q0 = off >= 0 ? 0 : (-off + st - 1) / st;
                int q1 = (s->w - off + st - 1) / st;
                if (q0 > s->q) q0 = s->q;
                if (q1 > s->q) q1 = s->q;
                if (q1 < q0) q1 = q0;
                for (int p = p_lo; p < p_hi; p++) {
                    float *out = row + (size_t)(p - p_lo) * s->q;
                    int y = p * st - s->pad + i;
                    if (y < 0 || y >= s->h) {
                        for (int q = 0; q < s->q; q++) out[q] = 0.0f;
                        continue;
                    }
                    const float *xr = x + ((size_t)c * s->h + y) * s->w;
                    for (int q = 0; q < q0; q++) out[q] = 0.0f;
                    if (st == 1)
                        for (int q = q0; q < q1; q++) out[q] = xr[q + off];
                    else
                        for (int q = q0; q < q1; q++) out[q] = xr[q * st + off];
                    for (int q = q1; q < s->q; q++) out[q] = 0.0f;
                }
            }
}

// dx (C, H, W) += col (C*R*R, P*Q) scattered back (the adjoint of im2col_image).
CPU_SIMD static void col2im_image(const ConvShape *s, const float *restrict col,
                                  float *restrict dx)
{
    int pq = s->p * s->q, st = s->stride;
    for (int c = 0; c < s->c; c++)
        for (int i = 0; i < s->r; i++)
            for (int j = 0; j < s->r; j++) {
                const float *row = col + ((size_t)(c * s->r + i) * s->r + j) * pq;
                int off = j - s->pad;
                int q0 = off >= 0 ? 0 : (-off + st - 1) / st;
                int q1 = (s->w - off + st - 1) / st;
                if (q0 > s->q) q0 = s->q;
                if (q1 > s->q) q1 = s->q;
                for (int p = 0; p < s->p; p++) {
                    int y = p * st - s->pad + i;
                    if (y < 0 || y >= s->h) continue;
                    const float *in = row + (size_t)p * s->q;
                    float *dr = dx + ((size_t)c * s->h + y) * s->w;
                    if (st == 1)
                        for (int q = q0; q < q1; q++) dr[q + off] += in[q];
                    else
                        for (int q = q0; q < q1; q++) dr[q * st + off] += in[q];
                }
            }
}

CPU_SIMD static float sum_span(const float *x, size_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

CPU_SIMD static float sqdev_span(const float *x, size_t n, float mean)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) s += (x[i] - mean) * (x[i] - mean);
    return s;
}

CPU_SIMD static void affine_span(const float *x, float *y, size_t n, float scale, float shift)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] * scale + shift;
}

// affine_span then relu_span in one pass (the same two roundings, so the same bits).
CPU_SIMD static void affine_relu_span(const float *x, float *y, size_t n, float scale, float shift)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * scale + shift;
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

// sum dy and sum dy * (x - mean) * invstd over one row.
CPU_SIMD static void bn_grad_sums_span(const float *x, const float *dy, size_t n, float mean,
                                       float invstd, float *sdy, float *sdyx)
{
    float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
    for (size_t i = 0; i < n; i++) {
        a += dy[i];
        b += dy[i] * (x[i] - mean) * invstd;
    }
    *sdy = a;
    *sdyx = b;
}

// bn_grad_sums_span of dy masked by a fused ReLU's output y (dy where y > 0, else 0).
CPU_SIMD static void bn_relu_grad_sums_span(const float *x, const float *y, const float *dy,
                                            size_t n, float mean, float invstd, float *sdy,
                                            float *sdyx)
{
    float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
    for (size_t i = 0; i < n; i++) {
        float d = y[i] > 0.0f ? dy[i] : 0.0f;
        a += d;
        b += d * (x[i] - mean) * invstd;
    }
    *sdy = a;
    *sdyx = b;
}

// bn_dx_span of dy masked likewise.
CPU_SIMD static void bn_relu_dx_span(const float *x, const float *y, const float *dy, float *dx,
                                     size_t n, float k, float m, float db, float dg, float mean,
                                     float invstd, bool accum)
{
    if (accum)
        for (size_t i = 0; i < n; i++) {
            float xhat = (x[i] - mean) * invstd, d = y[i] > 0.0f ? dy[i] : 0.0f;
            dx[i] += k * (m * d - db - xhat * dg);
        }
    else
        for (size_t i = 0; i < n; i++) {
            float xhat = (x[i] - mean) * invstd, d = y[i] > 0.0f ? dy[i] : 0.0f;
            dx[i] = k * (m * d - db - xhat * dg);
        }
}

CPU_SIMD static void bn_dx_span(const float *x, const float *dy, float *dx, size_t n, float k,
                                float m, float db, float dg, float mean, float invstd, bool accum)
{
    if (accum)
        for (size_t i = 0; i < n; i++) {
            float xhat = (x[i] - mean) * invstd;
            dx[i] += k * (m * dy[i] - db - xhat * dg);
        }
    else
        for (size_t i = 0; i < n; i++) {
            float xhat = (x[i] - mean) * invstd;
            dx[i] = k * (m * dy[i] - db - xhat * dg);
        }
}

CPU_SIMD static void relu_span(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

CPU_SIMD static void relu_bwd_span(const float *y, const float *dy, float *dx, size_t n, bool accum)
{
    if (accum)
        for (size_t i = 0; i < n; i++) dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
    else
        for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

CPU_SIMD static void add_span(const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

CPU_SIMD static void add_relu_span(const float *a, const float *b, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = a[i] + b[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

CPU_SIMD static void fill_span(float *y, size_t n, float v)
{
    for (size_t i = 0; i < n; i++) y[i] = v;
}

CPU_SIMD static void sgd_span(float *w, const float *g, float *mom, size_t n, float lr, float m,
                              float wd)
{
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] + wd * w[i];
        mom[i] = m * mom[i] + gi;
        w[i] -= lr * mom[i];
    }
}

// ---- convolutions --------------------------------------------------------------------
//
// Task t of T takes the images [n*t/T, n*(t+1)/T) and works through them in chunks of nb
// images (conv_chunk): small feature maps are batched so that every GEMM has at least
// CHUNK_COLUMNS columns (a GEMM over one 8x8 image has 64 and runs at half speed).
// A chunk's im2col is (C*R*R, nb*P*Q); its output, or its gathered dy, is (K, nb*P*Q)
// and is copied to or from the NCHW tensors image by image. With nb = 1 the GEMMs read
// and write the tensors directly.
//   forward:       y (K, PQ)         = W (K, CRR) x col(x) (CRR, PQ)
//   weight grad:   dW (K, CRR)      += dy (K, PQ) x col(x)^T           (per-task parts), or
//                  for K <= WGRAD_TRANSPOSED_MAX_K, dW^T (CRR, K) += col(x) x dy^T, twice as
//                  fast in OpenBLAS for K = 32 (75 against 45 GFLOP/s on one Zen 4 core),
//                  transposed into dW when the parts are summed;
//   input grad, stride 1, same size: dx (C, HW) = W' (C, KRR) x col'(dy) (KRR, HW), a
//                  forward convolution of dy with W' = W with C and K swapped and the
//                  taps flipped (padding R-1-pad), so no col2im and no zeroing;
//   input grad, otherwise: col = W^T (CRR, K) x dy (K, PQ), then col2im adds col into dx.
// Task t's workspace region: [col][chunk][weight-gradient part: when there are several
// tasks, or dW is transposed].

#define CHUNK_COLUMNS 256
// Large feature maps go through im2col a block of output rows at a time, so that the
// block (filled, then packed by the GEMM) stays in a core's L2 cache.
#define COL_BLOCK_FLOATS (192 * 1024)
#define WGRAD_TRANSPOSED_MAX_K 64

// A 1x1, stride-1, unpadded convolution is a plain GEMM on the image: no im2col.
static bool conv_is_pointwise(const ConvShape *s)
{
    return s->r == 1 && s->stride == 1 && s->pad == 0;
}

// Stride 1 and the output as large as the input: dx is a forward convolution of dy.
static bool conv_keeps_size(const ConvShape *s)
{
    return s->stride == 1 && s->p == s->h && s->q == s->w;
}

static int conv_chunk_max(const ConvShape *s)
{
    if (conv_is_pointwise(s)) return 1;
    int pq = s->p * s->q;
    return pq >= CHUNK_COLUMNS ? 1 : (CHUNK_COLUMNS + pq - 1) / pq;
}

// Output rows per im2col block of one image (s->p: the whole image).
static int conv_block_rows(const ConvShape *s)
{
    int rows_in = s->c * s->r * s->r, rows_out = s->k * s->r * s->r;
    size_t per_row = (size_t)(conv_keeps_size(s) && rows_out > rows_in ? rows_out : rows_in) * s->q;
    if (per_row * s->p <= COL_BLOCK_FLOATS) return s->p;
    int rows = (int)(COL_BLOCK_FLOATS / per_row);
    if (rows < 1) rows = 1;
    int blocks = (s->p + rows - 1) / rows;
    return (s->p + blocks - 1) / blocks;
}

// Images per chunk when `threads` threads share s->n images.
static int conv_chunk(const ConvShape *s, int threads)
{
    int per = (s->n + threads - 1) / threads, nb = conv_chunk_max(s);
    return nb < per ? nb : (per > 0 ? per : 1);
}

// Floats of a thread's im2col buffer and of its chunk buffer for convolution s.
static void conv_regions(const ConvShape *s, size_t *col, size_t *chunk)
{
    size_t cols = (size_t)conv_chunk_max(s) * s->p * s->q;
    size_t rr = (size_t)s->r * s->r, most = (size_t)(s->k > s->c ? s->k : s->c);
    *col = (conv_keeps_size(s) ? most : (size_t)s->c) * rr * cols;
    *chunk = most * cols;
}

static bool conv_wgrad_transposed(const ConvShape *s) { return s->k <= WGRAD_TRANSPOSED_MAX_K; }

static size_t conv_region_floats(const ConvShape *s, bool threaded)
{
    size_t col, chunk;
    conv_regions(s, &col, &chunk);
    bool part = threaded || conv_wgrad_transposed(s);
    return col + chunk + (part ? conv_weight_floats(s) : 0);
}

// The transposed convolution's shape: dy (N, K, P, Q) in, dx (N, C, H, W) out.
static ConvShape conv_transposed(const ConvShape *s)
{
    return (ConvShape){s->n, s->k, s->p, s->q, s->c, s->r, 1, s->r - 1 - s->pad, s->h, s->w};
}

// W' (C, K*R*R): w' [c][k][i][j] = w[k][c][R-1-i][R-1-j].
static void conv_flip_weights(const ConvShape *s, const float *w, float *wf)
{
    int r = s->r;
    for (int k = 0; k < s->k; k++)
        for (int c = 0; c < s->c; c++)
            for (int i = 0; i < r; i++)
                for (int j = 0; j < r; j++)
                    wf[(((size_t)c * s->k + k) * r + i) * r + j] =
                        w[(((size_t)k * s->c + c) * r + (r - 1 - i)) * r + (r - 1 - j)];
}

// Rows of nb images' (rows, pq) blocks side by side: out (rows, nb*pq) from images
// `stride` floats apart, or (add/copy) back.
static void chunk_gather(const float *src, size_t stride, int nb, int rows, int pq, float *out)
{
    size_t cols = (size_t)nb * pq;
    for (int j = 0; j < nb; j++)
        for (int k = 0; k < rows; k++)
            memcpy(out + k * cols + (size_t)j * pq, src + j * stride + (size_t)k * pq,
                   (size_t)pq * sizeof *out);
}

static void chunk_scatter(const float *in, int nb, int rows, int pq, float *dst, size_t stride,
                          bool accum)
{
    size_t cols = (size_t)nb * pq;
    for (int j = 0; j < nb; j++)
        for (int k = 0; k < rows; k++) {
            const float *a = in + k * cols + (size_t)j * pq;
            float *d = dst + j * stride + (size_t)k * pq;
            if (accum) add_span(d, a, d, (size_t)pq);
            else memcpy(d, a, (size_t)pq * sizeof *d);
        }
}

// A convolution call cut into tasks: task t takes images [n*t/T, n*(t+1)/T) and thread
// region t of the workspace.
typedef struct ConvJob {
    const CpuWorkspace *ws;
    const ConvShape *s;
    int tasks, reduce_tasks;
    const float *x, *dy, *w, *wf, *bias;
    float *y, *dx, *dw;
    bool accum_dx, accum_dw;
} ConvJob;

// The rows of a GEMM's C (k rows of cols floats, row stride ldc) set to their channel's bias,
// so that the GEMM (beta = 1) adds the convolution onto it: the bias costs no pass of its own
// (PyTorch's CPU convolutions take the bias inside the kernel too).
static void fill_bias(float *c, int k, int cols, size_t ldc, const float *bias)
{
    for (int r = 0; r < k; r++) {
        float *row = c + (size_t)r * ldc, v = bias[r];
        for (int i = 0; i < cols; i++) row[i] = v;
    }
}

static void conv_fwd_task(void *arg, int t)
{
    const ConvJob *j = arg;
    const ConvShape *s = j->s;
    size_t xs = (size_t)s->c * s->h * s->w, ys = (size_t)s->k * s->p * s->q;
    int crr = s->c * s->r * s->r, pq = s->p * s->q;
    int nb = conv_chunk(s, j->tasks), block = conv_block_rows(s);
    size_t col_floats, chunk_floats;
    conv_regions(s, &col_floats, &chunk_floats);
    float *col = cpu_workspace_region(j->ws, t), *out = col + col_floats;
    const float *bias = j->bias;
    const float beta = bias ? 1.0f : 0.0f;  // C holds the bias, or is overwritten
    int end = s->n * (t + 1) / j->tasks;
    for (int i = s->n * t / j->tasks; i < end; i += nb) {
        int m = end - i < nb ? end - i : nb, cols = m * pq;
        const float *xi = j->x + i * xs;
        float *yi = j->y + i * ys;
        if (conv_is_pointwise(s)) {
            if (bias) fill_bias(yi, s->k, pq, (size_t)pq, bias);
            sgemm(false, false, s->k, pq, crr, j->w, crr, xi, pq, beta, yi, pq);
        } else if (m == 1) { // one image, a block of output rows at a time
            for (int p0 = 0; p0 < s->p; p0 += block) {
                int p1 = p0 + block < s->p ? p0 + block : s->p, bcols = (p1 - p0) * s->q;
                im2col_image(s, xi, col, (size_t)bcols, p0, p1);
                float *yb = yi + (size_t)p0 * s->q;
                if (bias) fill_bias(yb, s->k, bcols, (size_t)pq, bias);
                sgemm(false, false, s->k, bcols, crr, j->w, crr, col, bcols, beta, yb, pq);
            }
        } else { // m images side by side
            for (int k = 0; k < m; k++)
                im2col_image(s, xi + k * xs, col + (size_t)k * pq, (size_t)cols, 0, s->p);
            if (bias) fill_bias(out, s->k, cols, (size_t)cols, bias);
            sgemm(false, false, s->k, cols, crr, j->w, crr, col, cols, beta, out, cols);
            chunk_scatter(out, m, s->k, pq, yi, ys, false);
        }
    }
}

void conv_fwd_fast(const CpuWorkspace *ws, const ConvShape *s, const float *x, const float *w,
                   const float *bias, float *y)
{
    ConvJob j = {.ws = ws, .s = s, .tasks = min_int(ws->threads, s->n), .x = x, .w = w, .bias = bias,
                 .y = y};
    cpu_pool_run(ws->threads, j.tasks, conv_fwd_task, &j);
}

// Task t sums its images' weight gradient into its own part, which conv_reduce_task adds
// to dw; task 0 writes dw itself when dw is not transposed.
static void conv_bwd_task(void *arg, int t)
{
    const ConvJob *j = arg;
    const ConvShape *s = j->s;
    size_t xs = (size_t)s->c * s->h * s->w, ys = (size_t)s->k * s->p * s->q;
    int crr = s->c * s->r * s->r, krr = s->k * s->r * s->r, pq = s->p * s->q;
    bool direct = conv_is_pointwise(s), flipped = j->dx && !direct && conv_keeps_size(s);
    bool wt = conv_wgrad_transposed(s);
    ConvShape ts = conv_transposed(s);
    int nb = conv_chunk(s, j->tasks), block = conv_block_rows(s);
    size_t col_floats, chunk_floats;
    conv_regions(s, &col_floats, &chunk_floats);
    float *col = cpu_workspace_region(j->ws, t), *chunk = col + col_floats;
    float *part = t == 0 && !wt ? j->dw : chunk + chunk_floats;
    float beta_dx = j->accum_dx ? 1.0f : 0.0f;
    bool first = true;
    int end = s->n * (t + 1) / j->tasks;
    for (int i = s->n * t / j->tasks; i < end; i += nb) {
        int m = end - i < nb ? end - i : nb, cols = m * pq;
        const float *xi = j->x + i * xs, *dyi = j->dy + i * ys;
        float *dxi = j->dx ? j->dx + i * xs : NULL;
        // Blocks of output columns: (K, bcols) of dy with row stride ldy against (CRR,
        // bcols) of col(x); a block of rows of one image, or m whole images side by side.
        int blocks = m == 1 && !direct ? (s->p + block - 1) / block : 1;
        for (int bi = 0; bi < blocks; bi++) {
            int p0 = bi * block, p1 = blocks == 1 ? s->p : (p0 + block < s->p ? p0 + block : s->p);
            int bcols = m == 1 ? (p1 - p0) * s->q : cols, ldy = m == 1 ? pq : cols;
            size_t off = (size_t)p0 * s->q;
            const float *dyc = dyi + off, *b = xi;
            if (m > 1) {
                chunk_gather(dyi, ys, m, s->k, pq, chunk);
                dyc = chunk;
            }
            if (!direct) {
                for (int k = 0; k < m; k++)
                    im2col_image(s, xi + k * xs, col + (size_t)k * pq, (size_t)bcols, p0, p1);
                b = col;
            }
            float beta = first ? (part == j->dw && j->accum_dw ? 1.0f : 0.0f) : 1.0f;
            if (wt) sgemm(false, true, crr, s->k, bcols, b, bcols, dyc, ldy, beta, part, s->k);
            else sgemm(false, true, s->k, crr, bcols, dyc, ldy, b, bcols, beta, part, crr);
            first = false;
            if (!flipped) continue;
            for (int k = 0; k < m; k++)
                im2col_image(&ts, dyi + k * ys, col + (size_t)k * pq, (size_t)bcols, p0, p1);
            if (m == 1) {
                sgemm(false, false, s->c, bcols, krr, j->wf, krr, col, bcols, beta_dx, dxi + off, pq);
            } else {
                sgemm(false, false, s->c, cols, krr, j->wf, krr, col, cols, 0.0f, chunk, cols);
                chunk_scatter(chunk, m, s->c, pq, dxi, xs, j->accum_dx);
            }
        }
        if (!dxi || flipped) continue;
        if (direct) {
            sgemm(true, false, crr, pq, s->k, j->w, crr, dyi, pq, beta_dx, dxi, pq);
            continue;
        }
        for (int k = 0; k < m; k++) { // strided: col = W^T dy, scattered back by col2im
            sgemm(true, false, crr, pq, s->k, j->w, crr, dyi + k * ys, pq, 0.0f, col, pq);
            if (!j->accum_dx) fill_span(dxi + k * xs, xs, 0.0f);
            col2im_image(s, col, dxi + k * xs);
        }
    }
}

static const float *conv_part(const ConvJob *j, int task)
{
    size_t col_floats, chunk_floats;
    conv_regions(j->s, &col_floats, &chunk_floats);
    return cpu_workspace_region(j->ws, task) + col_floats + chunk_floats;
}

// Transposed parts (CRR, K): rows [K*t/T, K*(t+1)/T) of dw (=|+=) the sum over tasks.
static void conv_reduce_transposed_task(void *arg, int t)
{
    const ConvJob *j = arg;
    int k = j->s->k, crr = j->s->c * j->s->r * j->s->r, spans = j->reduce_tasks;
    for (int row = k * t / spans; row < k * (t + 1) / spans; row++) {
        float *d = j->dw + (size_t)row * crr;
        for (int u = 0; u < j->tasks; u++) {
            const float *p = conv_part(j, u) + row;
            if (u == 0 && !j->accum_dw)
                for (int r = 0; r < crr; r++) d[r] = p[(size_t)r * k];
            else
                for (int r = 0; r < crr; r++) d[r] += p[(size_t)r * k];
        }
    }
}

// dw += the parts of tasks 1..T-1, in task order, over span t of dw.
static void conv_reduce_task(void *arg, int t)
{
    const ConvJob *j = arg;
    size_t lo, hi;
    span_of(conv_weight_floats(j->s), t, j->reduce_tasks, &lo, &hi);
    for (int u = 1; u < j->tasks; u++) {
        const float *pu = conv_part(j, u);
        add_span(j->dw + lo, pu + lo, j->dw + lo, hi - lo);
    }
}

void conv_bwd_fast(const CpuWorkspace *ws, const ConvShape *s, const float *x, const float *dy,
                   const float *w, float *dx, bool accum_dx, float *dw, bool accum_dw)
{
    ConvJob j = {.ws = ws, .s = s, .tasks = min_int(ws->threads, s->n), .x = x, .dy = dy,
                 .w = w, .dx = dx, .dw = dw, .accum_dx = accum_dx, .accum_dw = accum_dw};
    if (dx && !conv_is_pointwise(s) && conv_keeps_size(s)) {
        conv_flip_weights(s, w, ws->scratch); // the shared region
        j.wf = ws->scratch;
    }
    cpu_pool_run(ws->threads, j.tasks, conv_bwd_task, &j);
    if (conv_wgrad_transposed(s)) {
        j.reduce_tasks = min_int(ws->threads, s->k);
        cpu_pool_run(ws->threads, j.reduce_tasks, conv_reduce_transposed_task, &j);
    } else if (j.tasks > 1) {
        j.reduce_tasks = min_int(ws->threads, j.tasks);
        cpu_pool_run(ws->threads, j.reduce_tasks, conv_reduce_task, &j);
    }
}

// ---- batch normalisation ---------------------------------------------------------------

// Channels [c*t/T, c*(t+1)/T) per task.
typedef struct BnJob {
    int n, c, hw, tasks;
    const float *x, *dy, *gamma, *beta, *mean_in, *invstd_in, *running_mean_in, *running_var_in;
    const float *relu_y;  // backward through a fused ReLU: its output (the mask); else NULL
    float *y, *dx, *save_mean, *save_invstd, *running_mean, *running_var, *dgamma, *dbeta;
    bool accum_dx, accum_param;
    bool relu;            // forward: a ReLU fused into the output
} BnJob;

static void bn_fwd_train_task(void *arg, int t)
{
    const BnJob *j = arg;
    int n = j->n, c = j->c, hw = j->hw;
    double m = (double)n * hw;
    for (int ch = c * t / j->tasks; ch < c * (t + 1) / j->tasks; ch++) {
        // Per-row float sums (SIMD), rows summed in double.
        double sum = 0.0, sq = 0.0;
        for (int i = 0; i < n; i++) sum += sum_span(j->x + ((size_t)i * c + ch) * hw, (size_t)hw);
        double mean = sum / m;
        for (int i = 0; i < n; i++)
            sq += sqdev_span(j->x + ((size_t)i * c + ch) * hw, (size_t)hw, (float)mean);
        double var = sq / m;
        float invstd = (float)(1.0 / sqrt(var + MODEL_BN_EPS));
        j->save_mean[ch] = (float)mean;
        j->save_invstd[ch] = invstd;
        if (j->running_mean) {
            double unbiased = m > 1 ? var * m / (m - 1) : var;
            j->running_mean[ch] = (1 - MODEL_BN_MOMENTUM) * j->running_mean[ch] + MODEL_BN_MOMENTUM * (float)mean;
            j->running_var[ch] = (1 - MODEL_BN_MOMENTUM) * j->running_var[ch] + MODEL_BN_MOMENTUM * (float)unbiased;
        }
        float sc = j->gamma[ch] * invstd, sh = j->beta[ch] - (float)mean * sc;
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            if (j->relu) affine_relu_span(j->x + o, j->y + o, (size_t)hw, sc, sh);
            else affine_span(j->x + o, j->y + o, (size_t)hw, sc, sh);
        }
    }
}

static void bn_fwd_train_job(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, float *y, float *save_mean,
                             float *save_invstd, float *running_mean, float *running_var,
                             bool relu)
{
    BnJob j = {.n = n, .c = c, .hw = hw, .tasks = channel_tasks(ws, c, (size_t)n * c * hw),
               .x = x, .gamma = gamma, .beta = beta, .y = y, .save_mean = save_mean,
               .save_invstd = save_invstd, .running_mean = running_mean,
               .running_var = running_var, .relu = relu};
    cpu_pool_run(ws->threads, j.tasks, bn_fwd_train_task, &j);
}

void bn_fwd_train_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                       const float *gamma, const float *beta, float *y, float *save_mean,
                       float *save_invstd, float *running_mean, float *running_var)
{
    bn_fwd_train_job(ws, n, c, hw, x, gamma, beta, y, save_mean, save_invstd, running_mean,
                     running_var, false);
}

void bn_relu_fwd_train_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                            const float *gamma, const float *beta, float *y, float *save_mean,
                            float *save_invstd, float *running_mean, float *running_var)
{
    bn_fwd_train_job(ws, n, c, hw, x, gamma, beta, y, save_mean, save_invstd, running_mean,
                     running_var, true);
}

static void bn_fwd_infer_task(void *arg, int t)
{
    const BnJob *j = arg;
    int n = j->n, c = j->c, hw = j->hw;
    for (int ch = c * t / j->tasks; ch < c * (t + 1) / j->tasks; ch++) {
        float sc = j->gamma[ch] / sqrtf(j->running_var_in[ch] + MODEL_BN_EPS);
        float sh = j->beta[ch] - j->running_mean_in[ch] * sc;
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            if (j->relu) affine_relu_span(j->x + o, j->y + o, (size_t)hw, sc, sh);
            else affine_span(j->x + o, j->y + o, (size_t)hw, sc, sh);
        }
    }
}

static void bn_fwd_infer_job(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, const float *running_mean,
                             const float *running_var, float *y, bool relu)
{
    BnJob j = {.n = n, .c = c, .hw = hw, .tasks = channel_tasks(ws, c, (size_t)n * c * hw),
               .x = x, .gamma = gamma, .beta = beta, .running_mean_in = running_mean,
               .running_var_in = running_var, .y = y, .relu = relu};
    cpu_pool_run(ws->threads, j.tasks, bn_fwd_infer_task, &j);
}

void bn_fwd_infer_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                       const float *gamma, const float *beta, const float *running_mean,
                       const float *running_var, float *y)
{
    bn_fwd_infer_job(ws, n, c, hw, x, gamma, beta, running_mean, running_var, y, false);
}

void bn_relu_fwd_infer_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                            const float *gamma, const float *beta, const float *running_mean,
                            const float *running_var, float *y)
{
    bn_fwd_infer_job(ws, n, c, hw, x, gamma, beta, running_mean, running_var, y, true);
}

static void bn_bwd_task(void *arg, int t)
{
    const BnJob *j = arg;
    int n = j->n, c = j->c, hw = j->hw;
    float m = (float)n * hw;
    for (int ch = c * t / j->tasks; ch < c * (t + 1) / j->tasks; ch++) {
        double sdy = 0.0, sdyx = 0.0;
        float mean = j->mean_in[ch], invstd = j->invstd_in[ch];
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            float a, b;
            if (j->relu_y)
                bn_relu_grad_sums_span(j->x + o, j->relu_y + o, j->dy + o, (size_t)hw, mean, invstd,
                                       &a, &b);
            else
                bn_grad_sums_span(j->x + o, j->dy + o, (size_t)hw, mean, invstd, &a, &b);
            sdy += a;
            sdyx += b;
        }
        float db = (float)sdy, dg = (float)sdyx;
        j->dbeta[ch] = j->accum_param ? j->dbeta[ch] + db : db;
        j->dgamma[ch] = j->accum_param ? j->dgamma[ch] + dg : dg;
        if (!j->dx) continue;
        float k = j->gamma[ch] * invstd / m;
        for (int i = 0; i < n; i++) {
            size_t o = ((size_t)i * c + ch) * hw;
            if (j->relu_y)
                bn_relu_dx_span(j->x + o, j->relu_y + o, j->dy + o, j->dx + o, (size_t)hw, k, m, db,
                                dg, mean, invstd, j->accum_dx);
            else
                bn_dx_span(j->x + o, j->dy + o, j->dx + o, (size_t)hw, k, m, db, dg, mean, invstd,
                           j->accum_dx);
        }
    }
}

void bn_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x, const float *dy,
                 const float *gamma, const float *save_mean, const float *save_invstd,
                 float *dx, bool accum_dx, float *dgamma, float *dbeta, bool accum_param)
{
    BnJob j = {.n = n, .c = c, .hw = hw, .tasks = channel_tasks(ws, c, (size_t)n * c * hw),
               .x = x, .dy = dy, .gamma = gamma, .mean_in = save_mean, .invstd_in = save_invstd,
               .dx = dx, .dgamma = dgamma, .dbeta = dbeta, .accum_dx = accum_dx,
               .accum_param = accum_param};
    cpu_pool_run(ws->threads, j.tasks, bn_bwd_task, &j);
}

void bn_relu_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x,
                      const float *y, const float *dy, const float *gamma, const float *save_mean,
                      const float *save_invstd, float *dx, bool accum_dx, float *dgamma,
                      float *dbeta, bool accum_param)
{
    BnJob j = {.n = n, .c = c, .hw = hw, .tasks = channel_tasks(ws, c, (size_t)n * c * hw),
               .x = x, .dy = dy, .relu_y = y, .gamma = gamma, .mean_in = save_mean,
               .invstd_in = save_invstd, .dx = dx, .dgamma = dgamma, .dbeta = dbeta,
               .accum_dx = accum_dx, .accum_param = accum_param};
    cpu_pool_run(ws->threads, j.tasks, bn_bwd_task, &j);
}

// ---- pointwise -------------------------------------------------------------------------

// One pointwise call: span t of T over count floats.
typedef enum { PW_RELU, PW_RELU_BWD, PW_ADD, PW_ADD_RELU, PW_COPY_GRAD, PW_SGD } PointwiseKind;

typedef struct PointwiseJob {
    PointwiseKind kind;
    size_t count;
    int tasks;
    const float *a, *b;
    float *y, *z;
    bool accum;
    float lr, momentum, weight_decay;
} PointwiseJob;

static void pointwise_task(void *arg, int t)
{
    const PointwiseJob *j = arg;
    size_t lo, hi;
    span_of(j->count, t, j->tasks, &lo, &hi);
    size_t n = hi - lo;
    switch (j->kind) {
    case PW_RELU: relu_span(j->a + lo, j->y + lo, n); break;
    case PW_RELU_BWD: relu_bwd_span(j->a + lo, j->b + lo, j->y + lo, n, j->accum); break;
    case PW_ADD: add_span(j->a + lo, j->b + lo, j->y + lo, n); break;
    case PW_ADD_RELU: add_relu_span(j->a + lo, j->b + lo, j->y + lo, n); break;
    case PW_COPY_GRAD:
        if (j->accum) add_span(j->y + lo, j->a + lo, j->y + lo, n);
        else memcpy(j->y + lo, j->a + lo, n * sizeof *j->y);
        break;
    case PW_SGD: sgd_span(j->y + lo, j->a + lo, j->z + lo, n, j->lr, j->momentum, j->weight_decay); break;
    }
}

static void pointwise(const CpuWorkspace *ws, PointwiseJob *j)
{
    j->tasks = span_tasks(ws, j->count);
    cpu_pool_run(ws->threads, j->tasks, pointwise_task, j);
}

void relu_fwd_fast(const CpuWorkspace *ws, size_t count, const float *x, float *y)
{
    pointwise(ws, &(PointwiseJob){.kind = PW_RELU, .count = count, .a = x, .y = y});
}

void relu_bwd_fast(const CpuWorkspace *ws, size_t count, const float *y, const float *dy,
                   float *dx, bool accum)
{
    pointwise(ws, &(PointwiseJob){.kind = PW_RELU_BWD, .count = count, .a = y, .b = dy, .y = dx,
                                  .accum = accum});
}

void add_fwd_fast(const CpuWorkspace *ws, size_t count, const float *a, const float *b, float *y)
{
    pointwise(ws, &(PointwiseJob){.kind = PW_ADD, .count = count, .a = a, .b = b, .y = y});
}

void add_relu_fwd_fast(const CpuWorkspace *ws, size_t count, const float *a, const float *b,
                       float *y)
{
    pointwise(ws, &(PointwiseJob){.kind = PW_ADD_RELU, .count = count, .a = a, .b = b, .y = y});
}

void copy_grad_fast(const CpuWorkspace *ws, size_t count, const float *dy, float *dx, bool accum)
{
    pointwise(ws, &(PointwiseJob){.kind = PW_COPY_GRAD, .count = count, .a = dy, .y = dx,
                                  .accum = accum});
}

// Rows [rows*t/T, rows*(t+1)/T) of (rows, hw) per task.
typedef struct GapJob {
    size_t rows;
    int hw, tasks;
    const float *in;
    float *out;
    bool accum;
} GapJob;

static void gap_fwd_task(void *arg, int t)
{
    const GapJob *j = arg;
    for (size_t i = j->rows * t / j->tasks; i < j->rows * (t + 1) / j->tasks; i++)
        j->out[i] = sum_span(j->in + i * j->hw, (size_t)j->hw) / (float)j->hw;
}

static void gap_bwd_task(void *arg, int t)
{
    const GapJob *j = arg;
    int hw = j->hw;
    for (size_t i = j->rows * t / j->tasks; i < j->rows * (t + 1) / j->tasks; i++) {
        float g = j->in[i] / (float)hw;
        float *d = j->out + i * hw;
        if (j->accum)
            for (int k = 0; k < hw; k++) d[k] += g;
        else
            fill_span(d, (size_t)hw, g);
    }
}

void gap_fwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *x, float *y)
{
    GapJob j = {(size_t)n * c, hw, channel_tasks(ws, n * c, (size_t)n * c * hw), x, y, false};
    cpu_pool_run(ws->threads, j.tasks, gap_fwd_task, &j);
}

void gap_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *dy, float *dx,
                  bool accum)
{
    GapJob j = {(size_t)n * c, hw, channel_tasks(ws, n * c, (size_t)n * c * hw), dy, dx, accum};
    cpu_pool_run(ws->threads, j.tasks, gap_bwd_task, &j);
}

// ---- linear ----------------------------------------------------------------------------

void linear_fwd_fast(const CpuWorkspace *ws, int n, int k, int m, const float *x, const float *w,
                     const float *b, float *y)
{
    (void)ws;
    for (int i = 0; i < n; i++) memcpy(y + (size_t)i * m, b, (size_t)m * sizeof *y);
    sgemm(false, true, n, m, k, x, k, w, k, 1.0f, y, m);
}

void linear_bwd_fast(const CpuWorkspace *ws, int n, int k, int m, const float *x, const float *w,
                     const float *dy, float *dx, bool accum_dx, float *dw, float *db,
                     bool accum_param)
{
    (void)ws;
    if (dx) sgemm(false, false, n, k, m, dy, m, w, k, accum_dx ? 1.0f : 0.0f, dx, k);
    sgemm(true, false, m, k, n, dy, m, x, k, accum_param ? 1.0f : 0.0f, dw, k);
    for (int j = 0; j < m; j++) {
        float s = 0.0f;
        for (int i = 0; i < n; i++) s += dy[(size_t)i * m + j];
        db[j] = accum_param ? db[j] + s : s;
    }
}

// ---- optimizer -------------------------------------------------------------------------

void sgd_update_fast(const CpuWorkspace *ws, size_t count, float *params, const float *grads,
                     float *mom, float lr, float momentum, float weight_decay)
{
    pointwise(ws, &(PointwiseJob){.kind = PW_SGD, .count = count, .a = grads, .y = params,
                                  .z = mom, .lr = lr, .momentum = momentum,
                                  .weight_decay = weight_decay});
}
