// amp_conv.cu: the convolution micro benchmark's passes on the core's cuDNN plans (amp_conv.h).
#include "bench/amp/amp_conv.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/amp/amp_fill.cuh"
#include "bench/amp/amp_probe.h"
#include "kernels/check.h"
#include "kernels/conv_cudnn.cuh"
#include "kernels/error.h"

struct AmpConv {
    ConvShape shape;
    DType dt;
    bool nhwc;
    ConvPlan plan;
    cudnnHandle_t dnn;
    cudaStream_t stream;
    cudaEvent_t start, stop;
    void *x, *y, *w, *dx, *dw, *ws;  // (N, C, H, W), (N, K, P, Q), KCRS or KRSC, dx like x, dw like w
    size_t ws_size;
};

static DType conv_dtype(CorePrecision p)
{
    return p == CORE_PRECISION_FP16 ? DT_F16 : p == CORE_PRECISION_BF16 ? DT_BF16 : DT_F32;
}

double amp_conv_flops(const ConvShape *s)
{
    return 2.0 * s->n * s->k * s->p * s->q * (double)s->c * s->r * s->r;
}

void amp_conv_free(AmpConv *c)
{
    if (!c) return;
    conv_plan_destroy(&c->plan);
    if (c->dnn) cudnnDestroy(c->dnn);
    if (c->start) cudaEventDestroy(c->start);
    if (c->stop) cudaEventDestroy(c->stop);
    if (c->stream) cudaStreamDestroy(c->stream);
    void *bufs[] = {c->x, c->y, c->w, c->dx, c->dw, c->ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    free(c);
}

static int setup(AmpConv *c, CorePrecision p, CoreLayout l)
{
    const ConvShape *s = &c->shape;
    size_t e = dtype_size(c->dt);
    size_t nx = (size_t)s->n * s->c * s->h * s->w, ny = (size_t)s->n * s->k * s->p * s->q;
    size_t nw = (size_t)s->k * s->c * s->r * s->r;
    CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreate(&c->start));
    CUDA_TRY(cudaEventCreate(&c->stop));
    CUDA_TRY(cudaMalloc(&c->x, nx * e));
    CUDA_TRY(cudaMalloc(&c->dx, nx * e));
    CUDA_TRY(cudaMalloc(&c->y, ny * e));
    CUDA_TRY(cudaMalloc(&c->w, nw * e));
    CUDA_TRY(cudaMalloc(&c->dw, nw * e));
    TRY(amp_fill(c->x, nx, c->dt, 11, c->stream));
    TRY(amp_fill(c->y, ny, c->dt, 12, c->stream));  // also dy of the backward passes
    TRY(amp_fill(c->w, nw, c->dt, 13, c->stream));
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    CUDNN_TRY(cudnnCreate(&c->dnn));
    CUDNN_TRY(cudnnSetStream(c->dnn, c->stream));
    int device = 0;
    CUDA_TRY(cudaGetDevice(&device));
    // As the benchmarks' core: heuristics, non-deterministic algorithms allowed (PyTorch's
    // default), the core's default 256 MiB workspace limit.
    ConvKey key = conv_key_make(device, s, c->dt, l == CORE_LAYOUT_NHWC, p, CORE_CONV_ALGO_HEURISTIC,
                                false, (size_t)256 << 20);
    ConvTuneStats stats = {0.0, 0, 0};
    // the trials write dx, y and dw; y is filled again below
    ConvTrialBuffers trial = {c->dx, c->y, c->w, c->dw};
    TRY(conv_plan_set(&c->plan, c->dnn, &key, &trial, &stats));
    TRY(amp_fill(c->y, ny, c->dt, 12, c->stream));
    c->ws_size = c->plan.ws_fwd;
    if (c->plan.ws_bwd_data > c->ws_size) c->ws_size = c->plan.ws_bwd_data;
    if (c->plan.ws_bwd_filter > c->ws_size) c->ws_size = c->plan.ws_bwd_filter;
    CUDA_TRY(cudaMalloc(&c->ws, c->ws_size ? c->ws_size : 1));
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

int amp_conv_create(const ConvShape *s, CorePrecision p, CoreLayout l, AmpConv **out)
{
    *out = NULL;
    AmpConv *c = (AmpConv *)calloc(1, sizeof *c);
    if (!c) return error_set(ERROR_OUT_OF_MEMORY, "amp_conv: out of memory (host)");
    c->shape = *s;
    c->dt = conv_dtype(p);
    c->nhwc = l == CORE_LAYOUT_NHWC;
    if (setup(c, p, l) != 0) {
        amp_conv_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int amp_conv_time(AmpConv *c, ConvPass pass, double *seconds)
{
    CUDA_TRY(cudaEventRecord(c->start, c->stream));
    if (pass == CONV_PASS_FWD) TRY(conv_forward(&c->plan, c->dnn, c->x, c->w, c->y, c->ws, c->ws_size));
    else if (pass == CONV_PASS_BWD_DATA)
        TRY(conv_backward_data(&c->plan, c->dnn, c->w, c->y, c->dx, false, c->ws, c->ws_size));
    else TRY(conv_backward_filter(&c->plan, c->dnn, c->x, c->y, c->dw, false, c->ws, c->ws_size));
    CUDA_TRY(cudaEventRecord(c->stop, c->stream));
    CUDA_TRY(cudaEventSynchronize(c->stop));
    float ms = 0.0f;
    CUDA_TRY(cudaEventElapsedTime(&ms, c->start, c->stop));
    *seconds = 1e-3 * ms;
    return 0;
}

void amp_conv_algo(const AmpConv *c, ConvPass pass, char *buf, size_t size)
{
    const ConvAlgos *a = &c->plan.algos;
    int algo = pass == CONV_PASS_FWD ? (int)a->fwd : pass == CONV_PASS_BWD_DATA ? (int)a->bwd_data : (int)a->bwd_filter;
    cudnnMathType_t math = pass == CONV_PASS_FWD ? a->fwd_math : pass == CONV_PASS_BWD_DATA ? a->bwd_data_math
                                                                                           : a->bwd_filter_math;
    snprintf(buf, size, "%s/%s", conv_algo_name(pass, algo), conv_math_name(math));
}

double amp_conv_tolerance(CorePrecision p)
{
    return p == CORE_PRECISION_BF16 ? 3e-2 : p == CORE_PRECISION_FP16 ? 1e-2 : 5e-3;
}

// Storage index of element (n, c, h, w) of an (N, C, H, W) tensor in either layout; the
// filter (K, C, R, R) is stored KCRS, or KRSC in NHWC (cuDNN's filter formats).
static size_t at(bool nhwc, int n, int c, int h, int w, int C, int H, int W)
{
    return nhwc ? (((size_t)n * H + h) * W + w) * C + c : (((size_t)n * C + c) * H + h) * W + w;
}

static int read_value(const void *p, size_t i, DType t, double *v)
{
    if (t == DT_F32) {
        float f = 0.0f;
        CUDA_TRY(cudaMemcpy(&f, (const float *)p + i, sizeof f, cudaMemcpyDeviceToHost));
        *v = f;
    } else if (t == DT_F16) {
        __half h;
        CUDA_TRY(cudaMemcpy(&h, (const __half *)p + i, sizeof h, cudaMemcpyDeviceToHost));
        *v = __half2float(h);
    } else {
        __nv_bfloat16 h;
        CUDA_TRY(cudaMemcpy(&h, (const __nv_bfloat16 *)p + i, sizeof h, cudaMemcpyDeviceToHost));
        *v = __bfloat162float(h);
    }
    return 0;
}

double amp_conv_input_value(const ConvShape *s, bool nhwc, int n, int c, int h, int w)
{
    return amp_operand_int(11, at(nhwc, n, c, h, w, s->c, s->h, s->w)) / 64.0;
}

double amp_conv_filter_value(const ConvShape *s, bool nhwc, int k, int c, int r, int t)
{
    return amp_operand_int(13, at(nhwc, k, c, r, t, s->c, s->r, s->r)) / 64.0;
}

void amp_conv_exact(const ConvShape *s, bool nhwc, int n, int k, int p, int q, int64_t *exact,
                    int64_t *magnitude)
{
    *exact = *magnitude = 0;
    for (int ch = 0; ch < s->c; ch++)
        for (int r = 0; r < s->r; r++)
            for (int t = 0; t < s->r; t++) {
                int h = p * s->stride - s->pad + r, w = q * s->stride - s->pad + t;
                if (h < 0 || h >= s->h || w < 0 || w >= s->w) continue;  // zero padding
                int64_t prod = (int64_t)amp_operand_int(11, at(nhwc, n, ch, h, w, s->c, s->h, s->w)) *
                               amp_operand_int(13, at(nhwc, k, ch, r, t, s->c, s->r, s->r));
                *exact += prod;
                *magnitude += prod < 0 ? -prod : prod;
            }
}

int amp_conv_check_forward(AmpConv *c, int samples, double *max_err)
{
    const ConvShape *s = &c->shape;
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    double worst = 0.0;
    for (int i = 0; i < samples; i++) {
        // an output entry spread by a hash (the first: the corner, where padding matters)
        int n = i ? (int)((uint64_t)(amp_operand_int(21, (uint64_t)i) + 64) * (uint64_t)(s->n - 1) / 128) : 0;
        int k = i ? (int)((uint64_t)(amp_operand_int(22, (uint64_t)i) + 64) * (uint64_t)(s->k - 1) / 128) : 0;
        int p = i ? (int)((uint64_t)(amp_operand_int(23, (uint64_t)i) + 64) * (uint64_t)(s->p - 1) / 128) : 0;
        int q = i ? (int)((uint64_t)(amp_operand_int(24, (uint64_t)i) + 64) * (uint64_t)(s->q - 1) / 128) : 0;
        int64_t exact = 0, magnitude = 0;  // in units of 1/4096
        amp_conv_exact(s, c->nhwc, n, k, p, q, &exact, &magnitude);
        double got = 0.0;
        TRY(read_value(c->y, at(c->nhwc, n, k, p, q, s->k, s->p, s->q), c->dt, &got));
        double err = fabs(got - exact / 4096.0) / (magnitude > 0 ? magnitude / 4096.0 : 1.0);
        if (isnan(err)) {  // a NaN fails whatever else was seen
            worst = err;
            break;
        }
        if (err > worst) worst = err;
    }
    *max_err = worst;
    return 0;
}

// ---- the strict-fp32 probe --------------------------------------------------------------------

static __global__ void probe_fill_kernel(float *p, size_t count, uint64_t which)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        p[i] = amp_probe_value(which, i);
}

int amp_conv_probe_forward(AmpConv *c, int samples, double *max_err)
{
    if (c->dt != DT_F32) return error_set(ERROR_BAD_USAGE, "amp_conv_probe_forward: fp32 storage only");
    const ConvShape *s = &c->shape;
    size_t nx = (size_t)s->n * s->c * s->h * s->w, nw = (size_t)s->k * s->c * s->r * s->r;
    probe_fill_kernel<<<grid_for(nx), CUDA_THREADS, 0, c->stream>>>((float *)c->x, nx, 41);
    probe_fill_kernel<<<grid_for(nw), CUDA_THREADS, 0, c->stream>>>((float *)c->w, nw, 43);
    CUDA_TRY(cudaGetLastError());
    TRY(conv_forward(&c->plan, c->dnn, c->x, c->w, c->y, c->ws, c->ws_size));
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    double worst = 0.0;
    for (int i = 0; i < samples; i++) {
        int n = i ? (int)((uint64_t)(amp_operand_int(21, (uint64_t)i) + 64) * (uint64_t)(s->n - 1) / 128) : 0;
        int k = i ? (int)((uint64_t)(amp_operand_int(22, (uint64_t)i) + 64) * (uint64_t)(s->k - 1) / 128) : 0;
        int p = i ? (int)((uint64_t)(amp_operand_int(23, (uint64_t)i) + 64) * (uint64_t)(s->p - 1) / 128) : 0;
        int q = i ? (int)((uint64_t)(amp_operand_int(24, (uint64_t)i) + 64) * (uint64_t)(s->q - 1) / 128) : 0;
        double exact = 0.0, magnitude = 0.0;
        for (int ch = 0; ch < s->c; ch++)
            for (int r = 0; r < s->r; r++)
                for (int t = 0; t < s->r; t++) {
                    int h = p * s->stride - s->pad + r, w = q * s->stride - s->pad + t;
                    if (h < 0 || h >= s->h || w < 0 || w >= s->w) continue;  // zero padding
                    double prod = (double)amp_probe_value(41, at(c->nhwc, n, ch, h, w, s->c, s->h, s->w)) *
                                  amp_probe_value(43, at(c->nhwc, k, ch, r, t, s->c, s->r, s->r));
                    exact += prod;
                    magnitude += fabs(prod);
                }
        double got = 0.0;
        TRY(read_value(c->y, at(c->nhwc, n, k, p, q, s->k, s->p, s->q), c->dt, &got));
        double err = fabs(got - exact) / (magnitude > 0 ? magnitude : 1.0);
        if (isnan(err) || err > worst) worst = err;
    }
    // the usual operands back, for the timed passes (y is also the backward passes' dy)
    TRY(amp_fill(c->x, nx, c->dt, 11, c->stream));
    TRY(amp_fill(c->w, nw, c->dt, 13, c->stream));
    TRY(amp_fill(c->y, (size_t)s->n * s->k * s->p * s->q, c->dt, 12, c->stream));
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    *max_err = worst;
    return 0;
}
