// optim_update_cuda.cu: the optimizer updates of bench_fused_optimizer on the GPU
// (optim_update.h). Per tensor: one kernel launch per parameter tensor (foreach=False's loop,
// each tensor's update fused into one kernel). Multi-tensor: PyTorch's multi_tensor_apply
// (aten/src/ATen/native/cuda/MultiTensorApply.cuh): a table of tensor addresses and sizes and,
// per block, the tensor and chunk of 65536 elements it updates, passed to the kernel by value;
// a launch when the table is full (48 tensors for SGD's three lists, 36 for AdamW's four, or
// 320 blocks), so one launch for all but the largest presets. The per-element arithmetic is
// one device function each, called by both kernels: the two ways agree bit for bit.
// Timed with CUDA events on the stream, the L2 warm (an update follows backward's writes).
#include "bench/fused_optimizer/optim_update.h"

#include <cuda_runtime.h>
#include <stdlib.h>

#include "bench/driver/gpu_timing.h"
#include "kernels/check.h"
#include "kernels/error.h"

#define MT_CHUNK 65536      // PyTorch's kChunkSize
#define MT_BLOCKS 320       // depth_to_max_blocks
#define MT_MAX_TENSORS 48   // depth_to_max_tensors[2] (SGD: params, grads, momentum buffers)
#define MT_ADAMW_TENSORS 36 // depth_to_max_tensors[3] (AdamW: params, grads, exp_avg, exp_avg_sq)
#define MT_THREADS 512      // PyTorch's kBlockSize
#define PT_THREADS 256

struct OptimCuda {
    cudaStream_t stream;
    GpuTimer timer;
    size_t floats;
    int state_per_param;
    float *params, *grads, *state;
};

// The arguments every element's update needs (AdamW's step scalars from the host, in double
// there as PyTorch's Python floats).
struct ElemArgs {
    OptimKind kind;
    float lr, momentum, wd;
    AdamwStep adamw;
    float *p, *buf, *m, *v;
    const float *g;
};

__device__ __forceinline__ void update_element(const ElemArgs &a, size_t i)
{
    if (a.kind == OPTIM_SGD) {
        float gi = a.g[i] + a.wd * a.p[i];
        a.buf[i] = a.momentum * a.buf[i] + gi;
        a.p[i] -= a.lr * a.buf[i];
        return;
    }
    const AdamwStep &s = a.adamw;
    float pi = a.p[i] * s.decay;
    float mi = a.m[i] + (1.0f - s.beta1) * (a.g[i] - a.m[i]);
    float vi = a.v[i] * s.beta2 + (1.0f - s.beta2) * a.g[i] * a.g[i];
    float denom = sqrtf(vi) / s.bc2_sqrt + s.eps;
    a.m[i] = mi;
    a.v[i] = vi;
    a.p[i] = pi - s.step_size * (mi / denom);
}

__global__ void per_tensor_kernel(ElemArgs a, size_t lo, size_t hi)
{
    for (size_t i = lo + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < hi; i += (size_t)gridDim.x * blockDim.x)
        update_element(a, i);
}

// One launch's table: tensors by offset and size, and per block its tensor and chunk.
struct MtTable {
    size_t offset[MT_MAX_TENSORS], count[MT_MAX_TENSORS];
    unsigned char block_tensor[MT_BLOCKS];
    int block_chunk[MT_BLOCKS];
};

__global__ void multi_tensor_kernel(ElemArgs a, MtTable t)
{
    int k = t.block_tensor[blockIdx.x];
    size_t lo = (size_t)t.block_chunk[blockIdx.x] * MT_CHUNK, n = t.count[k];
    size_t hi = lo + MT_CHUNK < n ? lo + MT_CHUNK : n;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) update_element(a, t.offset[k] + i);
}

static ElemArgs elem_args(OptimCuda *c, OptimKind kind, const OptimHyper *h, int step)
{
    ElemArgs a;
    a.kind = kind;
    a.lr = h->lr;
    a.momentum = h->momentum;
    a.wd = h->weight_decay;
    a.adamw = optim_adamw_step_of(h, step);
    a.p = c->params;
    a.g = c->grads;
    a.buf = c->state;
    a.m = c->state;
    a.v = c->state + c->floats;
    return a;
}

static int launch_table(const ElemArgs &a, const MtTable &t, int blocks, cudaStream_t s, int *launches)
{
    multi_tensor_kernel<<<blocks, MT_THREADS, 0, s>>>(a, t);
    CUDA_TRY(cudaGetLastError());
    (*launches)++;
    return 0;
}

// multi_tensor_apply: fills tables and launches each when its tensors or blocks run out.
static int multi_tensor_apply(const ElemArgs &a, const OptimTensor *tensors, int n, cudaStream_t s, int *launches)
{
    const int max_tensors = a.kind == OPTIM_ADAMW ? MT_ADAMW_TENSORS : MT_MAX_TENSORS;
    MtTable t;
    int nt = 0, blocks = 0;
    for (int i = 0; i < n; i++) {
        if (tensors[i].count == 0) continue;
        t.offset[nt] = tensors[i].offset;
        t.count[nt] = tensors[i].count;
        nt++;
        int chunks = (int)((tensors[i].count + MT_CHUNK - 1) / MT_CHUNK);
        for (int c = 0; c < chunks; c++) {
            t.block_tensor[blocks] = (unsigned char)(nt - 1);
            t.block_chunk[blocks] = c;
            blocks++;
            bool tensors_full = nt == max_tensors && c == chunks - 1;
            if (blocks < MT_BLOCKS && !tensors_full) continue;
            TRY(launch_table(a, t, blocks, s, launches));
            blocks = 0;
            if (c == chunks - 1) {
                nt = 0;
            } else {  // the tensor goes on in the next table
                t.offset[0] = t.offset[nt - 1];
                t.count[0] = t.count[nt - 1];
                nt = 1;
            }
        }
    }
    if (blocks > 0) TRY(launch_table(a, t, blocks, s, launches));
    return 0;
}

extern "C" int optim_cuda_step(OptimCuda *c, OptimKind kind, const OptimHyper *h, int step,
                               const OptimTensor *tensors, int n_tensors, bool multi_tensor, double *seconds,
                               int *launches)
{
    ElemArgs a = elem_args(c, kind, h, step);
    *launches = 0;
    TRY(gpu_timer_start(&c->timer, c->stream));
    if (multi_tensor) {
        TRY(multi_tensor_apply(a, tensors, n_tensors, c->stream, launches));
    } else {
        for (int i = 0; i < n_tensors; i++) {
            size_t n = tensors[i].count, blocks = (n + PT_THREADS - 1) / PT_THREADS;
            if (blocks > 4096) blocks = 4096;
            per_tensor_kernel<<<(unsigned)blocks, PT_THREADS, 0, c->stream>>>(a, tensors[i].offset,
                                                                                tensors[i].offset + n);
            CUDA_TRY(cudaGetLastError());
            (*launches)++;
        }
    }
    return gpu_timer_stop(&c->timer, c->stream, seconds);
}

extern "C" void optim_cuda_free(OptimCuda *c)
{
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    cudaFree(c->params);
    cudaFree(c->grads);
    cudaFree(c->state);
    gpu_timer_destroy(&c->timer);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" int optim_cuda_reset(OptimCuda *c, const float *params)
{
    CUDA_TRY(cudaMemcpyAsync(c->params, params, c->floats * sizeof(float), cudaMemcpyHostToDevice, c->stream));
    CUDA_TRY(cudaMemsetAsync(c->state, 0, c->floats * c->state_per_param * sizeof(float), c->stream));
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

static int setup(OptimCuda *c, const float *params, const float *grads)
{
    CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    TRY(gpu_timer_create(&c->timer));
    CUDA_TRY(cudaMalloc((void **)&c->params, c->floats * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&c->grads, c->floats * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&c->state, c->floats * c->state_per_param * sizeof(float)));
    CUDA_TRY(cudaMemcpy(c->grads, grads, c->floats * sizeof(float), cudaMemcpyHostToDevice));
    return optim_cuda_reset(c, params);
}

extern "C" int optim_cuda_create(const float *params, const float *grads, size_t floats, int state_per_param,
                                 OptimCuda **out)
{
    *out = NULL;
    OptimCuda *c = (OptimCuda *)calloc(1, sizeof *c);
    if (!c) return error_set(ERROR_OUT_OF_MEMORY, "optimizer: out of memory (host)");
    c->floats = floats;
    c->state_per_param = state_per_param;
    if (setup(c, params, grads) != 0) {
        optim_cuda_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

extern "C" int optim_cuda_read(OptimCuda *c, float *params, float *state)
{
    CUDA_TRY(cudaStreamSynchronize(c->stream));
    CUDA_TRY(cudaMemcpy(params, c->params, c->floats * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_TRY(cudaMemcpy(state, c->state, c->floats * c->state_per_param * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}
