// ddp_overlap.c: ddp_overlap/*, DDP over the most devices with the all-reduce overlapped
// with backward (tuned) or after it (baseline), per bucket cap (1, 5, 25 MiB, 0 = all in
// one). hidden_ms = the non-overlapped step - the overlapped one, both measured by the same
// ranks in the overlapped run (not_overlapped_step_ms, right after its timed iterations).
#include <stdbool.h>
#include <stdio.h>

#include "bench/ddp/ddp_practice.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/core.h"
#include "kernels/error.h"

void ddp_bench_overlap(HarnessState *st, void *user)
{
    bool overlap = *(const bool *)user;
    CoreConfig cfg;
    if (!practice_run_config(st, false, NULL, &cfg)) return;
    CoreBackend backend = cfg.backend;
    int local_batch = cfg.batch_size;
    int devices = (int)harness_option_int_value("devices_max");
    if (devices <= 0) devices = ddp_bench_device_count(backend);
    if (devices > ddp_bench_device_count(backend)) devices = ddp_bench_device_count(backend);
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
    if (ddp_bench_run_workers(devices, backend, args, &r) != 0 || r.iterations != iterations ||
        (overlap && r.not_overlapped_iterations != iterations)) {
        if (error_kind() == ERROR_NONE)
            error_set(ERROR_LIBRARY, "the ranks reported %d of %d iterations (%d not overlapped)", r.iterations, iterations,
                      r.not_overlapped_iterations);
        practice_fail_or_skip(st, "DDP ranks");
        return;
    }
    ddp_bench_report_iterations(st, &r);
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
