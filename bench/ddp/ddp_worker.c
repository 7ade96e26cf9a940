// ddp_worker.c: the ddp practice's rank worker and its launcher, both ends of one line
// protocol. A DDP run or a collective run is this program again (`--ddp-worker=...`),
// started per measurement through the local spawner (mpirun for CPU ranks; forked ranks
// with a TCP rendezvous for NCCL). Each rank times from a barrier and rank 0 prints what
// it measured ("ddp_iteration seconds=...", "ddp_summary ...", "allreduce bytes=...");
// ddp_bench_run_workers starts the ranks and reads those lines back into a WorkerResult.
// The train worker is here; the allreduce worker is with its benchmark in ddp_allreduce.c.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "bench/ddp/ddp_practice.h"
#include "bench/driver/harness.h"
#include "dist/comm.h"
#include "dist/ddp.h"
#include "dist/env.h"
#include "dist/spawn.h"
#include "kernels/clock.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/synth.h"

// ---- the rank side ----------------------------------------------------------------------

static int parse_worker(int argc, char **argv, WorkerArgs *a)
{
    *a = (WorkerArgs){.backend = CORE_BACKEND_CPU, .preset = "tiny", .local_batch = 8, .steps = 5,
                      .iterations = 3, .warmup = 2, .overlap = true, .bucket_mib = 25, .first_bucket_mib = 1,
                      .min_bytes = 8, .max_bytes = 1 << 20, .timeout_ms = 120000, .accumulation = 1};
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
        INT_ARG("--accumulation", accumulation, 1, MAX_MICRO_BATCHES)
        INT_ARG("--check-steps", check_steps, 0, 1000)
        INT_ARG("--sync-every", variant.sync_every, 0, 1)
        INT_ARG("--forward-order", variant.forward_order, 0, 1)
        INT_ARG("--imbalanced", variant.imbalanced, 0, 1)
        INT_ARG("--check-sync-every", check_against.sync_every, 0, 1)
        INT_ARG("--check-forward-order", check_against.forward_order, 0, 1)
        INT_ARG("--check-imbalanced", check_against.imbalanced, 0, 1)
#undef INT_ARG
        if (strncmp(s, "--break=", 8) == 0) { a->breaks = v; continue; }
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
    if (a->breaks && strcmp(a->breaks, "frozen") != 0 && strcmp(a->breaks, "half_lr") != 0 &&
        strcmp(a->breaks, "drop_step") != 0)
        return error_set(ERROR_BAD_USAGE, "worker: --break=%s: want frozen, half_lr or drop_step", a->breaks);
    return 0;
}

static size_t sample_floats(const CoreConfig *cfg)
{
    return (size_t)cfg->model.in_channels * cfg->model.image_size * cfg->model.image_size;
}

// The synthetic task's samples [first, first + n) into images and labels.
static void fill_samples(const CoreConfig *cfg, long long first, int n, float *images, int32_t *labels)
{
    SynthTask task = {cfg->model.in_channels, cfg->model.image_size, cfg->model.num_classes, 0.5f, 1};
    size_t per = sample_floats(cfg);
    for (int i = 0; i < n; i++) synth_batch(&task, (uint64_t)(first + i), 1, images + i * per, labels + i);
}

int ddp_bench_make_batch(const CoreConfig *cfg, int n, int rank, float **images, int32_t **labels)
{
    *images = malloc((size_t)n * sample_floats(cfg) * sizeof **images);
    *labels = malloc((size_t)n * sizeof **labels);
    if (!*images || !*labels) return error_set(ERROR_OUT_OF_MEMORY, "batch: out of memory");
    fill_samples(cfg, (long long)rank * n, n, *images, *labels);
    return 0;
}

int ddp_bench_share(int local_batch, int world, int rank, bool imbalanced, int *n, int *first)
{
    if (!imbalanced) {
        *n = local_batch;
        *first = rank * local_batch;
        return 0;
    }
    if (local_batch % 2 != 0 || world < 2)
        return error_set(ERROR_BAD_USAGE, "imbalanced shares need an even per-rank batch (%d) and 2 ranks or more (%d)",
                         local_batch, world);
    int rest = local_batch / 2, heavy = world * local_batch - (world - 1) * rest;
    *n = rank == 0 ? heavy : rest;
    *first = rank == 0 ? 0 : heavy + (rank - 1) * rest;
    return 0;
}

int ddp_bench_micro_batches(const CoreConfig *cfg, const WorkerArgs *a, const WorkerVariant *v, const DistEnv *env,
                            float **images, int32_t **labels, CoreBatch *micro)
{
    int n = 0, first = 0, global = a->local_batch * env->world;
    TRY(ddp_bench_share(a->local_batch, env->world, env->rank, v->imbalanced, &n, &first));
    size_t per = sample_floats(cfg);
    *images = malloc((size_t)a->accumulation * n * per * sizeof **images);
    *labels = malloc((size_t)a->accumulation * n * sizeof **labels);
    if (!*images || !*labels) return error_set(ERROR_OUT_OF_MEMORY, "batch: out of memory");
    for (int k = 0; k < a->accumulation; k++) {
        micro[k] = (CoreBatch){.images = *images + (size_t)k * n * per, .labels = *labels + (size_t)k * n, .n = n, .memory = CORE_MEMORY_HOST};
        fill_samples(cfg, (long long)k * global + first, n, *images + (size_t)k * n * per, *labels + (size_t)k * n);
    }
    return global * a->accumulation;
}

DdpConfig ddp_bench_ddp_config(const WorkerArgs *a, const WorkerVariant *v, int n)
{
    return (DdpConfig){.bucket_cap_bytes = (size_t)(a->bucket_mib * 1048576.0),
                       .first_bucket_bytes = (size_t)(a->first_bucket_mib * 1048576.0), .overlap = a->overlap,
                       .accumulation_steps = a->accumulation, .sync_every_micro_batch = v->sync_every,
                       .bucket_order_forward = v->forward_order,
                       // uneven shares: share x world / global batch (= share / local_batch), so that
                       // DDP's mean over ranks of the weighted means is the global batch's mean
                       .loss_weight = v->imbalanced ? (float)n / a->local_batch : 0.0f};
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

// A sum over ranks of n host floats, in place (NCCL: through device memory on a stream of its own).
static int allreduce_host(DistComm *comm, float *host, size_t n)
{
    if (dist_comm_kind(comm) != DIST_COMM_NCCL) return dist_comm_allreduce(comm, host, host, n, 1.0f, NULL);
    float *dev = NULL;
    cudaStream_t stream = NULL;
    int rc = -1;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
        cudaMalloc((void **)&dev, n * sizeof *dev) == cudaSuccess &&
        cudaMemcpyAsync(dev, host, n * sizeof *dev, cudaMemcpyHostToDevice, stream) == cudaSuccess &&
        dist_comm_allreduce(comm, dev, dev, n, 1.0f, stream) == 0 &&
        cudaMemcpyAsync(host, dev, n * sizeof *dev, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
        dist_comm_wait(comm, stream) == 0 && cudaStreamSynchronize(stream) == cudaSuccess)
        rc = 0;
    else if (error_kind() == ERROR_NONE)
        error_set(ERROR_LIBRARY, "rank %d: the ranks' report: a CUDA copy failed", dist_comm_rank(comm));
    cudaFree(dev);
    if (stream) cudaStreamDestroy(stream);
    return rc;
}

// Every rank's exposed wait per step (DdpStats.wait_ms: at the all-reduces, where a rank
// with less work waits for the others) gathered on rank 0 by a sum of one-hot vectors;
// rank 0 prints "ddp_ranks idle_ms_max=... idle_ms_min=... allreduces_per_step=...".
static int report_ranks(DistComm *comm, const DistEnv *env, const DdpStats *before, const DdpStats *after)
{
    int steps = after->steps - before->steps;
    float *idle = calloc((size_t)env->world, sizeof *idle);
    if (!idle) return error_set(ERROR_OUT_OF_MEMORY, "ranks: out of memory");
    idle[env->rank] = (float)((after->wait_ms - before->wait_ms) / steps);
    int rc = allreduce_host(comm, idle, (size_t)env->world);
    if (rc == 0 && env->rank == 0) {
        float most = idle[0], least = idle[0];
        for (int r = 1; r < env->world; r++) {
            if (idle[r] > most) most = idle[r];
            if (idle[r] < least) least = idle[r];
        }
        printf("ddp_ranks idle_ms_max=%.6f idle_ms_min=%.6f allreduces_per_step=%.6f\n", most, least,
               (double)(after->allreduces - before->allreduces) / steps);
    }
    free(idle);
    return rc;
}

static int worker_train(const WorkerArgs *a, const DistEnv *env, DistComm *comm)
{
    CoreConfig cfg;
    TRY(core_config_preset(&cfg, a->preset));
    cfg.backend = a->backend;
    cfg.device = a->backend == CORE_BACKEND_CUDA ? env->local_rank : 0;
    cfg.batch_size = a->local_batch * env->world;
    CoreConfig timed_cfg = cfg;  // the self-test's half_lr breaks the timed run, never the check's baseline
    if (a->breaks && strcmp(a->breaks, "half_lr") == 0) timed_cfg.optim.base_lr *= 0.5f;
    float *images = NULL;
    int32_t *labels = NULL;
    CoreBatch micro[MAX_MICRO_BATCHES];
    Core *core = NULL;
    Ddp *ddp = NULL;
    int n = 0, first = 0;
    int global = ddp_bench_micro_batches(&cfg, a, &a->variant, env, &images, &labels, micro);
    int rc = global > 0 ? ddp_bench_share(a->local_batch, env->world, env->rank, a->variant.imbalanced, &n, &first) : -1;
    DdpConfig dc = ddp_bench_ddp_config(a, &a->variant, n);
    if (rc == 0 && core_create(&timed_cfg, &core) == 0 && ddp_create(core, comm, &dc, &ddp) == 0) {
        if (a->check_steps > 0) rc = ddp_bench_check_update(a, env, comm, &cfg, core, ddp, micro, global);
        // an untimed iteration first, as the in-process variants do (also the bucket rebuild)
        for (int s = 0; s < a->steps && rc == 0; s++) rc = ddp_step(ddp, micro, global, NULL);
        DdpStats before;
        ddp_stats(ddp, &before);
        if (rc == 0)
            rc = timed_ddp_iterations(ddp, core, comm, micro, global, a->steps, a->iterations, env->rank,
                                      "ddp_iteration");
        DdpStats st;
        ddp_stats(ddp, &st);
        if (rc == 0 && env->rank == 0) {
            int steps = st.steps - before.steps;
            printf("ddp_summary buckets=%d largest_bucket_bytes=%zu param_count=%zu wait_ms_per_step=%.6f comm_ms_per_step=%.6f\n",
                   st.buckets, st.largest_bucket, core_param_count(core),
                   (st.wait_ms - before.wait_ms) / steps, (st.comm_ms - before.comm_ms) / steps);
        }
        if (rc == 0) rc = report_ranks(comm, env, &before, &st);
        if (rc == 0 && env->rank == 0 && a->params_out) rc = write_params(core, a->params_out);
        if (rc == 0 && a->also_not_overlapped) {  // the same steps, all-reduce after backward
            ddp_free(ddp);
            ddp = NULL;
            DdpConfig after = dc;
            after.overlap = false;
            rc = ddp_create(core, comm, &after, &ddp);
            for (int s = 0; s < a->steps && rc == 0; s++) rc = ddp_step(ddp, micro, global, NULL);
            if (rc == 0)
                rc = timed_ddp_iterations(ddp, core, comm, micro, global, a->steps, a->iterations, env->rank,
                                          "ddp_not_overlapped_iteration");
        }
    } else {
        rc = -1;
    }
    ddp_free(ddp);
    core_free(core);
    free(images);
    free(labels);
    return rc;
}

int ddp_bench_worker_main(int argc, char **argv)
{
    WorkerArgs a;
    if (parse_worker(argc, argv, &a) != 0) {
        fprintf(stderr, "bench_ddp: %s\n", error_message());
        return 2;
    }
    // The launcher: start the ranks, whatever launcher variables we inherited (an sbatch
    // script's SLURM_PROCID/SLURM_NTASKS, a parent torchrun's RANK/WORLD_SIZE describe the
    // process they were set for, not these ranks; the spawner gives the ranks none of them).
    if (a.nproc > 0) {
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
    DistEnv env;
    if (dist_env_detect(&env) != 0) {
        fprintf(stderr, "bench_ddp: %s\n", error_message());
        return 2;
    }
    // On the CPU a device is a core: one compute thread per rank, as DataParallel's one per
    // replica (at N = the cores this is dist_cpus_per_rank). The ranks run unbound (see
    // dist/spawn.c), so the communication thread is not tied to its rank's compute core.
    if (a.backend != CORE_BACKEND_CUDA) core_cpu_set_threads(1);
    if (env.rank != 0) (void)!freopen("/dev/null", "w", stdout);
    DistComm *comm = NULL;
    int rc = dist_comm_create(&env, a.backend == CORE_BACKEND_CUDA ? DIST_COMM_NCCL : DIST_COMM_MPI,
                              a.backend == CORE_BACKEND_CUDA ? env.local_rank : 0, a.timeout_ms, &comm);
    if (rc == 0) rc = strcmp(a.mode, "train") == 0 ? worker_train(&a, &env, comm) : ddp_bench_worker_allreduce(&a, &env, comm);
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

// ---- the launcher side ------------------------------------------------------------------

static const char *self_exe(void)
{
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n > 0 ? n : 0] = '\0';
    return path;
}

int ddp_bench_run_workers(int nproc, CoreBackend backend, const char *args, WorkerResult *r)
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
        } else if (sscanf(line, "ddp_check rel_diff=%lf baseline_moved=%lf", &r->check_rel_diff,
                          &r->check_baseline_moved) == 2) {
            r->checked = true;
        } else if (sscanf(line, "ddp_ranks idle_ms_max=%lf idle_ms_min=%lf allreduces_per_step=%lf", &r->idle_ms_max,
                          &r->idle_ms_min, &r->allreduces_per_step) == 3) {
            r->ranks_reported = true;
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

int ddp_bench_device_count(CoreBackend b)
{
    if (b == CORE_BACKEND_CUDA) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) { (void)cudaGetLastError(); n = 0; }
        return n;
    }
    return core_cpu_threads();
}

void ddp_bench_report_iterations(HarnessState *st, const WorkerResult *r)
{
    int i = 0;
    while (harness_keep_running(st)) harness_set_iteration_time(st, r->seconds[i < r->iterations - 1 ? i++ : i]);
}
