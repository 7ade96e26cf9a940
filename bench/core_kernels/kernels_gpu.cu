// kernels_gpu.cu: bench_kernels' device side (kernels_gpu.h): buffers, our launchers or
// cuDNN's batch norm, CUDA-event timing after an L2 flush, outputs back to the host.
#include "bench/core_kernels/kernels_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/gpu_timing.h"
#include "kernels/check.h"
#include "kernels/error.h"
#include "kernels/layers_cuda.cuh"
#include "kernels/model.h"

// cuDNN 9 marks its batch-norm calls deprecated (in favour of the graph API); they are still
// what PyTorch's cudnn_batch_norm calls, so they are the comparison that matters.
#pragma nv_diag_suppress 1444
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

struct KbGpu {
    const KbCase *kc;
    DType dt;
    ChanGeom g;
    KbImpl impl;
    cudaStream_t s;
    GpuTimer timer;
    L2Flusher flush;
    bool timer_ok, flush_ok;
    void *x, *x2, *dy, *y, *dx;  // storage type, layout of g
    float *f32;                  // fp32 staging (count): uploads, downloads, the cast's source
    float *gamma, *beta, *mean, *invstd, *rm, *rv, *dg, *db, *scratch;
    cudnnHandle_t dnn;
    cudnnTensorDescriptor_t xdesc, pdesc;
    cudnnBatchNormMode_t mode;
    char note[160];
};

// Why cuDNN refused the last bf16 batch norm of this thread ("" when it did not): set by
// kb_gpu_create and kb_gpu_run, read through kb_gpu_cudnn_refusal.
static __thread char cudnn_refusal[256];

// cuDNN's legacy batch norm may reject bf16 (NCHW especially; PyTorch then runs its own
// kernel): a fact about the library, which the row reports as a skip naming cuDNN's status.
// Only the NOT_SUPPORTED and BAD_PARAM families (cuDNN 9: 3xxx and 2xxx) on bf16 count;
// anything else, or any status on fp32/fp16, stays a failure.
static int cudnn_check_bf16(const KbGpu *k, cudnnStatus_t s, const char *file, int line, const char *call)
{
    if (s == CUDNN_STATUS_SUCCESS) return 0;
    int family = (int)s / 1000;
    if (k->dt == DT_BF16 && (family == 2 || family == 3))
        snprintf(cudnn_refusal, sizeof cudnn_refusal, "cuDNN %d refuses bf16 batch norm (%s: %s, status %d)",
                 (int)cudnnGetVersion(), call, cudnnGetErrorString(s), (int)s);
    return check_cudnn_failed(s, file, line, call);
}
#define CUDNN_BF16_TRY(k, call) do { cudnnStatus_t s_ = (call); \
    if (s_ != CUDNN_STATUS_SUCCESS) return cudnn_check_bf16((k), s_, __FILE__, __LINE__, #call); } while (0)

const char *kb_gpu_cudnn_refusal(void) { return cudnn_refusal[0] ? cudnn_refusal : NULL; }

static DType storage_dtype(int storage) { return storage == 1 ? DT_F16 : storage == 2 ? DT_BF16 : DT_F32; }

void kb_gpu_free(KbGpu *k)
{
    if (!k) return;
    if (k->xdesc) cudnnDestroyTensorDescriptor(k->xdesc);
    if (k->pdesc) cudnnDestroyTensorDescriptor(k->pdesc);
    if (k->dnn) cudnnDestroy(k->dnn);
    if (k->timer_ok) gpu_timer_destroy(&k->timer);
    if (k->flush_ok) l2_flusher_destroy(&k->flush);
    void *bufs[] = {k->x, k->x2, k->dy, k->y, k->dx, k->f32, k->gamma, k->beta, k->mean,
                    k->invstd, k->rm, k->rv, k->dg, k->db, k->scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    if (k->s) cudaStreamDestroy(k->s);
    free(k);
}

const char *kb_gpu_note(const KbGpu *k) { return k ? k->note : ""; }

// A tensor of the storage type holding host fp32 NCHW h (NULL: uninitialised).
static int upload(KbGpu *k, const float *h, void **out)
{
    size_t count = k->kc->count;
    CUDA_TRY(cudaMalloc(out, count * dtype_size(k->dt)));
    if (!h) return 0;
    // on k->s, the stream the conversion reads it on: a pageable cudaMemcpy may return
    // before its DMA lands, and a non-blocking stream is not ordered after it
    CUDA_TRY(cudaMemcpyAsync(k->f32, h, count * sizeof(float), cudaMemcpyHostToDevice, k->s));
    TRY(cuda_convert_input(k->f32, *out, k->dt, k->g, k->s));
    CUDA_TRY(cudaStreamSynchronize(k->s));
    return 0;
}

static int upload_channel(KbGpu *k, const float *h, float **out)
{
    size_t bytes = (size_t)k->kc->c * sizeof(float);
    CUDA_TRY(cudaMalloc((void **)out, bytes));
    // on k->s and waited for: the kernels that read it run on that non-blocking stream
    if (h) CUDA_TRY(cudaMemcpyAsync(*out, h, bytes, cudaMemcpyHostToDevice, k->s));
    else CUDA_TRY(cudaMemsetAsync(*out, 0, bytes, k->s));
    CUDA_TRY(cudaStreamSynchronize(k->s));
    return 0;
}

static int cudnn_setup(KbGpu *k)
{
    KbKernel kern = k->kc->kernel;
    if (!kb_kernel_has_cudnn(kern))
        return error_set(ERROR_BAD_USAGE, "bench_kernels: cuDNN has no %s", kb_kernel_name(kern));
    CUDNN_TRY(cudnnCreate(&k->dnn));
    CUDNN_TRY(cudnnSetStream(k->dnn, k->s));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&k->xdesc));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&k->pdesc));
    CUDNN_BF16_TRY(k, cudnnSetTensor4dDescriptor(k->xdesc, k->g.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                                 dtype_cudnn(k->dt), k->g.n, k->g.c, k->g.hw, 1));
    // PyTorch: SPATIAL_PERSISTENT for channels_last training, SPATIAL otherwise
    k->mode = k->g.nhwc && kern != KB_BN_FWD_INFER ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT
                                                   : CUDNN_BATCHNORM_SPATIAL;
    CUDNN_BF16_TRY(k, cudnnDeriveBNTensorDescriptor(k->pdesc, k->xdesc, k->mode));
    return 0;
}

static cudnnStatus_t cudnn_call(KbGpu *k)
{
    const float one = 1.0f, zero = 0.0f;
    const double eps = (double)MODEL_BN_EPS;
    switch (k->kc->kernel) {
    case KB_BN_FWD_TRAIN:
        return cudnnBatchNormalizationForwardTraining(k->dnn, k->mode, &one, &zero, k->xdesc, k->x, k->xdesc,
                                                      k->y, k->pdesc, k->gamma, k->beta,
                                                      (double)MODEL_BN_MOMENTUM, k->rm, k->rv, eps, k->mean,
                                                      k->invstd);
    case KB_BN_FWD_INFER:
        return cudnnBatchNormalizationForwardInference(k->dnn, k->mode, &one, &zero, k->xdesc, k->x, k->xdesc,
                                                       k->y, k->pdesc, k->gamma, k->beta, k->rm, k->rv, eps);
    case KB_BN_BWD:
        return cudnnBatchNormalizationBackward(k->dnn, k->mode, &one, &zero, &one, &zero, k->xdesc, k->x,
                                               k->xdesc, k->dy, k->xdesc, k->dx, k->pdesc, k->gamma, k->dg,
                                               k->db, eps, k->mean, k->invstd);
    default: return CUDNN_STATUS_NOT_SUPPORTED;
    }
}

static int launch_cudnn(KbGpu *k)
{
    cudnnStatus_t st = cudnn_call(k);
    if (st == CUDNN_STATUS_NOT_SUPPORTED && k->mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT) {
        k->mode = CUDNN_BATCHNORM_SPATIAL;  // what PyTorch would fall back to as well
        CUDNN_BF16_TRY(k, cudnnDeriveBNTensorDescriptor(k->pdesc, k->xdesc, k->mode));
        st = cudnn_call(k);
    }
    CUDNN_BF16_TRY(k, st);
    snprintf(k->note, sizeof k->note, "cuDNN %d legacy batch norm, %s", (int)cudnnGetVersion(),
             k->mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT ? "CUDNN_BATCHNORM_SPATIAL_PERSISTENT"
                                                           : "CUDNN_BATCHNORM_SPATIAL");
    return 0;
}

static int launch(KbGpu *k)
{
    if (k->impl == KB_IMPL_CUDNN) return launch_cudnn(k);
    const DType dt = k->dt;
    const ChanGeom g = k->g;
    const size_t n = k->kc->count;
    cudaStream_t s = k->s;
    switch (k->kc->kernel) {
    case KB_BN_FWD_TRAIN:
        return cuda_bn_fwd_train(k->x, k->y, dt, g, k->gamma, k->beta, k->mean, k->invstd, k->rm, k->rv,
                                 k->scratch, s);
    case KB_BN_RELU_FWD_TRAIN:
        return cuda_bn_relu_fwd_train(k->x, k->y, dt, g, k->gamma, k->beta, k->mean, k->invstd, k->rm, k->rv,
                                      k->scratch, s);
    case KB_BN_FWD_INFER: return cuda_bn_fwd_infer(k->x, k->y, dt, g, k->gamma, k->beta, k->rm, k->rv, s);
    case KB_BN_BWD:
        return cuda_bn_bwd(k->x, k->dy, k->dx, false, dt, g, k->gamma, k->mean, k->invstd, k->dg, k->db, false,
                           k->scratch, s);
    case KB_BN_RELU_BWD:
        return cuda_bn_relu_bwd(k->x, k->y, k->dy, k->dx, false, dt, g, k->gamma, k->mean, k->invstd, k->dg,
                                k->db, false, k->scratch, s);
    case KB_RELU_FWD: return cuda_relu_fwd(k->x, k->y, dt, n, s);
    case KB_RELU_BWD: return cuda_relu_bwd(k->y, k->dy, k->dx, false, dt, n, s);
    case KB_ADD: return cuda_add_fwd(k->x, k->x2, k->y, dt, n, s);
    case KB_ADD_RELU: return cuda_add_relu_fwd(k->x, k->x2, k->y, dt, n, s);
    case KB_COPY_GRAD_ACCUM: return cuda_copy_grad(k->dy, k->dx, true, dt, n, s);
    case KB_CAST: return cuda_cast(k->f32, k->y, dt, n, s);
    case KB_COUNT: break;
    }
    return error_set(ERROR_BAD_USAGE, "bench_kernels: unknown kernel");
}

static int setup(KbGpu *k, int storage, bool nhwc)
{
    const KbCase *kc = k->kc;
    KbKernel kern = kc->kernel;
    bool bn = kb_kernel_is_bn(kern);
    k->dt = storage_dtype(storage);
    k->g = (ChanGeom){kc->n, kc->c, kc->hw, bn && nhwc};
    CUDA_TRY(cudaStreamCreateWithFlags(&k->s, cudaStreamNonBlocking));
    TRY(gpu_timer_create(&k->timer));
    k->timer_ok = true;
    TRY(l2_flusher_create(&k->flush));
    k->flush_ok = true;
    CUDA_TRY(cudaMalloc((void **)&k->f32, kc->count * sizeof(float)));
    TRY(upload(k, kc->x, &k->x));
    if (kc->x2) TRY(upload(k, kc->x2, &k->x2));
    if (kc->dy) TRY(upload(k, kc->dy, &k->dy));
    // y: the ReLU's / forward's output for the backward kernels, else an output
    TRY(upload(k, kern == KB_RELU_BWD || kern == KB_BN_RELU_BWD ? kc->y : NULL, &k->y));
    if (kc->dy) TRY(upload(k, kc->dx_init, &k->dx));
    if (kern == KB_CAST) {  // the source stays in the staging buffer (read on k->s)
        CUDA_TRY(cudaMemcpyAsync(k->f32, kc->x, kc->count * sizeof(float), cudaMemcpyHostToDevice, k->s));
        CUDA_TRY(cudaStreamSynchronize(k->s));
    }
    if (bn) {
        TRY(upload_channel(k, kc->gamma, &k->gamma));
        TRY(upload_channel(k, kc->beta, &k->beta));
        bool bwd = kern == KB_BN_BWD || kern == KB_BN_RELU_BWD;
        TRY(upload_channel(k, bwd ? kc->mean : NULL, &k->mean));
        TRY(upload_channel(k, bwd ? kc->invstd : NULL, &k->invstd));
        TRY(upload_channel(k, kc->running_mean, &k->rm));
        TRY(upload_channel(k, kc->running_var, &k->rv));
        TRY(upload_channel(k, NULL, &k->dg));
        TRY(upload_channel(k, NULL, &k->db));
        CUDA_TRY(cudaMalloc((void **)&k->scratch, cuda_bn_scratch_floats(k->g) * sizeof(float)));
    }
    if (k->impl == KB_IMPL_CUDNN) TRY(cudnn_setup(k));
    else snprintf(k->note, sizeof k->note, "ours (kernels/cuda/layers_cuda*.cu)");
    return 0;
}

int kb_gpu_create(const KbCase *kc, int storage, bool nhwc, KbImpl impl, KbGpu **out)
{
    *out = NULL;
    cudnn_refusal[0] = '\0';
    KbGpu *k = (KbGpu *)calloc(1, sizeof *k);
    if (!k) return error_set(ERROR_OUT_OF_MEMORY, "bench_kernels: host");
    k->kc = kc;
    k->impl = impl;
    if (setup(k, storage, nhwc) != 0) {
        kb_gpu_free(k);
        return -1;
    }
    *out = k;
    return 0;
}

int kb_gpu_run(KbGpu *k, double *seconds)
{
    cudnn_refusal[0] = '\0';
    TRY(gpu_timer_start_cold(&k->timer, &k->flush, k->s));
    TRY(launch(k));
    return gpu_timer_stop(&k->timer, k->s, seconds);
}

static int download(KbGpu *k, const void *d, float *h)
{
    TRY(cuda_convert_output(d, k->f32, k->dt, k->g, k->s));
    CUDA_TRY(cudaStreamSynchronize(k->s));
    CUDA_TRY(cudaMemcpy(h, k->f32, k->kc->count * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

int kb_gpu_outputs(KbGpu *k, float *out[KB_MAX_OUT])
{
    const KbCase *kc = k->kc;
    size_t cb = (size_t)kc->c * sizeof(float);
    CUDA_TRY(cudaStreamSynchronize(k->s));
    switch (kc->kernel) {
    case KB_BN_FWD_TRAIN:
    case KB_BN_RELU_FWD_TRAIN:
        CUDA_TRY(cudaMemcpy(out[1], k->mean, cb, cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(out[2], k->invstd, cb, cudaMemcpyDeviceToHost));
        return download(k, k->y, out[0]);
    case KB_BN_BWD:
    case KB_BN_RELU_BWD:
        CUDA_TRY(cudaMemcpy(out[1], k->dg, cb, cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(out[2], k->db, cb, cudaMemcpyDeviceToHost));
        return download(k, k->dx, out[0]);
    case KB_RELU_BWD:
    case KB_COPY_GRAD_ACCUM: return download(k, k->dx, out[0]);
    case KB_CAST:  // the download went through the staging buffer: put the source back
        TRY(download(k, k->y, out[0]));
        CUDA_TRY(cudaMemcpyAsync(k->f32, kc->x, kc->count * sizeof(float), cudaMemcpyHostToDevice, k->s));
        CUDA_TRY(cudaStreamSynchronize(k->s));
        return 0;
    default: return download(k, k->y, out[0]);
    }
}

int kb_peak_bandwidth(double *bytes_per_second, char *source, size_t source_size)
{
    int dev = 0, khz = 0, bits = 0;
    *bytes_per_second = 0.0;
    CUDA_TRY(cudaGetDevice(&dev));
    CUDA_TRY(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev));
    CUDA_TRY(cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    if (khz <= 0 || bits <= 0) {
        snprintf(source, source_size, "the device reports no memory clock or bus width");
        return -1;
    }
    *bytes_per_second = 2.0 * (double)khz * 1e3 * (double)bits / 8.0;
    snprintf(source, source_size, "device attributes: memory clock %d MHz x %d-bit bus x 2 (DDR) = %.0f GB/s",
             khz / 1000, bits, *bytes_per_second / 1e9);
    return 0;
}

int kb_device_name(char *name, size_t size)
{
    int dev = 0;
    cudaDeviceProp p;
    CUDA_TRY(cudaGetDevice(&dev));
    CUDA_TRY(cudaGetDeviceProperties(&p, dev));
    snprintf(name, size, "%s", p.name);
    return 0;
}
