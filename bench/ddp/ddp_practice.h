// ddp_practice.h: the ddp practice's own parts, private to bench/ddp/: the rank worker's
// arguments, what a worker run reports back, and the benchmark functions bench_ddp.c's
// main() registers. The worker and its launcher are in ddp_worker.c (the update check of the
// tuning guide's families on the rank side in ddp_check.c); ddp_scaling/*, ddp_overlap/*
// and allreduce/* each in their own file (ddp_scaling.c, ddp_overlap.c, ddp_allreduce.c);
// ddp_no_sync/*, ddp_bucket_order/* and ddp_balance/* in ddp_no_sync.c, ddp_bucket_order.c
// and ddp_balance.c over what they share (ddp_guide.c). Functions that can fail return 0 or
// -1 with the error set (kernels/error.h).
#ifndef DDP_PRACTICE_H
#define DDP_PRACTICE_H

#include <stdbool.h>
#include <stdint.h>

#include "bench/driver/harness.h"
#include "dist/comm.h"
#include "dist/ddp.h"
#include "dist/env.h"
#include "kernels/core.h"

enum { MAX_ITERS = 64, MAX_SIZES = 40, MAX_MICRO_BATCHES = 64 };

// ---- the worker: one rank of a DDP run or of the collective micro ----------------------

// The DDP settings a tuning-guide variant changes (the timed run's, or the check's baseline's).
typedef struct WorkerVariant {
    bool sync_every;    // DdpConfig.sync_every_micro_batch (accumulation without no_sync)
    bool forward_order; // DdpConfig.bucket_order_forward
    bool imbalanced;    // rank 0 takes more of each global batch (ddp_bench_share)
} WorkerVariant;

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
    int accumulation;       // train: micro-batches per step (DdpConfig.accumulation_steps)
    WorkerVariant variant;  // train: the timed run's settings
    int check_steps;        // train, > 0: the update check first (ddp_check.c), against:
    WorkerVariant check_against; // the baseline variant's settings
    const char *breaks;     // the self-test: "frozen", "half_lr" or "drop_step" breaks the
                            // checked (timed) run; NULL: none
} WorkerArgs;

// The worker's entry: this program run with --ddp-worker=train|allreduce (bench_ddp.c's
// main() hands such a command line here). Launches the ranks, or is one; an exit status.
int ddp_bench_worker_main(int argc, char **argv);
// Host batch of rank `rank`: the synthetic task's samples [rank*n, rank*n + n).
int ddp_bench_make_batch(const CoreConfig *cfg, int n, int rank, float **images, int32_t **labels);
// This rank's share of a global batch of world x local_batch samples: `n` of them from
// position `first`. Balanced: local_batch each, rank r from r x local_batch. Imbalanced:
// every rank but 0 takes local_batch / 2 and rank 0 the rest (3:1 over 2 ranks); the same
// samples in all, so the global batch is the same. Bad usage for an odd local_batch then.
int ddp_bench_share(int local_batch, int world, int rank, bool imbalanced, int *n, int *first);
// This rank's a->accumulation micro-batches of variant v (micro-batch k: the share of
// global batch k, the synthetic task's samples from k x world x local_batch) in micro[];
// *images and *labels hold them (free both). Returns the global batch of a step (every
// rank's micro-batches) or -1.
int ddp_bench_micro_batches(const CoreConfig *cfg, const WorkerArgs *a, const WorkerVariant *v, const DistEnv *env,
                            float **images, int32_t **labels, CoreBatch *micro);
// The DDP configuration of variant v for this rank's share of `n` samples of each global batch.
DdpConfig ddp_bench_ddp_config(const WorkerArgs *a, const WorkerVariant *v, int n);
// The check of the timed run against the baseline variant (a->check_against), before the
// timed iterations: ref_cfg's own core trains the baseline for a->check_steps steps, then
// the timed run's core and ddp (from the same start) as many on micro; rank 0 prints
// "ddp_check rel_diff=R baseline_moved=M" (ddp_check.c).
int ddp_bench_check_update(const WorkerArgs *a, const DistEnv *env, DistComm *comm, const CoreConfig *ref_cfg,
                           Core *core, Ddp *ddp, const CoreBatch *micro, int global_batch);
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
    bool checked;                   // a "ddp_check" line came (--check-steps)
    double check_rel_diff, check_baseline_moved;
    bool ranks_reported;            // a "ddp_ranks" line came
    double idle_ms_max, idle_ms_min, allreduces_per_step; // over ranks, per step: wait_ms
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
// The tuning guide's families (ddp_guide.c): user is a const GuideVariant *.
typedef struct GuideVariant {
    WorkerVariant settings;
    const WorkerVariant *baseline; // the tuned variant's check against it; NULL: the baseline
} GuideVariant;
// Counters and checks a family adds to the shared run (ddp_guide_run).
typedef struct GuideFamily {
    const char *practice;
    int accumulation;          // micro-batches per step (1: none)
    double tolerance;          // the check: relative L2 of the update vs the baseline's
    const char *bucket_axis;   // NULL: PyTorch's default buckets; else the axis (KiB)
    bool check_without_batchnorm_only; // the check applies to BN-free presets alone (uneven
                               // shares: BN normalises each rank's share by itself)
    bool exact_on_two_ranks;   // over 2 ranks the update must be bit-identical (tolerance 0):
                               // each element's sum is of two terms, whatever the bucketing
                               // (CPU: a backward that repeats itself bit for bit)
} GuideFamily;
// Runs the ranks of a tuning-guide row (the devices, at least 2, else a visible skip),
// reports the timed iterations, step_ms, exposed_comm_ms, buckets, devices, and for a tuned
// variant the check (check_rel_diff, check_baseline_moved, wrong; over f->tolerance fails
// the row). False when the row has ended (skipped or failed); r holds the ranks' report.
typedef struct GuideRun {
    CoreBackend backend;
    int devices;      // ranks
    int local_batch;  // the batch axis: per rank and micro-batch (balanced)
    bool checked;     // the update check ran (a tuned row)
} GuideRun;
bool ddp_guide_run(HarnessState *st, const GuideFamily *f, const GuideVariant *v, WorkerResult *r, GuideRun *run);
// The head of a row's label: "cpu: DDP over Open MPI, 2 ranks".
void ddp_guide_label_head(const GuideRun *run, char *out, size_t size);
// ddp_no_sync/*, ddp_bucket_order/*, ddp_balance/* (ddp_no_sync.c, ddp_bucket_order.c, ddp_balance.c).
void ddp_bench_no_sync(HarnessState *st, void *user);
void ddp_bench_bucket_order(HarnessState *st, void *user);
void ddp_bench_balance(HarnessState *st, void *user);
// allreduce/*: user is a const bool *, true for in place (ddp_allreduce.c).
void ddp_bench_allreduce(HarnessState *st, void *user);
// The resolved --allreduce_max_bytes (0: 1 GiB on a GPU, 16 MiB on the CPU), kept for
// ddp_bench_allreduce; call once after harness_init.
int64_t ddp_bench_allreduce_max_bytes(bool gpu);

#endif
