// conv_bias_cpu_fast.c: the fast backend's convolution bias gradient: channels split over
// the threads of cpu_pool.h (each task owns a range of channels, so no task writes what
// another reads), the loops vectorised per plane. (Its forward bias is inside the
// convolution's GEMMs: conv_fwd_fast.)
#include "kernels/conv_bias_cpu.h"

#include <stddef.h>

#include "kernels/cpu_pool.h"

#if defined(__x86_64__) && !defined(__clang__)
#define BIAS_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BIAS_SIMD
#endif

// Below this many floats one thread does the whole op: waking another costs more.
#define BIAS_SERIAL_FLOATS 32768

typedef struct BiasJob {
    int n, c, hw, tasks;
    const float *in; // dy
    float *out;      // db
    bool accum;
} BiasJob;

BIAS_SIMD static float sum_plane(const float *restrict x, size_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

static void bwd_task(void *arg, int t)
{
    const BiasJob *j = arg;
    for (int ch = j->c * t / j->tasks; ch < j->c * (t + 1) / j->tasks; ch++) {
        float s = 0.0f;
        for (int i = 0; i < j->n; i++)
            s += sum_plane(j->in + ((size_t)i * j->c + ch) * j->hw, (size_t)j->hw);
        j->out[ch] = j->accum ? j->out[ch] + s : s;
    }
}

static int bias_tasks(const CpuWorkspace *ws, int n, int c, int hw)
{
    if ((size_t)n * c * hw < BIAS_SERIAL_FLOATS || ws->threads <= 1) return 1;
    return c < 4 * ws->threads ? c : 4 * ws->threads;
}

void conv_bias_bwd_fast(const CpuWorkspace *ws, int n, int c, int hw, const float *dy,
                        float *db, bool accum)
{
    BiasJob j = {n, c, hw, bias_tasks(ws, n, c, hw), dy, db, accum};
    cpu_pool_run(ws->threads, j.tasks, bwd_task, &j);
}
