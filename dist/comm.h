// comm.h: the world communicator over a real collective engine: Open MPI for CPU ranks
// (launched by mpirun or srun), NCCL for GPU ranks (one GPU per rank; rank 0's
// ncclUniqueId travels over MPI under mpirun/srun, else over the TCP rendezvous at
// MASTER_ADDR:MASTER_PORT). Collectives have a deadline: a peer that died makes the
// others fail (and abort the job) instead of hanging.
#ifndef DIST_COMM_H
#define DIST_COMM_H

#include <stddef.h>

#include "dist/env.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DIST_COMM_MPI, DIST_COMM_NCCL } DistCommKind;

typedef struct DistComm DistComm;

// Joins the world of env. MPI: needs an MPI launch when world > 1. NCCL: `device` is
// this rank's GPU. timeout_ms bounds the rendezvous and every dist_comm_wait.
int dist_comm_create(const DistEnv *env, DistCommKind kind, int device, int timeout_ms,
                     DistComm **out);
int dist_comm_rank(const DistComm *comm);
int dist_comm_world(const DistComm *comm);
DistCommKind dist_comm_kind(const DistComm *comm);
// "mpi" or "nccl".
const char *dist_comm_kind_name(DistCommKind kind);
// recv = scale * (sum over ranks of send), count floats; send == recv is in place.
// MPI: host memory, returns when done (MPI_THREAD_SERIALIZED: one thread at a time).
// NCCL: device memory, enqueued on `stream` (cudaStream_t).
int dist_comm_allreduce(DistComm *comm, const float *send, float *recv, size_t count, float scale,
                        void *stream);
// Rank 0's buf (count floats) to every rank (host memory for MPI, device for NCCL).
int dist_comm_broadcast(DistComm *comm, float *buf, size_t count, void *stream);
// NCCL: waits for `stream` with the deadline, aborting the communicator on timeout or an
// asynchronous NCCL error; MPI: nothing to wait for.
int dist_comm_wait(DistComm *comm, void *stream);
// All ranks meet (host side).
int dist_comm_barrier(DistComm *comm);
// Every rank stops now, non-zero (MPI_Abort; ncclCommAbort then exit).
void dist_comm_abort(DistComm *comm, int code);
// The deadline of dist_comm_create.
int dist_comm_timeout_ms(const DistComm *comm);
// Leaves the world (MPI_Finalize once the last communicator goes).
void dist_comm_free(DistComm *comm);

#ifdef __cplusplus
}
#endif
#endif
