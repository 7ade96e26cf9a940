// comm.c: the world communicator over Open MPI or NCCL (see comm.h).
#include "dist/comm.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dist/rendezvous.h"
#include "kernels/check.h"

struct DistComm {
    DistCommKind kind;
    int rank, world, device, timeout_ms;
    bool mpi_owned;   // we called MPI_Init
    ncclComm_t nccl;
};

static int mpi_failed(int rc, int rank, const char *call)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return error_set(ERROR_LIBRARY, "rank %d: %s: %s", rank, call, text);
}
#define MPI_TRY(rank, call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) return mpi_failed(rc_, (rank), #call); } while (0)

static int nccl_failed(ncclResult_t r, int rank, const char *call)
{
    return error_set(ERROR_LIBRARY, "rank %d: %s: %s (%s)", rank, call,
                     ncclGetErrorString(r), ncclGetLastError(NULL));
}
#define NCCL_TRY(rank, call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) return nccl_failed(r_, (rank), #call); } while (0)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// The communicator is non-blocking (ncclConfig_t.blocking = 0), so that no NCCL call can
// hang on a peer that died or never joined: a call may return ncclInProgress, and the
// communicator may be used again once ncclCommGetAsyncError stops saying so. Waits for
// that with the deadline; on timeout or an error the communicator is aborted (and gone).
static int nccl_settle(DistComm *c, ncclResult_t r, const char *call)
{
    double deadline = now_ms() + c->timeout_ms;
    while (r == ncclInProgress && c->nccl) {
        if (now_ms() > deadline) {
            ncclCommAbort(c->nccl);
            c->nccl = NULL;
            return error_set(ERROR_LIBRARY, "rank %d: %s not done after %.1f s: a peer died or never joined; "
                             "communicator aborted", c->rank, call, c->timeout_ms / 1e3);
        }
        usleep(100);
        if (ncclCommGetAsyncError(c->nccl, &r) != ncclSuccess) break;
    }
    if (r == ncclSuccess) return 0;
    int rc = nccl_failed(r, c->rank, call);
    if (c->nccl) ncclCommAbort(c->nccl);
    c->nccl = NULL;
    return rc;
}

static int nccl_gone(const DistComm *c)
{
    return error_set(ERROR_LIBRARY, "rank %d: the NCCL communicator was aborted after an earlier error", c->rank);
}

// MPI once per process, serialized threads (DDP's communication thread issues the
// bucket all-reduces while the main thread computes and never calls MPI meanwhile).
static int mpi_start(DistComm *c)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) return 0;
    int provided = 0;
    MPI_TRY(c->rank, MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided));
    c->mpi_owned = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_SERIALIZED)
        return error_set(ERROR_LIBRARY, "rank %d: this MPI offers thread level %d, DDP needs MPI_THREAD_SERIALIZED",
                         c->rank, provided);
    return 0;
}

static int create(DistComm *c, const DistEnv *env, DistCommKind kind)
{
    bool mpi_launch = dist_env_has_mpi(env);
    if (kind == DIST_COMM_MPI || mpi_launch) {
        if (kind == DIST_COMM_MPI && env->world > 1 && !mpi_launch) {
            // e.g. `train --ddp` in an sbatch script without srun: SLURM_PROCID=0 and
            // SLURM_NTASKS=4 describe the script itself, one process
            const char *why = env->launch == DIST_LAUNCH_SLURM
                                  ? "inside an sbatch script without srun they describe the script itself, one process"
                                  : "they describe a world this process was not started into by an MPI launcher "
                                    "(a parent torchrun's, or set by hand)";
            const char *whose = env->launch == DIST_LAUNCH_SLURM ? "SLURM's" : "torchrun-style";
            return error_set(ERROR_BAD_USAGE,
                             "rank %d: CPU ranks talk over MPI, but this process has only %s variables (%s) and "
                             "none of an MPI launcher's (OMPI_COMM_WORLD_SIZE, PMIX_RANK): %s. Start the %d ranks "
                             "with srun (srun -n %d --mpi=pmix %s --ddp ...), mpirun (mpirun -np %d %s --ddp ...) "
                             "or --nproc-per-node %d in place of --ddp (%s starts them)",
                             env->rank, whose, env->vars, why, env->world, env->world, program_invocation_short_name,
                             env->world, program_invocation_short_name, env->world, program_invocation_short_name);
        }
        TRY(mpi_start(c));
        int rank = 0, world = 0;
        MPI_TRY(c->rank, MPI_Comm_rank(MPI_COMM_WORLD, &rank));
        MPI_TRY(c->rank, MPI_Comm_size(MPI_COMM_WORLD, &world));
        if (world != env->world || rank != env->rank)
            return error_set(ERROR_BAD_USAGE, "rank %d: MPI says rank %d of %d but the environment says %d of %d",
                             env->rank, rank, world, env->rank, env->world);
    }
    if (kind == DIST_COMM_MPI) return 0;

    CUDA_TRY(cudaSetDevice(c->device));
    ncclUniqueId id;
    if (c->rank == 0) NCCL_TRY(c->rank, ncclGetUniqueId(&id));
    if (c->world > 1) {
        if (mpi_launch)
            MPI_TRY(c->rank, MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
        else
            TRY(dist_rendezvous_share(env, &id, sizeof id, c->timeout_ms));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // see nccl_settle
    return nccl_settle(c, ncclCommInitRankConfig(&c->nccl, c->world, id, c->rank, &config), "ncclCommInitRankConfig");
}

int dist_comm_create(const DistEnv *env, DistCommKind kind, int device, int timeout_ms, DistComm **out)
{
    *out = NULL;
    if (timeout_ms <= 0) return error_set(ERROR_BAD_USAGE, "rank %d: the collective timeout must be > 0", env->rank);
    DistComm *c = calloc(1, sizeof *c);
    if (!c) return error_set(ERROR_OUT_OF_MEMORY, "calloc(DistComm): out of memory");
    *c = (DistComm){.kind = kind, .rank = env->rank, .world = env->world, .device = device,
                    .timeout_ms = timeout_ms};
    if (create(c, env, kind) != 0) {
        dist_comm_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int dist_comm_rank(const DistComm *c) { return c->rank; }
int dist_comm_world(const DistComm *c) { return c->world; }
DistCommKind dist_comm_kind(const DistComm *c) { return c->kind; }
int dist_comm_timeout_ms(const DistComm *c) { return c->timeout_ms; }
const char *dist_comm_kind_name(DistCommKind k) { return k == DIST_COMM_NCCL ? "nccl" : "mpi"; }

int dist_comm_allreduce(DistComm *c, const float *send, float *recv, size_t count, float scale, void *stream)
{
    if (c->kind == DIST_COMM_NCCL) {
        // sum of scale x each rank's floats: the scale (a float for ncclFloat32) is read
        // when the op is created (HostImmediate); the op may go once the all-reduce is
        // enqueued (settled)
        if (!c->nccl) return nccl_gone(c);
        ncclRedOp_t op;
        TRY(nccl_settle(c, ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate, c->nccl),
                        "ncclRedOpCreatePreMulSum"));
        int rc = nccl_settle(c, ncclAllReduce(send, recv, count, ncclFloat32, op, c->nccl, (cudaStream_t)stream),
                             "ncclAllReduce");
        if (c->nccl) {
            int rc2 = nccl_settle(c, ncclRedOpDestroy(op, c->nccl), "ncclRedOpDestroy");
            if (rc == 0) rc = rc2;
        }
        return rc;
    }
    if (c->world > 1) {
        // MPI counts are ints: large buffers go in pieces.
        const size_t piece = (size_t)1 << 30;
        for (size_t off = 0; off < count; off += piece) {
            int n = (int)(count - off < piece ? count - off : piece);
            const void *src = send == recv ? MPI_IN_PLACE : (const void *)(send + off);
            MPI_TRY(c->rank, MPI_Allreduce(src, recv + off, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        }
    } else if (send != recv) {
        for (size_t i = 0; i < count; i++) recv[i] = send[i];
    }
    if (scale != 1.0f)
        for (size_t i = 0; i < count; i++) recv[i] *= scale;
    return 0;
}

int dist_comm_broadcast(DistComm *c, float *buf, size_t count, void *stream)
{
    if (c->world <= 1) return 0;
    if (c->kind == DIST_COMM_NCCL) {
        if (!c->nccl) return nccl_gone(c);
        return nccl_settle(c, ncclBroadcast(buf, buf, count, ncclFloat32, 0, c->nccl, (cudaStream_t)stream),
                           "ncclBroadcast");
    }
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < count; off += piece) {
        int n = (int)(count - off < piece ? count - off : piece);
        MPI_TRY(c->rank, MPI_Bcast(buf + off, n, MPI_FLOAT, 0, MPI_COMM_WORLD));
    }
    return 0;
}

int dist_comm_wait(DistComm *c, void *stream)
{
    if (c->kind != DIST_COMM_NCCL) return 0;
    if (!c->nccl) return nccl_gone(c);
    double deadline = now_ms() + c->timeout_ms;
    for (;;) {
        cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotReady) return check_cuda_failed(e, __FILE__, __LINE__, "cudaStreamQuery(comm stream)");
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(c->nccl, &async);
        if (async == ncclInProgress) async = ncclSuccess;  // not an error (see nccl_settle)
        if (async != ncclSuccess || now_ms() > deadline) {
            ncclCommAbort(c->nccl);  // unblocks the stream; the communicator is gone
            c->nccl = NULL;
            if (async != ncclSuccess) return nccl_failed(async, c->rank, "NCCL (asynchronous; a peer died?)");
            return error_set(ERROR_LIBRARY, "rank %d: NCCL collective not done after %.1f s: a peer died or hangs; communicator aborted",
                             c->rank, c->timeout_ms / 1e3);
        }
        usleep(100);
    }
}

int dist_comm_barrier(DistComm *c)
{
    if (c->world <= 1) return 0;
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) {
        MPI_TRY(c->rank, MPI_Barrier(MPI_COMM_WORLD));
        return 0;
    }
    // NCCL without MPI: a one-float all-reduce is the barrier.
    float *one = NULL;
    CUDA_TRY(cudaMalloc((void **)&one, sizeof *one));
    CUDA_TRY(cudaMemset(one, 0, sizeof *one));
    int rc = dist_comm_allreduce(c, one, one, 1, 1.0f, NULL);
    if (rc == 0) rc = dist_comm_wait(c, NULL);
    cudaFree(one);
    return rc;
}

void dist_comm_abort(DistComm *c, int code)
{
    fprintf(stderr, "rank %d: aborting the job\n", c ? c->rank : -1);
    fflush(stderr);
    if (c && c->nccl) ncclCommAbort(c->nccl);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
}

void dist_comm_free(DistComm *c)
{
    if (!c) return;
    if (c->nccl) {
        // finalize (flush, with the deadline: aborted if a peer is gone), then destroy
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(c->nccl, &async) != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
            ncclCommAbort(c->nccl);
            c->nccl = NULL;
        } else {
            ErrorKind kind = error_kind();  // the caller's error, if any, stays the one reported
            char before[512];
            snprintf(before, sizeof before, "%s", error_message());
            if (nccl_settle(c, ncclCommFinalize(c->nccl), "ncclCommFinalize") != 0) {
                fprintf(stderr, "%s\n", error_message());  // aborted
                if (kind != ERROR_NONE) error_restore(kind, before);
            }
        }
        if (c->nccl) ncclCommDestroy(c->nccl);
        c->nccl = NULL;
    }
    if (c->mpi_owned) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
    }
    free(c);
}
