// ddp_allreduce.c: allreduce/*, the collective micro as nccl-tests measures it, both its
// sides: the rank side (ddp_bench_worker_allreduce: one all-reduce of 8 B .. max bytes over
// NCCL (GPU) or Open MPI (CPU), in place and out of place, each from a barrier, with a data
// check of every element) and the benchmark side (ddp_bench_allreduce: time, algbw = bytes
// / time, busbw = algbw x 2(n-1)/n, wrong). With one GPU, NCCL's world is 1 (busbw 0).
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench/ddp/ddp_practice.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "dist/comm.h"
#include "dist/env.h"
#include "kernels/clock.h"
#include "kernels/core.h"
#include "kernels/error.h"

// ---- the rank side ----------------------------------------------------------------------

// The value element i of rank r sends: small integers, so every sum is exact in fp32.
static float pattern(size_t i, int rank) { return (float)((i % 13) + 1) * (float)(rank + 1); }

int ddp_bench_worker_allreduce(const WorkerArgs *a, const DistEnv *env, DistComm *comm)
{
    bool cuda = dist_comm_kind(comm) == DIST_COMM_NCCL;
    size_t max_count = (size_t)(a->max_bytes / 4);
    float *host = malloc(max_count * sizeof *host), *send = NULL, *recv = NULL;
    void *stream = NULL;
    if (!host) return error_set(ERROR_OUT_OF_MEMORY, "allreduce: out of memory");
    int rc = 0;
    if (cuda) {
        cudaStream_t s = NULL;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
            cudaMalloc((void **)&send, max_count * sizeof(float)) != cudaSuccess ||
            cudaMalloc((void **)&recv, max_count * sizeof(float)) != cudaSuccess)
            rc = error_set(ERROR_OUT_OF_MEMORY, "rank %d: allreduce buffers: out of device memory", env->rank);
        stream = s;
    } else {
        send = malloc(max_count * sizeof(float));
        recv = malloc(max_count * sizeof(float));
        if (!send || !recv) rc = error_set(ERROR_OUT_OF_MEMORY, "allreduce: out of memory");
    }
    double expect_factor = env->world * (env->world + 1) / 2.0;
    for (long long bytes = a->min_bytes; rc == 0 && bytes <= a->max_bytes; bytes *= 2) {
        size_t count = (size_t)bytes / 4;
        for (int inplace = 1; inplace >= 0 && rc == 0; inplace--) {
            float *dst = inplace ? send : recv;
            for (int it = 0; it < a->warmup + a->iterations && rc == 0; it++) {
                long long wrong = 0;
                for (size_t i = 0; i < count; i++) host[i] = pattern(i, env->rank);
                // on the stream the all-reduce runs on, then waited for: a pageable cudaMemcpy
                // on the legacy stream is not ordered before work on a non-blocking stream,
                // and the copy must not fall into the timed all-reduce
                if (cuda) {
                    cudaError_t e = cudaMemcpyAsync(send, host, count * 4, cudaMemcpyHostToDevice, (cudaStream_t)stream);
                    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);
                    if (e != cudaSuccess) rc = error_set(ERROR_LIBRARY, "copy: %s", cudaGetErrorString(e));
                } else {
                    memcpy(send, host, count * 4);
                }
                if (rc == 0) rc = dist_comm_barrier(comm);
                double t0 = clock_seconds();
                if (rc == 0) rc = dist_comm_allreduce(comm, send, dst, count, 1.0f, stream);
                if (rc == 0) rc = dist_comm_wait(comm, stream);
                double t = clock_seconds() - t0;
                if (rc != 0) break;
                // the data check, every iteration: each element must be the exact sum
                const float *got = dst;
                if (cuda) {
                    cudaError_t e = cudaMemcpyAsync(host, dst, count * 4, cudaMemcpyDeviceToHost, (cudaStream_t)stream);
                    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);
                    if (e != cudaSuccess) rc = error_set(ERROR_LIBRARY, "copy back: %s", cudaGetErrorString(e));
                    got = host;
                }
                for (size_t i = 0; rc == 0 && i < count; i++)
                    if (got[i] != (float)(((i % 13) + 1) * expect_factor)) wrong++;
                // every timed all-reduce is its own sample (the bench's repetitions take
                // distinct ones); a warm-up one is checked but not reported
                if (rc == 0 && it >= a->warmup && env->rank == 0)
                    printf("allreduce bytes=%lld inplace=%d seconds=%.9f wrong=%lld world=%d\n", bytes, inplace,
                           t, wrong, env->world);
            }
        }
    }
    if (cuda) { cudaFree(send); cudaFree(recv); if (stream) cudaStreamDestroy((cudaStream_t)stream); }
    else { free(send); free(recv); }
    free(host);
    return rc;
}

// ---- the benchmark side ------------------------------------------------------------------

// The collective micro: one worker run measures every size, `allreduce_iterations` timed
// all-reduces each; every run of an instance (a repetition) takes the next
// ALLREDUCE_PER_RUN of them, distinct samples, and a new worker run is made when a size's
// samples are used up. So repetitions are independent measurements, never copies.
enum { ALLREDUCE_PER_RUN = 2 };
static WorkerResult allreduce_result;
static int allreduce_used[2 * MAX_SIZES];  // samples of each size already reported
static int allreduce_state;  // 0: not run, 1: ok, -1: failed (message below)
static char allreduce_error[1024];
static ErrorKind allreduce_kind;
static int64_t allreduce_max_bytes;  // the resolved --allreduce_max_bytes

int64_t ddp_bench_allreduce_max_bytes(bool gpu)
{
    int64_t max_bytes = harness_option_int_value("allreduce_max_bytes");
    if (max_bytes == 0) max_bytes = gpu ? (int64_t)1 << 30 : (int64_t)16 << 20;
    allreduce_max_bytes = max_bytes;
    return max_bytes;
}

void ddp_bench_allreduce(HarnessState *st, void *user)
{
    bool inplace = *(const bool *)user;
    CoreBackend backend;
    if (!practice_backend(st, false, &backend)) return;
    int devices = (int)harness_option_int_value("devices_max");
    if (devices <= 0 || devices > ddp_bench_device_count(backend)) devices = ddp_bench_device_count(backend);
    if (backend != CORE_BACKEND_CUDA && devices < 2) devices = 2;  // MPI ranks can share a core
    long long bytes = harness_axis_int(st, "bytes");
    const WorkerResult *r = &allreduce_result;
    int k = -1;
    for (int i = 0; i < r->ar_count; i++) if (r->ar_bytes[i] == bytes && r->ar_inplace[i] == inplace) k = i;
    bool used_up = k >= 0 && allreduce_used[k] + ALLREDUCE_PER_RUN > r->ar_samples[k];
    if (allreduce_state == 0 || (allreduce_state > 0 && used_up)) {
        char args[256];
        snprintf(args, sizeof args, "allreduce --min-bytes=8 --max-bytes=%lld --iterations=%d --warmup=2",
                 (long long)allreduce_max_bytes, (int)harness_option_int_value("allreduce_iterations"));
        allreduce_state = ddp_bench_run_workers(devices, backend, args, &allreduce_result) == 0 ? 1 : -1;
        memset(allreduce_used, 0, sizeof allreduce_used);
        if (allreduce_state < 0) { allreduce_kind = error_kind(); snprintf(allreduce_error, sizeof allreduce_error, "%s", error_message()); }
        k = -1;
        for (int i = 0; i < r->ar_count; i++) if (r->ar_bytes[i] == bytes && r->ar_inplace[i] == inplace) k = i;
    }
    if (allreduce_state < 0) {
        error_restore(allreduce_kind, allreduce_error);
        practice_fail_or_skip(st, "all-reduce ranks");
        return;
    }
    if (k < 0) { harness_skip(st, "size outside --allreduce_max_bytes"); return; }
    int take = r->ar_samples[k] < ALLREDUCE_PER_RUN ? r->ar_samples[k] : ALLREDUCE_PER_RUN;
    if (take < 1 || allreduce_used[k] + take > r->ar_samples[k]) {
        harness_fail(st, "the ranks reported too few all-reduces of this size");
        return;
    }
    double seconds = 0.0;
    for (int i = 0; i < take; i++) seconds += r->ar_seconds[k][allreduce_used[k] + i];
    seconds /= take;
    allreduce_used[k] += take;
    while (harness_keep_running(st)) harness_set_iteration_time(st, seconds);
    double algbw = bytes / seconds / 1e9, n = r->world;
    harness_counter(st, "algbw_gbps", algbw, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "busbw_gbps", algbw * 2.0 * (n - 1) / n, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wrong", (double)r->ar_wrong[k], HARNESS_COUNTER_PLAIN);
    harness_counter(st, "world", n, HARNESS_COUNTER_PLAIN);
    char label[320];
    snprintf(label, sizeof label, "%s all-reduce (sum, fp32), world %d%s; wall clock from a barrier to completion, mean of %d all-reduces per repetition",
             backend == CORE_BACKEND_CUDA ? "NCCL" : "Open MPI", r->world,
             backend == CORE_BACKEND_CUDA && r->world == 1 ? " (one GPU: busbw is 0 by definition)" : "", take);
    harness_set_label(st, label);
    if (r->ar_wrong[k] > 0) harness_fail(st, "all-reduce results are wrong (see the wrong counter)");
}
