// ddp_scaling.c: ddp_scaling/*, weak scaling. images/s and step time of `steps` training
// steps at a fixed per-device batch for 1 process (role reference), DataParallel over N
// (baseline, in this process: run_in_process) and DDP over N (tuned, N ranks of the
// worker), N = 1 .. the devices (GPUs; CPU cores on the CPU backend, where DataParallel is
// threads and DDP is MPI ranks). efficiency = images/s(N) / (N x images/s(1)), images/s(1)
// measured in the same run (one process, the same steps, timed apart), never taken from
// another row. Each DDP row's parameters are checked against DataParallel's with the same
// axes (a DataParallel row's, or when none has run yet, one trained here, untimed).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/ddp/ddp_practice.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "dist/data_parallel.h"
#include "kernels/clock.h"
#include "kernels/core.h"
#include "kernels/error.h"

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
    int rc = ddp_bench_make_batch(&cfg, n, 0, &images, &labels);
    if (rc == 0) rc = data_parallel ? dp_create(&cfg, devices, &dp) : core_create(&cfg, &core);
    CoreBatch b = {.images = images, .labels = labels, .n = n, .memory = CORE_MEMORY_HOST};
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

void ddp_bench_scaling(HarnessState *st, void *user)
{
    ScaleVariant v = *(const ScaleVariant *)user;
    CoreConfig cfg;
    if (!practice_run_config(st, false, NULL, &cfg)) return;
    CoreBackend backend = cfg.backend;
    int local_batch = cfg.batch_size;
    int devices = (int)harness_axis_int(st, "devices");
    int have = ddp_bench_device_count(backend);
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
        rc = ddp_bench_run_workers(devices, backend, args, &r);
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
            harness_counter(st, "rel_l2_vs_data_parallel", rel, HARNESS_COUNTER_PLAIN);
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
    ddp_bench_report_iterations(st, &r);
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
