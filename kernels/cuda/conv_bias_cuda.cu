// conv_bias_cuda.cu: the convolution bias kernels of conv_bias_cuda.cuh.
// Forward: one grid-stride pass, y += b[channel of element]. Backward: partial sums per
// (split, channel) - NCHW: one block per (channel, split) walking its contiguous planes;
// NHWC: one block per (32 adjacent channels, split), a warp's lanes on adjacent channels so
// that every load is coalesced - then a finishing pass over the splits in order.
#include "kernels/conv_bias_cuda.cuh"

#include "kernels/check.h"

#define GRID_STRIDE(i, total) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (total); \
         i += (size_t)gridDim.x * blockDim.x)

// Blocks the partial pass aims for (a few per SM of a large GPU), the fewest rows a split
// may have, and the most splits.
#define BIAS_TARGET_BLOCKS 512
#define BIAS_MIN_ROWS 1024
#define BIAS_MAX_SPLITS 1024
#define NHWC_TILE 32  // channels per NHWC block (one per lane)
#define NHWC_ROWS 8   // rows a NHWC block walks at once (its warps)

__global__ void conv_bias_add_kernel(void *y, const float *b, DType dt, ChanGeom g, size_t total)
{
    GRID_STRIDE(i, total) st(y, i, dt, ld(y, i, dt) + b[chan_of(g, i)]);
}

int cuda_conv_bias_add(void *y, const float *b, DType dt, ChanGeom g, cudaStream_t s)
{
    size_t total = (size_t)g.n * g.c * g.hw;
    if (total == 0) return 0;
    conv_bias_add_kernel<<<grid_for(total), CUDA_THREADS, 0, s>>>(y, b, dt, g, total);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

static int bias_splits(ChanGeom g)
{
    size_t rows = (size_t)g.n * g.hw;
    size_t tiles = g.nhwc ? (size_t)(g.c + NHWC_TILE - 1) / NHWC_TILE : (size_t)g.c;
    if (tiles < 1) tiles = 1;
    size_t splits = (BIAS_TARGET_BLOCKS + tiles - 1) / tiles;
    size_t most = rows / BIAS_MIN_ROWS;
    if (splits > most) splits = most;
    if (splits > BIAS_MAX_SPLITS) splits = BIAS_MAX_SPLITS;
    return splits < 1 ? 1 : (int)splits;
}

size_t cuda_conv_bias_scratch_floats(ChanGeom g) { return (size_t)bias_splits(g) * (size_t)g.c; }

// Rows [lo, hi) of split s of `rows`.
__device__ __forceinline__ void split_range(size_t rows, int s, int splits, size_t *lo, size_t *hi)
{
    *lo = rows * (size_t)s / (size_t)splits;
    *hi = rows * (size_t)(s + 1) / (size_t)splits;
}

// NCHW: block (channel, split); rows j = image * HW + pixel, contiguous within a plane.
__global__ void conv_bias_part_nchw(const void *dy, DType dt, ChanGeom g, int splits, float *part)
{
    int c = blockIdx.x, s = blockIdx.y;
    size_t lo, hi;
    split_range((size_t)g.n * g.hw, s, splits, &lo, &hi);
    float sum = 0.0f;
    for (size_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
        size_t img = j / (size_t)g.hw, pix = j % (size_t)g.hw;
        sum += ld(dy, (img * g.c + c) * g.hw + pix, dt);
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) part[(size_t)s * g.c + c] = sum;
}

// NHWC: block (tile of NHWC_TILE channels, split), threads (lane = channel, row).
__global__ void conv_bias_part_nhwc(const void *dy, DType dt, ChanGeom g, int splits, float *part)
{
    __shared__ float rows_sum[NHWC_ROWS][NHWC_TILE + 1];
    int c = blockIdx.x * NHWC_TILE + threadIdx.x, s = blockIdx.y;
    size_t lo, hi;
    split_range((size_t)g.n * g.hw, s, splits, &lo, &hi);
    float sum = 0.0f;
    if (c < g.c)
        for (size_t j = lo + threadIdx.y; j < hi; j += NHWC_ROWS) sum += ld(dy, j * g.c + c, dt);
    rows_sum[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < g.c) {
        float t = 0.0f;
        for (int r = 0; r < NHWC_ROWS; r++) t += rows_sum[r][threadIdx.x];
        part[(size_t)s * g.c + c] = t;
    }
}

__global__ void conv_bias_finish(const float *part, float *db, bool accum, int c, int splits)
{
    GRID_STRIDE(ch, (size_t)c) {
        float t = 0.0f;
        for (int s = 0; s < splits; s++) t += part[(size_t)s * c + ch];
        db[ch] = accum ? db[ch] + t : t;
    }
}

int cuda_conv_bias_grad(const void *dy, float *db, bool accum, DType dt, ChanGeom g,
                        float *scratch, cudaStream_t s)
{
    if (g.c <= 0) return 0;
    int splits = bias_splits(g);
    if (g.nhwc) {
        dim3 grid((unsigned)((g.c + NHWC_TILE - 1) / NHWC_TILE), (unsigned)splits);
        conv_bias_part_nhwc<<<grid, dim3(NHWC_TILE, NHWC_ROWS), 0, s>>>(dy, dt, g, splits, scratch);
    } else {
        conv_bias_part_nchw<<<dim3((unsigned)g.c, (unsigned)splits), CUDA_THREADS, 0, s>>>(
            dy, dt, g, splits, scratch);
    }
    CUDA_TRY(cudaGetLastError());
    conv_bias_finish<<<grid_for((size_t)g.c), CUDA_THREADS, 0, s>>>(scratch, db, accum, g.c, splits);
    CUDA_TRY(cudaGetLastError());
    return 0;
}
