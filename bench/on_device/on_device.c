// on_device.c: building tensors on the host and copying them, or on the device (on_device.h).
#include "bench/on_device/on_device.h"

#include <string.h>

#include "kernels/check.h"
#include "kernels/error.h"

#define BUILDER_SEED 0x5eedull

int tensor_builder_create(TensorBuilder *b, TensorKind kind, TensorBuild build, size_t bytes)
{
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->build = build;
    b->bytes = bytes;
    b->seed = BUILDER_SEED;
    if (bytes == 0 || bytes % 4 != 0)
        return error_set(ERROR_BAD_USAGE, "tensor of %zu bytes: want a positive multiple of 4", bytes);
    if (kind == TENSOR_NORMAL && bytes < 8)
        return error_set(ERROR_BAD_USAGE, "a random tensor of one value: its check needs at least 2");
    if (build != BUILT_DEVICE)
        TRY(host_buffer_alloc(&b->host, build == BUILT_HOST_PINNED ? HOST_PINNED : HOST_PAGEABLE, bytes));
    CUDA_TRY(cudaMalloc(&b->device, bytes));
    CUDA_TRY(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    return 0;
}

// What torch.randn(n) / torch.zeros(n) / torch.arange(n) do on the CPU.
static void build_on_host(TensorBuilder *b)
{
    size_t n = b->bytes / 4;
    switch (b->kind) {
    case TENSOR_NORMAL: fill_host_normal(b->host.ptr, n, b->seed, b->draws); break;
    case TENSOR_ZEROS: memset(b->host.ptr, 0, b->bytes); break;
    case TENSOR_ARANGE: fill_host_arange(b->host.ptr, n); break;
    }
}

static int build_on_device(TensorBuilder *b)
{
    size_t n = b->bytes / 4;
    switch (b->kind) {
    case TENSOR_NORMAL: return device_fill_normal(b->device, n, b->seed, b->draws, b->stream);
    case TENSOR_ZEROS: CUDA_TRY(cudaMemsetAsync(b->device, 0, b->bytes, b->stream)); return 0;
    case TENSOR_ARANGE: return device_fill_arange(b->device, n, b->stream);
    }
    return error_set(ERROR_BAD_USAGE, "unknown tensor kind %d", (int)b->kind);
}

int tensor_builder_run(TensorBuilder *b)
{
    if (b->build == BUILT_DEVICE) {
        TRY(build_on_device(b));
    } else {
        build_on_host(b);
        // .cuda() is a copy on the current stream that the host waits for; from pageable
        // memory the driver stages the bytes through its own pinned buffer
        CUDA_TRY(cudaMemcpyAsync(b->device, b->host.ptr, b->bytes, cudaMemcpyHostToDevice, b->stream));
    }
    CUDA_TRY(cudaStreamSynchronize(b->stream));
    b->draws++;
    return 0;
}

int tensor_builder_check(TensorBuilder *b, int64_t *wrong, NormalCheck *normal)
{
    *wrong = 0;
    memset(normal, 0, sizeof *normal);
    HostBuffer back = {0};
    TRY(host_buffer_alloc(&back, HOST_PAGEABLE, b->bytes));
    int rc = 0;
    cudaError_t e = cudaMemsetAsync(b->device, 0xff, b->bytes, b->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(b->stream);
    if (e != cudaSuccess) rc = check_cuda_failed(e, __FILE__, __LINE__, "poisoning the tensor");
    if (rc == 0) rc = tensor_builder_run(b);
    if (rc == 0 && (e = cudaMemcpy(back.ptr, b->device, b->bytes, cudaMemcpyDeviceToHost)) != cudaSuccess)
        rc = check_cuda_failed(e, __FILE__, __LINE__, "copying the tensor back");
    if (rc == 0) {
        switch (b->kind) {
        case TENSOR_NORMAL:
            *normal = check_normal(back.ptr, b->bytes / 4);
            *wrong = !normal->ok;
            break;
        case TENSOR_ZEROS: *wrong = (int64_t)check_zeros(back.ptr, b->bytes); break;
        case TENSOR_ARANGE: *wrong = (int64_t)check_arange(back.ptr, b->bytes / 4); break;
        }
    }
    host_buffer_free(&back);
    return rc;
}

void tensor_builder_free(TensorBuilder *b)
{
    host_buffer_free(&b->host);
    if (b->device) cudaFree(b->device);
    if (b->stream) cudaStreamDestroy(b->stream);
    b->device = NULL;
    b->stream = NULL;
}
