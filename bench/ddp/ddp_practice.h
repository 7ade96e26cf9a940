// ddp_practice.h: the ddp practice's own parts, private to bench/ddp/: the rank worker's
// arguments, what a worker run reports back, and the benchmark functions bench_ddp.c's
// main() registers. The worker and its launcher are in ddp_worker.c; ddp_scaling/*,
// ddp_overlap/* and allreduce/* each in their own file (ddp_scaling.c, ddp_overlap.c,
// ddp_allreduce.c). Functions that can fail return 0 or -1 with the error set (kernels/error.h).
#ifndef DDP_PRACTICE_H
#define DDP_PRACTICE_H

#include <stdbool.h>
#include <stdint.h>

#include "bench/driver/harness.h"
#include "dist/comm.h"
#include "dist/env.h"
#include "kernels/core.h"

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

// The worker's entry: this program run with --ddp-worker=train|allreduce (bench_ddp.c's
// main() hands such a command line here). Launches the ranks, or is one; an exit status.
int ddp_bench_worker_main(int argc, char **argv);
// Host batch of rank `rank`: the synthetic task's samples [rank*n, rank*n + n).
int ddp_bench_make_batch(const CoreConfig *cfg, int n, int rank, float **images, int32_t **labels);
// The allreduce worker: every size from --min-bytes to --max-bytes, timed and checked;
// rank 0 prints one "allreduce bytes=..." line per timed all-reduce (ddp_allreduce.c).
int ddp_bench_worker_allreduce(const WorkerArgs *a, const DistEnv *env, DistComm *comm);

// ---- the benchmark side ------------------------------------------------------------------

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
int ddp_bench_run_workers(int nproc, CoreBackend backend, const char *args, WorkerResult *r);
// Devices this backend has: GPUs, or the CPUs this process may use.
int ddp_bench_device_count(CoreBackend b);
// Reports fixed-iteration times measured elsewhere (a worker run) through the harness.
void ddp_bench_report_iterations(HarnessState *st, const WorkerResult *r);

typedef enum { SCALE_SINGLE, SCALE_DATA_PARALLEL, SCALE_DDP } ScaleVariant;

// ddp_scaling/*: user is a const ScaleVariant * (ddp_scaling.c).
void ddp_bench_scaling(HarnessState *st, void *user);
// ddp_overlap/*: user is a const bool *, true for the overlapped variant (ddp_overlap.c).
void ddp_bench_overlap(HarnessState *st, void *user);
// allreduce/*: user is a const bool *, true for in place (ddp_allreduce.c).
void ddp_bench_allreduce(HarnessState *st, void *user);
// The resolved --allreduce_max_bytes (0: 1 GiB on a GPU, 16 MiB on the CPU), kept for
// ddp_bench_allreduce; call once after harness_init.
int64_t ddp_bench_allreduce_max_bytes(bool gpu);

#endif
