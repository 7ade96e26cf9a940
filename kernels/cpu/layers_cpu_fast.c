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
// This file: the workspace, the library set-up, the loops shared by the layers, and the
// pointwise layers, pooling, linear and SGD; convolutions in layers_cpu_fast_conv.c,
// batch normalisation in layers_cpu_fast_bn.c.
#include "kernels/layers_cpu_fast.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/cpu_pool.h"
#include "kernels/cpu/layers_cpu_fast_internal.h"

// OpenBLAS's own controls (declared here too in case cblas.h is another vendor's).
void openblas_set_num_threads(int num_threads);
char *openblas_get_config(void);
char *openblas_get_corename(void);

// ---- workspace and facts -------------------------------------------------------------

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

// ---- vectorised loops (cloned per instruction set) ------------------------------------

CPU_SIMD float sum_span(const float *x, size_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
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

CPU_SIMD void add_span(const float *a, const float *b, float *y, size_t n)
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

CPU_SIMD void fill_span(float *y, size_t n, float v)
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

// AdamW, torch.optim.AdamW's per-element order (kernels/adamw.h).
CPU_SIMD static void adamw_span(float *p, const float *g, float *m, float *v, size_t n,
                                const AdamwCoeffs *k)
{
    const float w1 = 1.0f - k->beta1, w2 = 1.0f - k->beta2;
    for (size_t i = 0; i < n; i++) {
        float mi = m[i] + w1 * (g[i] - m[i]);
        float vi = k->beta2 * v[i] + w2 * g[i] * g[i];
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * k->decay - k->step_size * (mi / (sqrtf(vi) / k->bc2_sqrt + k->eps));
    }
}

// ---- pointwise -------------------------------------------------------------------------

// One pointwise call: span t of T over count floats.
typedef enum { PW_RELU, PW_RELU_BWD, PW_ADD, PW_ADD_RELU, PW_COPY_GRAD, PW_SGD, PW_ADAMW } PointwiseKind;

typedef struct PointwiseJob {
    PointwiseKind kind;
    size_t count;
    int tasks;
    const float *a, *b;
    float *y, *z;
    bool accum;
    float lr, momentum, weight_decay;
    float *v;                 // PW_ADAMW: exp_avg_sq (z: exp_avg)
    const AdamwCoeffs *adamw;
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
    case PW_ADAMW: adamw_span(j->y + lo, j->a + lo, j->z + lo, j->v + lo, n, j->adamw); break;
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

void adamw_update_fast(const CpuWorkspace *ws, size_t count, float *params, const float *grads,
                       float *m, float *v, const AdamwCoeffs *k)
{
    pointwise(ws, &(PointwiseJob){.kind = PW_ADAMW, .count = count, .a = grads, .y = params,
                                  .z = m, .v = v, .adamw = k});
}
