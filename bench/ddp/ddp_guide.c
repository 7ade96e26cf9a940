// ddp_guide.c: what the tuning guide's distributed families share (ddp_no_sync,
// ddp_bucket_order, ddp_balance): one run of the DDP ranks per row through the worker
// (`--ddp-worker=train` with the variant's settings, over the most devices: --devices_max,
// at least 2), the update check of a tuned row against its baseline inside that run (the
// ranks train both from the same start before the timed iterations, ddp_check.c), the
// self-test (--practice_selftest breaks the tuned run, whose check must then fail) and
// the counters every family reports. Each family's file adds its own counters and label.
// CPU ranks wait in MPI yielding the core (Open MPI's mpi_yield_when_idle=1, unless the
// environment sets it): each rank has a communication thread beside its compute thread, one
// rank per core, so the cores are oversubscribed, which Open MPI cannot see; a busy-polling
// wait then takes the core from a compute thread (on the 2-core VM the repetitions' CV was
// 0.4-2.0 with busy polling, 0.07-0.4 yielding).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/ddp/ddp_practice.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/core.h"
#include "kernels/error.h"

enum { CHECK_STEPS = 3 };

// The worker's --break for the self-test asked for (NULL: none). clip_before_unscale
// leaves an fp32 run without clipping unchanged, as the driver's rule says.
static int selftest_break(const char **out)
{
    Selftest mode = SELFTEST_NONE;
    TRY(practice_training_selftest_mode(&mode));
    *out = mode == SELFTEST_FROZEN || mode == SELFTEST_SKIP_ALL ? "frozen"
         : mode == SELFTEST_HALF_LR                              ? "half_lr"
         : mode == SELFTEST_DROP_STEP                            ? "drop_step"
                                                                 : NULL;
    return 0;
}

// The devices of a row: --devices_max or all of them, at most those here.
static int guide_devices(CoreBackend backend)
{
    int have = ddp_bench_device_count(backend);
    int devices = (int)harness_option_int_value("devices_max");
    return devices <= 0 || devices > have ? have : devices;
}

// Fails the row unless the check came back within the tolerance; adds its counters.
static bool check_passed(HarnessState *st, const GuideFamily *f, const WorkerResult *r, int devices)
{
    double tolerance = f->exact_on_two_ranks && devices == 2 ? 0.0 : f->tolerance;
    if (!r->checked) {
        harness_fail(st, "the ranks reported no update check");
        return false;
    }
    bool wrong = !(r->check_rel_diff <= tolerance) || !(r->check_baseline_moved >= PRACTICE_CHECK_MIN_MOVED);
    harness_counter(st, "check_rel_diff", r->check_rel_diff, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_baseline_moved", r->check_baseline_moved, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
    if (!wrong) return true;
    char why[256];
    if (!(r->check_baseline_moved >= PRACTICE_CHECK_MIN_MOVED))
        snprintf(why, sizeof why, "check: the baseline's update is %.3g of its parameters (< %g): it proves nothing",
                 r->check_baseline_moved, PRACTICE_CHECK_MIN_MOVED);
    else
        snprintf(why, sizeof why, "check: the update after %d steps differs from the baseline's by %.3g (relative L2) > %g",
                 CHECK_STEPS, r->check_rel_diff, tolerance);
    harness_fail(st, why);
    return false;
}

void ddp_guide_label_head(const GuideRun *run, char *out, size_t size)
{
    snprintf(out, size, "%s: DDP over %s, %d ranks", core_backend_name(run->backend),
             run->backend == CORE_BACKEND_CUDA ? "NCCL" : "Open MPI", run->devices);
}

bool ddp_guide_run(HarnessState *st, const GuideFamily *f, const GuideVariant *v, WorkerResult *r, GuideRun *run)
{
    CoreConfig cfg;
    if (!practice_run_config(st, false, NULL, &cfg)) return false;
    CoreBackend backend = cfg.backend;
    int *devices = &run->devices;
    run->backend = backend;
    run->local_batch = cfg.batch_size;
    *devices = guide_devices(backend);
    if (*devices < 2) {
        char why[128];
        snprintf(why, sizeof why, "needs 2 ranks, one per %s: %d here", backend == CORE_BACKEND_CUDA ? "GPU" : "CPU core",
                 *devices);
        harness_skip(st, why);
        return false;
    }
    const char *breaks = NULL;
    if (selftest_break(&breaks) != 0) { practice_fail_or_skip(st, "--practice_selftest"); return false; }
    bool check = v->baseline && !(f->check_without_batchnorm_only && cfg.model.kind == CORE_MODEL_RESNET);
    run->checked = check;
    double bucket_mib = f->bucket_axis ? harness_axis_int(st, f->bucket_axis) / 1024.0 : 25.0;
    double first_mib = f->bucket_axis ? bucket_mib : 1.0;  // an axis caps every bucket, the first too
    int steps = (int)harness_option_int_value("guide_steps"), iterations = (int)harness_max_iterations(st);
    const WorkerVariant *w = &v->settings, *b = v->baseline;
    char args[640];
    int len = snprintf(args, sizeof args, "train --preset=%s --local-batch=%d --steps=%d --iterations=%d --accumulation=%d "
                       "--bucket-mib=%.9g --first-bucket-mib=%.9g --sync-every=%d --forward-order=%d --imbalanced=%d",
                       harness_axis_str(st, "preset"), cfg.batch_size, steps, iterations, f->accumulation, bucket_mib,
                       first_mib, w->sync_every, w->forward_order, w->imbalanced);
    if (check)
        snprintf(args + len, sizeof args - len, " --check-steps=%d --check-sync-every=%d --check-forward-order=%d "
                 "--check-imbalanced=%d%s%s", CHECK_STEPS, b->sync_every, b->forward_order, b->imbalanced,
                 breaks ? " --break=" : "", breaks ? breaks : "");
    bool yield = backend != CORE_BACKEND_CUDA && !getenv("OMPI_MCA_mpi_yield_when_idle");
    if (yield) setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
    int rc = ddp_bench_run_workers(*devices, backend, args, r);
    if (yield) unsetenv("OMPI_MCA_mpi_yield_when_idle");
    if (rc != 0 || r->iterations != iterations || !r->ranks_reported) {
        if (error_kind() == ERROR_NONE)
            error_set(ERROR_LIBRARY, "the ranks reported %d of %d iterations%s", r->iterations, iterations,
                      r->ranks_reported ? "" : " and no per-rank figures");
        practice_fail_or_skip(st, "DDP ranks");
        return false;
    }
    if (check && !check_passed(st, f, r, *devices)) return false;
    ddp_bench_report_iterations(st, r);
    double total = 0;
    for (int i = 0; i < r->iterations; i++) total += r->seconds[i];
    harness_counter(st, "step_ms", 1e3 * total / (r->iterations * steps), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "buckets", r->buckets, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "devices", *devices, HARNESS_COUNTER_PLAIN);
    return true;
}
