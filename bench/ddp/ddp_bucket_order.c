// ddp_bucket_order.c: ddp_bucket_order/*, DDP's gradient buckets in backward order (tuned:
// what DDP builds after its first iteration, or from a constructor whose layer order is
// the execution order) against forward order (baseline: what DDP keeps when it never
// rebuilds, find_unused_parameters=True, and the constructor lists the layers in the
// reverse of their execution; the first bucket holds the first layers, whose gradients
// backward writes last, so no all-reduce starts before backward ends). Every bucket is
// capped at `bucket_kib` (the first too), so a preset has several. Counter exposed_comm_ms
// (as ddp_overlap's: DdpStats.wait_ms): how long rank 0's update waited for the
// all-reduces per step, the communication backward did not hide.
#include <stdio.h>

#include "bench/ddp/ddp_practice.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/core.h"

// A sum per element does not depend on how the elements are bucketed: over 2 CPU ranks it
// is a + b on every rank (bit-identical; the row demands 0). Measured on 2 CPU ranks, tiny
// and mlp, batch 4..32, buckets of 4..64 KiB: 0 every time. With more ranks the
// collective's algorithm, and so the order of its sums, may change with a bucket's size:
// then the tolerance of any reordered fp32 sum (ddp_no_sync's, 1e-4). On GPUs a backward
// with unordered atomics need not repeat itself bit for bit: 1e-2 (ddp_no_sync's there).
#define BUCKET_ORDER_TOLERANCE 1e-4
#define BUCKET_ORDER_GPU_TOLERANCE 1e-2

void ddp_bench_bucket_order(HarnessState *st, void *user)
{
    const GuideVariant *v = user;
    bool gpu = practice_on_gpu();
    GuideFamily f = {.practice = "ddp_bucket_order", .accumulation = 1,
                     .tolerance = gpu ? BUCKET_ORDER_GPU_TOLERANCE : BUCKET_ORDER_TOLERANCE,
                     .bucket_axis = "bucket_kib", .exact_on_two_ranks = !gpu};
    WorkerResult r;
    GuideRun run;
    if (!ddp_guide_run(st, &f, v, &r, &run)) return;
    harness_counter(st, "exposed_comm_ms", r.wait_ms, HARNESS_COUNTER_PLAIN);
    char head[128], label[320];
    ddp_guide_label_head(&run, head, sizeof head);
    snprintf(label, sizeof label, "%s, %d per rank, %d buckets of <= %lld KiB in %s order; wall clock, rank 0 from a "
             "barrier", head, run.local_batch, r.buckets, (long long)harness_axis_int(st, "bucket_kib"),
             v->settings.forward_order ? "forward" : "backward");
    harness_set_label(st, label);
}
