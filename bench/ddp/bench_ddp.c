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
// The distributed items of PyTorch's tuning guide, each over the most devices (at least 2,
// else a visible skip), every tuned row's update checked against its baseline's inside its
// own run (the ranks train both from the same start first; --practice_selftest breaks the
// tuned one, whose check must then fail):
// ddp_no_sync/*: gradient accumulation over `accum` micro-batches, all-reduce after every
//   micro-batch (baseline) or only the last (tuned: no_sync); allreduces_per_step, comm_ms.
// ddp_bucket_order/*: buckets of `bucket_kib` in forward order (baseline: never rebuilt,
//   constructor order the reverse of execution) or backward order (tuned); exposed_comm_ms.
// ddp_balance/*: rank 0 takes 3/4 of each global batch over 2 ranks (baseline) or every rank
//   an equal share (tuned), the losses weighted by share; idle_ms_max, idle_ms_min.
// allreduce/*: one all-reduce of 8 B .. max bytes over NCCL (GPU) or Open MPI (CPU), in
//   place and out of place: time, algbw = bytes / time, busbw = algbw x 2(n-1)/n, and a
//   data check of every element (wrong). With one GPU, NCCL's world is 1 (busbw 0).
// DDP ranks and the collective runs are this program again, started per measurement with
// `--ddp-worker=...` through the local spawner (mpirun for CPU ranks; forked ranks with a
// TCP rendezvous for NCCL); each rank times from a barrier, rank 0 reports.
// The parts, one file each (ddp_practice.h declares them): the rank worker and its launcher
// (ddp_worker.c), ddp_scaling (ddp_scaling.c), ddp_overlap (ddp_overlap.c), the
// all-reduce micro with its rank side (ddp_allreduce.c), and the tuning guide's families
// (ddp_no_sync.c, ddp_bucket_order.c, ddp_balance.c over ddp_guide.c, their check's rank
// side in ddp_check.c). This file registers them.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench/ddp/ddp_practice.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/core.h"

static const ScaleVariant scale_single = SCALE_SINGLE, scale_dp = SCALE_DATA_PARALLEL, scale_ddp = SCALE_DDP;
static const bool yes = true, no = false;
static const WorkerVariant sync_every = {.sync_every = true}, forward_order = {.forward_order = true},
                           imbalanced = {.imbalanced = true};
static const GuideVariant guide_sync_every = {sync_every, NULL}, guide_no_sync = {{0}, &sync_every},
                          guide_forward_order = {forward_order, NULL}, guide_backward_order = {{0}, &forward_order},
                          guide_imbalanced = {imbalanced, NULL}, guide_balanced = {{0}, &imbalanced};

// One family of the tuning guide: its baseline and tuned variants over the same axes.
static void register_guide(const char *practice, HarnessFn fn, const char *baseline, const GuideVariant *base,
                           const char *tuned, const GuideVariant *tune, const HarnessAxis *axes)
{
    HarnessSpec spec = {.practice = practice, .timing = HARNESS_TIMING_MANUAL, .fn = fn, .unit = HARNESS_MS,
                        .iterations = 3};
    for (int i = 0; i < HARNESS_MAX_AXES && axes[i].name; i++) spec.axes[i] = axes[i];
    spec.variant = baseline; spec.role = HARNESS_BASELINE; spec.user = (void *)base;
    harness_register(&spec);
    spec.variant = tuned; spec.role = HARNESS_TUNED; spec.user = (void *)tune;
    harness_register(&spec);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--ddp-worker=", 13) == 0) return ddp_bench_worker_main(argc, argv);
    harness_option_int("steps", 20, 1, 10000, NULL, "ddp_scaling: training steps per timed iteration");
    harness_option_int("overlap_steps", 5, 1, 10000, NULL, "ddp_overlap: training steps per timed iteration");
    harness_option_int("devices_max", 0, 0, 4096, NULL,
                       "devices for ddp_overlap, allreduce, ddp_no_sync, ddp_bucket_order and ddp_balance (0: all GPUs, "
                       "or every CPU core; CPU all-reduce uses at least 2 ranks; the last three need 2)");
    harness_option_int("guide_steps", 10, 1, 10000, NULL,
                       "ddp_no_sync, ddp_bucket_order, ddp_balance: training steps per timed iteration");
    harness_option_int("timeout", 120, 1, 86400, NULL, "seconds a collective may take before the ranks abort (the watchdog)");
    harness_option_int("allreduce_max_bytes", 0, 0, (int64_t)1 << 31, NULL,
                       "largest all-reduce (0: 1 GiB on a GPU, 16 MiB on the CPU)");
    harness_option_int("allreduce_iterations", 10, 1, 64, NULL, "timed all-reduces per size (after 2 warm-up)");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    CoreBackend b = gpu ? CORE_BACKEND_CUDA : CORE_BACKEND_CPU;
    int devices = ddp_bench_device_count(b);
    if (devices < 1) devices = 1;
    char devices_axis[64];
    snprintf(devices_axis, sizeof devices_axis, "1:%d:+1", devices);
    const char *presets = gpu ? "small" : "tiny";
    const char *batches = gpu ? "64" : "16";
    int64_t max_bytes = ddp_bench_allreduce_max_bytes(gpu);
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
                                        .timing = HARNESS_TIMING_MANUAL, .fn = ddp_bench_scaling, .user = (void *)scaling[i].v,
                                        .axes = {{"preset", presets, true}, {"batch", batches, false}, {"devices", devices_axis, false}},
                                        .unit = HARNESS_MS, .iterations = 3});
    harness_register(&(HarnessSpec){.practice = "ddp_overlap", .variant = "not_overlapped", .role = HARNESS_BASELINE,
                                    .timing = HARNESS_TIMING_MANUAL, .fn = ddp_bench_overlap, .user = (void *)&no,
                                    .axes = {{"preset", "small", true}, {"batch", gpu ? "64" : "4", false}, {"bucket_mib", "1,5,25,0", false}},
                                    .unit = HARNESS_MS, .iterations = 3});
    harness_register(&(HarnessSpec){.practice = "ddp_overlap", .variant = "overlapped", .role = HARNESS_TUNED,
                                    .timing = HARNESS_TIMING_MANUAL, .fn = ddp_bench_overlap, .user = (void *)&yes,
                                    .axes = {{"preset", "small", true}, {"batch", gpu ? "64" : "4", false}, {"bucket_mib", "1,5,25,0", false}},
                                    .unit = HARNESS_MS, .iterations = 3});
    register_guide("ddp_no_sync", ddp_bench_no_sync, "sync_every", &guide_sync_every, "no_sync", &guide_no_sync,
                   (HarnessAxis[]){{"preset", gpu ? "small" : "tiny,mlp", true}, {"batch", gpu ? "32" : "8", false},
                                   {"accum", "4", false}, {NULL, NULL, false}});
    register_guide("ddp_bucket_order", ddp_bench_bucket_order, "forward_order", &guide_forward_order, "backward_order",
                   &guide_backward_order,
                   (HarnessAxis[]){{"preset", gpu ? "small" : "tiny", true}, {"batch", gpu ? "64" : "8", false},
                                   {"bucket_kib", gpu ? "1024" : "4", false}, {NULL, NULL, false}});
    register_guide("ddp_balance", ddp_bench_balance, "imbalanced", &guide_imbalanced, "balanced", &guide_balanced,
                   (HarnessAxis[]){{"preset", gpu ? "mlp,small" : "mlp", true}, {"batch", gpu ? "256" : "512", false},
                                   {NULL, NULL, false}});
    harness_register(&(HarnessSpec){.practice = "allreduce", .variant = "out_of_place", .role = HARNESS_REFERENCE,
                                    .timing = HARNESS_TIMING_MANUAL, .fn = ddp_bench_allreduce, .user = (void *)&no,
                                    .axes = {{"bytes", bytes_axis, false}}, .unit = HARNESS_US, .iterations = 1});
    harness_register(&(HarnessSpec){.practice = "allreduce", .variant = "in_place", .role = HARNESS_REFERENCE,
                                    .timing = HARNESS_TIMING_MANUAL, .fn = ddp_bench_allreduce, .user = (void *)&yes,
                                    .axes = {{"bytes", bytes_axis, false}}, .unit = HARNESS_US, .iterations = 1});
    return harness_run();
}
