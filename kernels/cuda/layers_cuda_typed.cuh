// layers_cuda_typed.cuh: what the files of our CUDA layer kernels share (private to
// kernels/cuda/): the typed storage (fp32, fp16 or bf16 at compile time, 16-byte vector
// accesses), the dispatch on a DType, the grid-stride loop and the launch sizes.
// The kernels: layers_cuda.cu (casts, layouts, element-wise, pooling, linear, loss) and
// layers_cuda_bn.cu (batch normalisation).
#ifndef KERNELS_CUDA_LAYERS_CUDA_TYPED_CUH
#define KERNELS_CUDA_LAYERS_CUDA_TYPED_CUH

#include <stdint.h>

#include "kernels/layers_cuda.cuh"

#define GRID_STRIDE(i, total) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (total); \
         i += (size_t)gridDim.x * blockDim.x)

// ---- typed storage ----
// Every element-wise kernel is a template over its storage type (float, __half,
// __nv_bfloat16): the DType is dispatched once per launch (DISPATCH_DT), never per element.
// Arithmetic is fp32; fp16/bf16 pairs convert with the paired intrinsics. A thread moves V
// elements per access, V * sizeof(T) = 16 bytes (one 128-bit load or store), when every
// pointer of the launch is 16-byte aligned; otherwise the same kernel runs with V = 1.

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

// V elements of T moved as one access (16-byte aligned when it spans 16 bytes or more).
template <typename T, int V>
struct alignas(sizeof(T) * V >= 16 ? 16 : sizeof(T) * V) Pack { T v[V]; };

// The paired 16-bit types and their two-at-a-time conversion to fp32 (float has none).
template <typename T> struct Pair { static constexpr bool kHas = false; };
template <> struct Pair<__half> {
    static constexpr bool kHas = true;
    typedef __half2 Type;
    static __device__ __forceinline__ float2 to_f2(Type v) { return __half22float2(v); }
};
template <> struct Pair<__nv_bfloat16> {
    static constexpr bool kHas = true;
    typedef __nv_bfloat162 Type;
    static __device__ __forceinline__ float2 to_f2(Type v) { return __bfloat1622float2(v); }
};

template <typename T, int V>
__device__ __forceinline__ void unpack(const Pack<T, V> &p, float (&f)[V])
{
    if constexpr (Pair<T>::kHas && V % 2 == 0) {
#pragma unroll
        for (int k = 0; k < V; k += 2) {
            float2 t = Pair<T>::to_f2(*reinterpret_cast<const typename Pair<T>::Type *>(&p.v[k]));
            f[k] = t.x;
            f[k + 1] = t.y;
        }
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) f[k] = to_f(p.v[k]);
    }
}

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> pack(const float (&f)[V])
{
    Pack<T, V> p;
#pragma unroll
    for (int k = 0; k < V; k++) p.v[k] = from_f<T>(f[k]);
    return p;
}

// Loads V elements starting at element i (i a multiple of V when V > 1) as fp32.
template <typename T, int V>
__device__ __forceinline__ void load_v(const T *p, size_t i, float (&f)[V])
{
    unpack(*reinterpret_cast<const Pack<T, V> *>(p + i), f);
}
template <typename T, int V>
__device__ __forceinline__ void store_v(T *p, size_t i, const float (&f)[V])
{
    *reinterpret_cast<Pack<T, V> *>(p + i) = pack<T, V>(f);
}

template <typename T> struct VecWidth { static constexpr int value = 16 / (int)sizeof(T); };

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// Runs STMT with T the storage type of dt.
#define DISPATCH_DT(dt, T, ...)                                      \
    do {                                                             \
        switch (dt) {                                                \
        case DT_F16: { typedef __half T; __VA_ARGS__; } break;       \
        case DT_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break; \
        default: { typedef float T; __VA_ARGS__; } break;            \
        }                                                            \
    } while (0)

// Blocks of CUDA_THREADS for n threads.
static inline unsigned blocks_for(int n) { return (unsigned)((n + CUDA_THREADS - 1) / CUDA_THREADS); }

#endif
