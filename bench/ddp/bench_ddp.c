// bench_ddp.c: DistributedDataParallel (one process per device, bucketed all-reduce
// overlapped with backward) against DataParallel (one process driving every device), and
// the all-reduce underneath, as nccl-tests measures it.
// ddp_scaling/*: images/s and step time of `steps` training steps at a fixed per-device
//   batch (weak scaling) for 1 process (role reference), DataParallel over N (baseline)
//   and DDP over N (tuned), N = 1 .. the devices (GPUs; CPU cores on the CPU backend,
//   where DataParallel is threads and DDP is MPI ranks); efficiency = images/s(N) /
//   (N x images/s(1)), images/s(1) measured in the same run (one process, the same steps,
//   timed apart), never taken from another row: random interleaving runs rows in any
//   order. Each DDP row's parameters are checked against DataParallel's with the same
//   axes (same per-device batches, steps and start): a DataParallel row's, or when none
//   has run yet, a DataParallel training the DDP run does itself, untimed.
// ddp_overlap/*: DDP over the most devices with the all-reduce overlapped with backward
//   (tuned) or after it (baseline), per bucket cap (1, 5, 25 MiB, 0 = all in one);
//   hidden_ms = the non-overlapped step - the overlapped one, both measured by the same
//   ranks in the overlapped run (not_overlapped_step_ms, right after its timed iterations).
// allreduce/*: one all-reduce of 8 B .. max bytes over NCCL (GPU) or Open MPI (CPU), in
//   place and out of place: time, algbw = bytes / time, busbw = algbw x 2(n-1)/n, and a
//   data check of every element (wrong). With one GPU, NCCL's world is 1 (busbw 0).
// DDP ranks and the collective runs are this program again, started per measurement with
// `--ddp-worker=...` through the local spawner (mpirun for CPU ranks; forked ranks with a
// TCP rendezvous for NCCL); each rank times from a barrier, rank 0 reports.
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "dist/comm.h"
#include "dist/data_parallel.h"
#include "dist/ddp.h"
#include "dist/env.h"
#include "dist/spawn.h"
#include "kernels/clock.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"
#include "kernels/synth.h"

enum { MAX_ITERS = 64, MAX_SIZES = 40 };

// ---- the worker: one rank of a DDP run or of the collective micro ----------------------

typedef struct WorkerArgs {
    const char *mode;      // "train" or "allreduce"
    int nproc;             // > 0: spawn this many ranks of ourselves first
    CoreBackend backend;
    const char *preset;
    int local_batch, steps, iterations, warmup;
    bool overlap;
    bool also_not_overlapped; // train: then time the same steps with overlap off (hidden_ms)
    double bucket_mib, first_bucket_mib;
    long long min_bytes, max_bytes;
    int timeout_ms;
    const char *params_out; // train: rank 0 writes the final parameters here (fp32, raw)
} WorkerArgs;

static int parse_worker(int argc, char **argv, WorkerArgs *a)
{
    *a = (WorkerArgs){.backend = CORE_BACKEND_CPU, .preset = "tiny", .local_batch = 8, .steps = 5,
                      .iterations = 3, .warmup = 2, .overlap = true, .bucket_mib = 25, .first_bucket_mib = 1,
                      .min_bytes = 8, .max_bytes = 1 << 20, .timeout_ms = 120000};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        char *v = strchr(s, '=');
        if (!v) return error_set(ERROR_BAD_USAGE, "worker: bad argument '%s' (expected --name=value)", s);
        v++;
        int iv = 0;
#define INT_ARG(flag, field, lo, hi) \
    if (strncmp(s, flag "=", strlen(flag) + 1) == 0) { TRY(dist_parse_int(v, flag, lo, hi, &iv)); a->field = iv; continue; }
        if (strncmp(s, "--ddp-worker=", 13) == 0) { a->mode = v; continue; }
        if (strncmp(s, "--backend=", 10) == 0) { if (core_backend_parse(v, &a->backend) != 0) return error_set(ERROR_BAD_USAGE, "worker: --backend=%s", v); continue; }
        if (strncmp(s, "--preset=", 9) == 0) { a->preset = v; continue; }
        if (strncmp(s, "--params-out=", 13) == 0) { a->params_out = v; continue; }
        INT_ARG("--nproc-per-node", nproc, 1, 4096)
        INT_ARG("--local-batch", local_batch, 1, 1 << 20)
        INT_ARG("--steps", steps, 1, 1 << 20)
        INT_ARG("--iterations", iterations, 1, MAX_ITERS)
        INT_ARG("--warmup", warmup, 0, 1000)
        INT_ARG("--overlap", overlap, 0, 1)
        INT_ARG("--also-not-overlapped", also_not_overlapped, 0, 1)
        INT_ARG("--timeout-ms", timeout_ms, 1, INT_MAX)
#undef INT_ARG
        if (strncmp(s, "--bucket-mib=", 13) == 0) { a->bucket_mib = atof(v); continue; }
        if (strncmp(s, "--first-bucket-mib=", 19) == 0) { a->first_bucket_mib = atof(v); continue; }
        if (strncmp(s, "--min-bytes=", 12) == 0) { a->min_bytes = atoll(v); continue; }
        if (strncmp(s, "--max-bytes=", 12) == 0) { a->max_bytes = atoll(v); continue; }
        return error_set(ERROR_BAD_USAGE, "worker: unknown argument '%s'", s);
    }
    if (!a->mode || (strcmp(a->mode, "train") != 0 && strcmp(a->mode, "allreduce") != 0))
        return error_set(ERROR_BAD_USAGE, "worker: --ddp-worker must be train or allreduce");
    if (a->min_bytes < 4 || a->max_bytes < a->min_bytes)
        return error_set(ERROR_BAD_USAGE, "worker: need 4 <= --min-bytes <= --max-bytes");
    return 0;
}

// Host batch of rank `rank`: the synthetic task's samples [rank*n, rank*n + n).
static int make_batch(const CoreConfig *cfg, int n, int rank, float **images, int32_t **labels)
{
    SynthTask task = {cfg->model.in_channels, cfg->model.image_size, cfg->model.num_classes, 0.5f, 1};
    size_t per = (size_t)task.channels * task.image_size * task.image_size;
    *images = malloc((size_t)n * per * sizeof **images);
    *labels = malloc((size_t)n * sizeof **labels);
    if (!*images || !*labels) return error_set(ERROR_OUT_OF_MEMORY, "batch: out of memory");
    for (int i = 0; i < n; i++) synth_batch(&task, (uint64_t)rank * n + i, 1, *images + i * per, *labels + i);
    return 0;
}

static int write_params(Core *core, const char *path)
{
    size_t np = core_param_count(core);
    float *p = malloc(np * sizeof *p);
    if (!p) return error_set(ERROR_OUT_OF_MEMORY, "params: out of memory");
    int rc = core_params_get(core, p, np);
    FILE *f = rc == 0 ? fopen(path, "wb") : NULL;
    if (rc == 0 && (!f || fwrite(p, sizeof *p, np, f) != np)) rc = error_set(ERROR_IO, "cannot write %s", path);
    if (f && fclose(f) != 0 && rc == 0) rc = error_set(ERROR_IO, "cannot write %s", path);
    free(p);
    return rc;
}

// `iterations` timed iterations of `steps` DDP steps, each from a barrier to a synchronize;
// rank 0 prints "<tag> seconds=S" for each.
static int timed_ddp_iterations(Ddp *ddp, Core *core, DistComm *comm, const CoreBatch *b, int global_batch,
                                int steps, int iterations, int rank, const char *tag)
{
    int rc = 0;
    for (int it = 0; it < iterations && rc == 0; it++) {
        rc = dist_comm_barrier(comm);
        double t0 = clock_seconds();
        for (int s = 0; s < steps && rc == 0; s++) rc = ddp_step(ddp, b, global_batch, NULL);
        if (rc == 0) rc = core_sync(core);
        if (rc == 0 && rank == 0) printf("%s seconds=%.9f\n", tag, clock_seconds() - t0);
    }
    return rc;
}

static int worker_train(const WorkerArgs *a, const DistEnv *env, DistComm *comm)
{
    CoreConfig cfg;
    TRY(core_config_preset(&cfg, a->preset));
    cfg.backend = a->backend;
    cfg.device = a->backend == CORE_BACKEND_CUDA ? env->local_rank : 0;
    cfg.batch_size = a->local_batch * env->world;
    float *images = NULL;
    int32_t *labels = NULL;
    Core *core = NULL;
    Ddp *ddp = NULL;
    DdpConfig dc = {.bucket_cap_bytes = (size_t)(a->bucket_mib * 1048576.0),
                    .first_bucket_bytes = (size_t)(a->first_bucket_mib * 1048576.0), .overlap = a->overlap,
                    .accumulation_steps = 1};
    int rc = -1;
    if (make_batch(&cfg, a->local_batch, env->rank, &images, &labels) == 0 && core_create(&cfg, &core) == 0 &&
        ddp_create(core, comm, &dc, &ddp) == 0) {
        CoreBatch b = {images, labels, a->local_batch, CORE_MEMORY_HOST};
        rc = 0;
        // an untimed iteration first, as the in-process variants do (also the bucket rebuild)
        for (int s = 0; s < a->steps && rc == 0; s++) rc = ddp_step(ddp, &b, cfg.batch_size, NULL);
        DdpStats before;
        ddp_stats(ddp, &before);
        if (rc == 0)
            rc = timed_ddp_iterations(ddp, core, comm, &b, cfg.batch_size, a->steps, a->iterations, env->rank,
                                      "ddp_iteration");
        DdpStats st;
        ddp_stats(ddp, &st);
        if (rc == 0 && env->rank == 0) {
            int steps = st.steps - before.steps;
            printf("ddp_summary buckets=%d largest_bucket_bytes=%zu param_count=%zu wait_ms_per_step=%.6f comm_ms_per_step=%.6f\n",
                   st.buckets, st.largest_bucket, core_param_count(core),
                   (st.wait_ms - before.wait_ms) / steps, (st.comm_ms - before.comm_ms) / steps);
        }
        if (rc == 0 && env->rank == 0 && a->params_out) rc = write_params(core, a->params_out);
        if (rc == 0 && a->also_not_overlapped) {  // the same steps, all-reduce after backward
            ddp_free(ddp);
            ddp = NULL;
            DdpConfig after = dc;
            after.overlap = false;
            rc = ddp_create(core, comm, &after, &ddp);
            for (int s = 0; s < a->steps && rc == 0; s++) rc = ddp_step(ddp, &b, cfg.batch_size, NULL);
            if (rc == 0)
                rc = timed_ddp_iterations(ddp, core, comm, &b, cfg.batch_size, a->steps, a->iterations, env->rank,
                                          "ddp_not_overlapped_iteration");
        }
    }
    ddp_free(ddp);
    core_free(core);
    free(images);
    free(labels);
    return rc;
}

// The value element i of rank r sends: small integers, so every sum is exact in fp32.
static float pattern(size_t i, int rank) { return (float)((i % 13) + 1) * (float)(rank + 1); }

static int worker_allreduce(const WorkerArgs *a, const DistEnv *env, DistComm *comm)
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

static int worker_main(int argc, char **argv)
{
    WorkerArgs a;
    if (parse_worker(argc, argv, &a) != 0) {
        fprintf(stderr, "bench_ddp: %s\n", error_message());
        return 2;
    }
    DistEnv env;
    if (dist_env_detect(&env) != 0) {
        fprintf(stderr, "bench_ddp: %s\n", error_message());
        return 2;
    }
    if (a.nproc > 0 && env.launch == DIST_LAUNCH_SINGLE) {  // the launcher: start the ranks
        char **args = calloc((size_t)argc + 1, sizeof *args);
        int n = 0;
        for (int i = 0; i < argc && args; i++)
            if (strncmp(argv[i], "--nproc-per-node=", 17) != 0) args[n++] = argv[i];
        DistSpawnConfig sc = {.nproc = a.nproc, .use_mpirun = a.backend != CORE_BACKEND_CUDA, .grace_ms = 3000};
        int rc = args ? dist_spawn_local(&sc, args) : -1;
        if (rc < 0) fprintf(stderr, "bench_ddp: %s\n", error_message());
        free(args);
        return rc == 0 ? 0 : 1;
    }
    // On the CPU a device is a core: one compute thread per rank, as DataParallel's one per
    // replica (at N = the cores this is dist_cpus_per_rank). The ranks run unbound (see
    // dist/spawn.c), so the communication thread is not tied to its rank's compute core.
    if (a.backend != CORE_BACKEND_CUDA) core_cpu_set_threads(1);
    if (env.rank != 0) (void)!freopen("/dev/null", "w", stdout);
    DistComm *comm = NULL;
    int rc = dist_comm_create(&env, a.backend == CORE_BACKEND_CUDA ? DIST_COMM_NCCL : DIST_COMM_MPI,
                              a.backend == CORE_BACKEND_CUDA ? env.local_rank : 0, a.timeout_ms, &comm);
    if (rc == 0) rc = strcmp(a.mode, "train") == 0 ? worker_train(&a, &env, comm) : worker_allreduce(&a, &env, comm);
    if (rc != 0) {
        fprintf(stderr, "bench_ddp rank %d: %s\n", env.rank, error_message());
        fflush(stderr);
        if (comm) dist_comm_abort(comm, 1);  // the other ranks must not wait for us
        return 1;
    }
    fflush(stdout);
    dist_comm_free(comm);
    return 0;
}

// ---- the benchmark side ------------------------------------------------------------------

static const char *self_exe(void)
{
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n > 0 ? n : 0] = '\0';
    return path;
}

// What a worker run printed.
typedef struct WorkerResult {
    double seconds[MAX_ITERS];
    int iterations;
    double not_overlapped_seconds[MAX_ITERS]; // --also-not-overlapped=1: the same ranks, overlap off
    int not_overlapped_iterations;
    int buckets;
    double wait_ms, comm_ms, param_count;
    long long ar_bytes[2 * MAX_SIZES];
    int ar_inplace[2 * MAX_SIZES];
    double ar_seconds[2 * MAX_SIZES][MAX_ITERS]; // every timed all-reduce of this size
    int ar_samples[2 * MAX_SIZES];
    long long ar_wrong[2 * MAX_SIZES];
    int ar_count, world;
} WorkerResult;

// Runs `nproc` ranks of ourselves with args; fills r from rank 0's lines.
static int run_workers(int nproc, CoreBackend backend, const char *args, WorkerResult *r)
{
    memset(r, 0, sizeof *r);
    // setup installs Open MPI: without it this is a failure (a skip only under the GPU check)
    if (backend != CORE_BACKEND_CUDA && system("command -v mpirun >/dev/null 2>&1") != 0)
        return error_set(ERROR_MISSING_TOOL, "missing tool: mpirun not found: CPU ranks need Open MPI (install openmpi-bin)");
    char cmd[PATH_MAX + 1024];
    snprintf(cmd, sizeof cmd, "'%s' --ddp-worker=%s --nproc-per-node=%d --backend=%s --timeout-ms=%d", self_exe(),
             args, nproc, core_backend_name(backend), (int)harness_option_int_value("timeout") * 1000);
    FILE *p = popen(cmd, "r");
    if (!p) return error_set(ERROR_LIBRARY, "cannot start the ranks: %s", cmd);
    char line[512];
    while (fgets(line, sizeof line, p)) {
        double s;
        long long bytes, wrong;
        int inplace, world;
        if (sscanf(line, "ddp_iteration seconds=%lf", &s) == 1 && r->iterations < MAX_ITERS) {
            r->seconds[r->iterations++] = s;
        } else if (sscanf(line, "ddp_not_overlapped_iteration seconds=%lf", &s) == 1 &&
                   r->not_overlapped_iterations < MAX_ITERS) {
            r->not_overlapped_seconds[r->not_overlapped_iterations++] = s;
        } else if (sscanf(line, "ddp_summary buckets=%d largest_bucket_bytes=%*u param_count=%lf wait_ms_per_step=%lf comm_ms_per_step=%lf",
                          &r->buckets, &r->param_count, &r->wait_ms, &r->comm_ms) == 4) {
        } else if (sscanf(line, "allreduce bytes=%lld inplace=%d seconds=%lf wrong=%lld world=%d", &bytes, &inplace, &s,
                          &wrong, &world) == 5) {
            int k = r->ar_count - 1;  // sizes come in order, each with its samples
            if (k < 0 || r->ar_bytes[k] != bytes || r->ar_inplace[k] != inplace) {
                if (r->ar_count == 2 * MAX_SIZES) continue;
                k = r->ar_count++;
                r->ar_bytes[k] = bytes; r->ar_inplace[k] = inplace;
            }
            if (r->ar_samples[k] < MAX_ITERS) r->ar_seconds[k][r->ar_samples[k]++] = s;
            r->ar_wrong[k] += wrong;
            r->world = world;
        }
    }
    int status = pclose(p);
    if (status != 0) return error_set(ERROR_LIBRARY, "the %d ranks failed (exit status %d; their errors are above): %s",
                                      nproc, status, cmd);
    return 0;
}

// Devices this backend has: GPUs, or the CPUs this process may use.
static int device_count(CoreBackend b)
{
    if (b == CORE_BACKEND_CUDA) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) { (void)cudaGetLastError(); n = 0; }
        return n;
    }
    return core_cpu_threads();
}

typedef enum { SCALE_SINGLE, SCALE_DATA_PARALLEL, SCALE_DDP } ScaleVariant;

// DataParallel's final parameters per (preset, batch, devices, backend, steps, iterations):
// the DDP run with the same axes trains the same per-device batches for the same steps
// from the same start, so its parameters must agree. They do not depend on timing, so any
// DataParallel run's serve; a DDP run that finds none (random interleaving ran it first)
// trains DataParallel itself, untimed.
#define DDP_CHECK_TOLERANCE 1e-4  // relative L2 of the difference: only summation orders differ
enum { MAX_CHECKS = 64 };
static char dp_params_key[MAX_CHECKS][128];
static float *dp_params[MAX_CHECKS];
static size_t dp_params_count[MAX_CHECKS];
static int dp_params_n;

static void check_key(HarnessState *st, const CoreConfig *cfg, int local_batch, int devices, int steps,
                      int iterations, char *key, size_t size)
{
    snprintf(key, size, "%s/%d/%d/%s/%d/%d", harness_axis_str(st, "preset"), local_batch, devices,
             core_backend_name(cfg->backend), steps, iterations);
}

// Keeps a DataParallel run's final parameters for the DDP runs' check (takes params).
static void keep_dp_params(const char *key, float *params, size_t count)
{
    for (int k = 0; k < dp_params_n; k++)
        if (strcmp(dp_params_key[k], key) == 0) {
            free(dp_params[k]);
            dp_params[k] = params;
            dp_params_count[k] = count;
            return;
        }
    int k = dp_params_n < MAX_CHECKS ? dp_params_n++ : MAX_CHECKS - 1;  // full: the last slot turns over
    if (k == MAX_CHECKS - 1) free(dp_params[k]);
    snprintf(dp_params_key[k], sizeof dp_params_key[k], "%s", key);
    dp_params[k] = params;
    dp_params_count[k] = count;
}

static int dp_params_index(const char *key)
{
    for (int k = 0; k < dp_params_n; k++)
        if (strcmp(dp_params_key[k], key) == 0) return k;
    return -1;
}

// One process, DataParallel over N: `steps` steps per timed iteration, in this process.
static int run_in_process(CoreConfig cfg, int devices, int local_batch, int steps, int iterations,
                          bool data_parallel, WorkerResult *r, size_t *peak0, size_t *peak_other,
                          float **params, size_t *params_count)
{
    memset(r, 0, sizeof *r);
    int n = local_batch * devices;
    cfg.batch_size = n;
    if (cfg.backend != CORE_BACKEND_CUDA) core_cpu_set_threads(1);  // one core per device
    float *images = NULL;
    int32_t *labels = NULL;
    Core *core = NULL;
    DataParallel *dp = NULL;
    int rc = make_batch(&cfg, n, 0, &images, &labels);
    if (rc == 0) rc = data_parallel ? dp_create(&cfg, devices, &dp) : core_create(&cfg, &core);
    CoreBatch b = {images, labels, n, CORE_MEMORY_HOST};
    for (int it = -1; it < iterations && rc == 0; it++) {  // -1: warm-up
        double t0 = clock_seconds();
        for (int s = 0; s < steps && rc == 0; s++) rc = data_parallel ? dp_step(dp, &b, NULL) : core_step(core, &b, NULL);
        if (rc == 0) rc = core_sync(data_parallel ? dp_core(dp) : core);
        if (it >= 0) r->seconds[r->iterations++] = clock_seconds() - t0;
    }
    if (rc == 0 && data_parallel) {  // CUDA: the device's used growth; CPU: the core's own peak
        bool cuda = cfg.backend == CORE_BACKEND_CUDA;
        size_t peak = 0, used = 0;
        rc = dp_replica_memory(dp, 0, &peak, &used);
        *peak0 = cuda ? used : peak;
        if (rc == 0 && devices > 1) rc = dp_replica_memory(dp, 1, &peak, &used);
        *peak_other = devices > 1 ? (cuda ? used : peak) : 0;
    }
    if (rc == 0 && params) {  // the final parameters, for the check of DDP against this run
        Core *trained = data_parallel ? dp_core(dp) : core;
        size_t np = core_param_count(trained);
        *params = malloc(np * sizeof **params);
        *params_count = np;
        if (!*params) rc = error_set(ERROR_OUT_OF_MEMORY, "params: out of memory");
        else if (core_params_get(trained, *params, np) != 0) { free(*params); *params = NULL; rc = -1; }
    }
    dp_free(dp);
    core_free(core);
    free(images);
    free(labels);
    core_cpu_set_threads(harness_common()->threads);
    return rc;
}

// images/s of one process at the per-device batch, measured now (the same steps and
// iterations, timed apart from the row's own): the yardstick of this run's efficiency.
// 0 with the error set when it fails.
static double single_throughput(CoreConfig cfg, int local_batch, int steps, int iterations)
{
    WorkerResult r;
    if (run_in_process(cfg, 1, local_batch, steps, iterations, false, &r, NULL, NULL, NULL, NULL) != 0) return 0;
    double total = 0;
    for (int i = 0; i < r.iterations; i++) total += r.seconds[i];
    if (!(total > 0)) return error_set(ERROR_LIBRARY, "one process: no time measured"), 0;
    return (double)local_batch * steps * r.iterations / total;
}

// Reports fixed-iteration times measured elsewhere (a worker run) through the harness.
static void report_iterations(HarnessState *st, const WorkerResult *r)
{
    int i = 0;
    while (harness_keep_running(st)) harness_set_iteration_time(st, r->seconds[i < r->iterations - 1 ? i++ : i]);
}

static void bench_scaling(HarnessState *st, void *user)
{
    ScaleVariant v = *(const ScaleVariant *)user;
    CoreBackend backend;
    if (!practice_backend(st, false, &backend)) return;
    CoreConfig cfg;
    if (practice_config(st, backend, NULL, &cfg) != 0) { practice_fail_or_skip(st, "the preset"); return; }
    int local_batch = cfg.batch_size;
    int devices = (int)harness_axis_int(st, "devices");
    int have = device_count(backend);
    if (devices > have) {
        char why[128];
        snprintf(why, sizeof why, "%d %s wanted, %d here", devices, backend == CORE_BACKEND_CUDA ? "GPUs" : "CPU cores", have);
        harness_skip(st, why);
        return;
    }
    if (v == SCALE_SINGLE && devices != 1) { harness_skip(st, "one process is the devices=1 row"); return; }
    int steps = (int)harness_option_int_value("steps"), iterations = (int)harness_max_iterations(st);
    WorkerResult r;
    size_t peak0 = 0, peak_other = 0, np = 0, dp_np = 0;
    float *params = NULL;
    char key[160], params_path[128];
    check_key(st, &cfg, local_batch, devices, steps, iterations, key, sizeof key);
    snprintf(params_path, sizeof params_path, "/tmp/bench_ddp_params_%d.bin", (int)getpid());
    int rc;
    if (v == SCALE_DDP) {
        char args[512];
        snprintf(args, sizeof args, "train --preset=%s --local-batch=%d --steps=%d --iterations=%d --params-out=%s",
                 harness_axis_str(st, "preset"), local_batch, steps, iterations, params_path);
        rc = run_workers(devices, backend, args, &r);
        if (rc == 0 && r.iterations != iterations) rc = error_set(ERROR_LIBRARY, "the ranks reported %d of %d iterations", r.iterations, iterations);
        np = (size_t)r.param_count;
        FILE *f = rc == 0 ? fopen(params_path, "rb") : NULL;
        params = np ? malloc(np * sizeof *params) : NULL;
        if (rc == 0 && (!f || !params || fread(params, sizeof *params, np, f) != np))
            rc = error_set(ERROR_IO, "cannot read the DDP ranks' parameters from %s", params_path);
        if (f) fclose(f);
        unlink(params_path);
    } else {
        rc = run_in_process(cfg, devices, local_batch, steps, iterations, v == SCALE_DATA_PARALLEL, &r, &peak0,
                            &peak_other, v == SCALE_DATA_PARALLEL ? &params : NULL, &dp_np);
        if (rc == 0 && params) {
            keep_dp_params(key, params, dp_np);
            params = NULL;
        }
    }
    if (rc != 0) { free(params); practice_fail_or_skip(st, v == SCALE_DDP ? "DDP ranks" : "training"); return; }
    if (v == SCALE_DDP) {  // the check against DataParallel: never silently left out
        int k = dp_params_index(key);
        if (k < 0) {  // no DataParallel run with these axes yet: train one now, untimed
            WorkerResult untimed;
            size_t p0, p1;
            float *dp = NULL;
            if (run_in_process(cfg, devices, local_batch, steps, iterations, true, &untimed, &p0, &p1, &dp, &dp_np) != 0) {
                free(params);
                practice_fail_or_skip(st, "the check against DataParallel could not run: DataParallel's training");
                return;
            }
            keep_dp_params(key, dp, dp_np);
            k = dp_params_index(key);
        }
        if (k < 0 || dp_params_count[k] != np) {
            char why[200];
            snprintf(why, sizeof why, "the check against DataParallel could not run: %zu DDP parameters, %zu of DataParallel's",
                     np, k < 0 ? (size_t)0 : dp_params_count[k]);
            free(params);
            harness_fail(st, why);
            return;
        }
        {
            double diff = 0, norm = 0;
            for (size_t i = 0; i < np; i++) {
                double d = (double)params[i] - dp_params[k][i];
                diff += d * d;
                norm += (double)dp_params[k][i] * dp_params[k][i];
            }
            double rel = sqrt(diff / (norm > 0 ? norm : 1));
            harness_counter(st, "param_rel_l2_vs_data_parallel", rel, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "wrong", rel > DDP_CHECK_TOLERANCE, HARNESS_COUNTER_PLAIN);
            if (!(rel <= DDP_CHECK_TOLERANCE)) {
                char why[200];
                snprintf(why, sizeof why, "DDP's parameters differ from DataParallel's: relative L2 %.3g > %g", rel,
                         DDP_CHECK_TOLERANCE);
                free(params);
                harness_fail(st, why);
                return;
            }
        }
    }
    free(params);
    double total = 0;
    for (int i = 0; i < r.iterations; i++) total += r.seconds[i];
    double images_per_s = (double)local_batch * devices * steps * r.iterations / total;
    double one = v == SCALE_SINGLE ? images_per_s : single_throughput(cfg, local_batch, steps, iterations);
    if (!(one > 0)) { practice_fail_or_skip(st, "one process (the yardstick of scaling_efficiency)"); return; }
    report_iterations(st, &r);
    harness_counter(st, "step_ms", 1e3 * total / (r.iterations * steps), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "images_per_second", images_per_s, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "global_batch", local_batch * devices, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "scaling_efficiency", images_per_s / (devices * one), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "one_process_images_per_second", one, HARNESS_COUNTER_PLAIN);
    if (v == SCALE_DATA_PARALLEL) {
        harness_counter(st, "device0_mib", peak0 / 1048576.0, HARNESS_COUNTER_PLAIN);
        if (devices > 1) harness_counter(st, "device1_mib", peak_other / 1048576.0, HARNESS_COUNTER_PLAIN);
    }
    if (v == SCALE_DDP) harness_counter(st, "buckets", r.buckets, HARNESS_COUNTER_PLAIN);
    bool gpu = backend == CORE_BACKEND_CUDA;
    char label[256];
    snprintf(label, sizeof label, "%s: %s, %d per device x %d, %d steps per iteration; wall clock%s",
             core_backend_name(backend),
             v == SCALE_SINGLE ? "one process" : v == SCALE_DATA_PARALLEL ? (gpu ? "DataParallel, one thread per GPU" : "DataParallel, one thread per core")
                                : (gpu ? "DDP over NCCL, one process per GPU" : "DDP over Open MPI, one rank per core"),
             local_batch, devices, steps, v == SCALE_DDP ? ", rank 0 from a barrier" : "");
    harness_set_label(st, label);
}

static void bench_overlap(HarnessState *st, void *user)
{
    bool overlap = *(const bool *)user;
    CoreBackend backend;
    if (!practice_backend(st, false, &backend)) return;
    CoreConfig cfg;
    if (practice_config(st, backend, NULL, &cfg) != 0) { practice_fail_or_skip(st, "the preset"); return; }
    int local_batch = cfg.batch_size;
    int devices = (int)harness_option_int_value("devices_max");
    if (devices <= 0) devices = device_count(backend);
    if (devices > device_count(backend)) devices = device_count(backend);
    if (devices < 1) { harness_skip(st, "no devices"); return; }
    int64_t bucket_mib = harness_axis_int(st, "bucket_mib");
    int steps = (int)harness_option_int_value("overlap_steps"), iterations = (int)harness_max_iterations(st);
    char args[256];
    // the overlapped run also times the same steps with overlap off, on the same ranks:
    // hidden_ms compares two measurements of one run, never another row's
    snprintf(args, sizeof args, "train --preset=%s --local-batch=%d --steps=%d --iterations=%d --overlap=%d --bucket-mib=%lld --first-bucket-mib=%s --also-not-overlapped=%d",
             harness_axis_str(st, "preset"), local_batch, steps, iterations, overlap ? 1 : 0, (long long)bucket_mib,
             bucket_mib == 0 ? "0" : "1", overlap ? 1 : 0);
    WorkerResult r;
    if (run_workers(devices, backend, args, &r) != 0 || r.iterations != iterations ||
        (overlap && r.not_overlapped_iterations != iterations)) {
        if (error_kind() == ERROR_NONE)
            error_set(ERROR_LIBRARY, "the ranks reported %d of %d iterations (%d not overlapped)", r.iterations, iterations,
                      r.not_overlapped_iterations);
        practice_fail_or_skip(st, "DDP ranks");
        return;
    }
    report_iterations(st, &r);
    double total = 0;
    for (int i = 0; i < r.iterations; i++) total += r.seconds[i];
    double step_ms = 1e3 * total / (r.iterations * steps);
    harness_counter(st, "step_ms", step_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "buckets", r.buckets, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "exposed_comm_ms", r.wait_ms, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "devices", devices, HARNESS_COUNTER_PLAIN);
    if (overlap) {
        double after_total = 0;
        for (int i = 0; i < r.not_overlapped_iterations; i++) after_total += r.not_overlapped_seconds[i];
        double after_ms = 1e3 * after_total / (r.not_overlapped_iterations * steps);
        harness_counter(st, "not_overlapped_step_ms", after_ms, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "hidden_ms", after_ms - step_ms, HARNESS_COUNTER_PLAIN);
    }
    char label[256];
    snprintf(label, sizeof label, "%s: DDP over %s, %d ranks, %d per rank, all-reduce %s backward, %d bucket%s; wall clock, rank 0 from a barrier",
             core_backend_name(backend), backend == CORE_BACKEND_CUDA ? "NCCL" : "Open MPI", devices, local_batch,
             overlap ? "overlapped with" : "after", r.buckets, r.buckets == 1 ? "" : "s");
    harness_set_label(st, label);
}

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

static void bench_allreduce(HarnessState *st, void *user)
{
    bool inplace = *(const bool *)user;
    CoreBackend backend;
    if (!practice_backend(st, false, &backend)) return;
    int devices = (int)harness_option_int_value("devices_max");
    if (devices <= 0 || devices > device_count(backend)) devices = device_count(backend);
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
        allreduce_state = run_workers(devices, backend, args, &allreduce_result) == 0 ? 1 : -1;
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

static const ScaleVariant scale_single = SCALE_SINGLE, scale_dp = SCALE_DATA_PARALLEL, scale_ddp = SCALE_DDP;
static const bool yes = true, no = false;

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--ddp-worker=", 13) == 0) return worker_main(argc, argv);
    harness_option_int("steps", 20, 1, 10000, NULL, "ddp_scaling: training steps per timed iteration");
    harness_option_int("overlap_steps", 5, 1, 10000, NULL, "ddp_overlap: training steps per timed iteration");
    harness_option_int("devices_max", 0, 0, 4096, NULL,
                       "devices for ddp_overlap and allreduce (0: all GPUs, or every CPU core; CPU all-reduce uses at least 2 ranks)");
    harness_option_int("timeout", 120, 1, 86400, NULL, "seconds a collective may take before the ranks abort (the watchdog)");
    harness_option_int("allreduce_max_bytes", 0, 0, (int64_t)1 << 31, NULL,
                       "largest all-reduce (0: 1 GiB on a GPU, 16 MiB on the CPU)");
    harness_option_int("allreduce_iterations", 10, 1, 64, NULL, "timed all-reduces per size (after 2 warm-up)");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    CoreBackend b = gpu ? CORE_BACKEND_CUDA : CORE_BACKEND_CPU;
    int devices = device_count(b);
    if (devices < 1) devices = 1;
    char devices_axis[64];
    snprintf(devices_axis, sizeof devices_axis, "1:%d:+1", devices);
    const char *presets = gpu ? "small" : "tiny";
    const char *batches = gpu ? "64" : "16";
    int64_t max_bytes = harness_option_int_value("allreduce_max_bytes");
    if (max_bytes == 0) max_bytes = gpu ? (int64_t)1 << 30 : (int64_t)16 << 20;
    allreduce_max_bytes = max_bytes;
    static char bytes_axis[64];
    snprintf(bytes_axis, sizeof bytes_axis, "8:%lld:*2", (long long)max_bytes);
    // every rank runs the same steps: iteration counts are fixed, never chosen by time
    struct { const char *variant; HarnessRole role; const ScaleVariant *v; } scaling[] = {
        {"one_process", HARNESS_REFERENCE, &scale_single},
        {"data_parallel", HARNESS_BASELINE, &scale_dp},
        {"ddp", HARNESS_TUNED, &scale_ddp},
    };
    for (int i = 0; i < 3; i++)
        harness_register(&(HarnessSpec){.practice = "ddp_scaling", .variant = scaling[i].variant, .role = scaling[i].role,
                                        .timing = HARNESS_TIMING_MANUAL, .fn = bench_scaling, .user = (void *)scaling[i].v,
                                        .axes = {{"preset", presets, true}, {"batch", batches, false}, {"devices", devices_axis, false}},
                                        .unit = HARNESS_MS, .iterations = 3});
    harness_register(&(HarnessSpec){.practice = "ddp_overlap", .variant = "not_overlapped", .role = HARNESS_BASELINE,
                                    .timing = HARNESS_TIMING_MANUAL, .fn = bench_overlap, .user = (void *)&no,
                                    .axes = {{"preset", "small", true}, {"batch", gpu ? "64" : "4", false}, {"bucket_mib", "1,5,25,0", false}},
                                    .unit = HARNESS_MS, .iterations = 3});
    harness_register(&(HarnessSpec){.practice = "ddp_overlap", .variant = "overlapped", .role = HARNESS_TUNED,
                                    .timing = HARNESS_TIMING_MANUAL, .fn = bench_overlap, .user = (void *)&yes,
                                    .axes = {{"preset", "small", true}, {"batch", gpu ? "64" : "4", false}, {"bucket_mib", "1,5,25,0", false}},
                                    .unit = HARNESS_MS, .iterations = 3});
    harness_register(&(HarnessSpec){.practice = "allreduce", .variant = "out_of_place", .role = HARNESS_REFERENCE,
                                    .timing = HARNESS_TIMING_MANUAL, .fn = bench_allreduce, .user = (void *)&no,
                                    .axes = {{"bytes", bytes_axis, false}}, .unit = HARNESS_US, .iterations = 1});
    harness_register(&(HarnessSpec){.practice = "allreduce", .variant = "in_place", .role = HARNESS_REFERENCE,
                                    .timing = HARNESS_TIMING_MANUAL, .fn = bench_allreduce, .user = (void *)&yes,
                                    .axes = {{"bytes", bytes_axis, false}}, .unit = HARNESS_US, .iterations = 1});
    return harness_run();
}
