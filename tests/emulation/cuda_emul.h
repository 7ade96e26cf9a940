// cuda_emul.h: runs CUDA kernels on the host, one std::thread per CUDA thread of a block,
// blocks one after another; __syncthreads = block barrier, shuffles through per-warp
// slots with warp barriers. For checking kernel logic without a GPU (slow; small shapes).
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <pthread.h>
#include <math.h>
#include <string.h>
#include <thread>
#include <vector>
#include <mutex>
#include <functional>

#undef __global__
#define __global__
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)
#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim

namespace emul {
extern thread_local uint3 threadIdx_, blockIdx_;
extern dim3 blockDim_, gridDim_;
extern pthread_barrier_t block_bar;
extern pthread_barrier_t warp_bar[32];
extern float slots_f[32][32];
extern int slots_i[32][32];
extern std::vector<char> dyn_smem;
extern std::mutex atomic_mu;

struct Launch {
    dim3 grid, block;
    size_t smem;
    template <class F, class... A> void operator()(F kernel, A... args)
    {
        blockDim_ = block;
        gridDim_ = grid;
        unsigned nt = block.x * block.y * block.z;
        dyn_smem.assign(smem + 16, 0);
        pthread_barrier_init(&block_bar, NULL, nt);
        for (unsigned w = 0; w < (nt + 31) / 32; w++) pthread_barrier_init(&warp_bar[w], NULL, 32);
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < nt; t++)
            ts.emplace_back([=]() {
                threadIdx_ = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                for (unsigned bz = 0; bz < grid.z; bz++)
                    for (unsigned by = 0; by < grid.y; by++)
                        for (unsigned bx = 0; bx < grid.x; bx++) {
                            blockIdx_ = {bx, by, bz};
                            kernel(args...);
                            pthread_barrier_wait(&block_bar);
                        }
            });
        for (auto &t : ts) t.join();
        pthread_barrier_destroy(&block_bar);
        for (unsigned w = 0; w < (nt + 31) / 32; w++) pthread_barrier_destroy(&warp_bar[w]);
    }
};
inline Launch launch(dim3 g, dim3 b, size_t smem = 0, cudaStream_t = 0) { return Launch{g, b, smem}; }
inline unsigned tid() { return threadIdx_.x + blockDim_.x * (threadIdx_.y + blockDim_.y * threadIdx_.z); }
template <class T> T *dynamic_smem() { return (T *)dyn_smem.data(); }
}  // namespace emul

#define threadIdx emul::threadIdx_
#define blockIdx emul::blockIdx_
#define blockDim emul::blockDim_
#define gridDim emul::gridDim_

inline void __syncthreads() { pthread_barrier_wait(&emul::block_bar); }
inline float __shfl_down_sync(unsigned, float v, int o)
{
    unsigned t = emul::tid(), w = t / 32, lane = t % 32;
    emul::slots_f[w][lane] = v;
    pthread_barrier_wait(&emul::warp_bar[w]);
    float r = lane + o < 32 ? emul::slots_f[w][lane + o] : v;
    pthread_barrier_wait(&emul::warp_bar[w]);
    return r;
}
inline int __shfl_down_sync(unsigned, int v, int o)
{
    unsigned t = emul::tid(), w = t / 32, lane = t % 32;
    emul::slots_i[w][lane] = v;
    pthread_barrier_wait(&emul::warp_bar[w]);
    int r = lane + o < 32 ? emul::slots_i[w][lane + o] : v;
    pthread_barrier_wait(&emul::warp_bar[w]);
    return r;
}
inline float emul_atomic_add(float *p, float v) { std::lock_guard<std::mutex> g(emul::atomic_mu); float o = *p; *p += v; return o; }
inline int emul_atomic_add(int *p, int v) { std::lock_guard<std::mutex> g(emul::atomic_mu); int o = *p; *p += v; return o; }
#define atomicAdd emul_atomic_add
inline float emul_rsqrtf(float x) { return 1.0f / sqrtf(x); }
#define rsqrtf emul_rsqrtf
inline cudaError_t emul_memcpy_async(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) { memmove(d, s, n); return cudaSuccess; }
#define cudaMemcpyAsync emul_memcpy_async
inline cudaError_t emul_last_error() { return cudaSuccess; }
#define cudaGetLastError emul_last_error
