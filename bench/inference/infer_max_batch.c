// infer_max_batch.c: inference_grad_max_batch, the largest batch that fits in each grad
// mode: probed on a GPU (the batch doubles until the forward runs out of memory), estimated
// on a CPU from the core's peak bytes at two batches against the machine's memory.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "bench/inference/infer_family.h"
#include "kernels/check.h"
#include "kernels/clock.h"

// Whether a forward of n images fits on the GPU: a fresh core (planned for 1), n zero images
// in device memory, one forward. *fits false on out-of-memory; -1 on any other error.
static int probe_gpu(const CoreConfig *cfg, CoreGradMode grad, int n, bool *fits)
{
    CoreConfig c = *cfg;
    c.batch_size = 1;
    const CoreModelConfig *m = &c.model;
    size_t bytes = (size_t)n * m->in_channels * m->image_size * m->image_size * sizeof(float);
    float *images = NULL;
    *fits = false;
    cudaError_t e = cudaMalloc((void **)&images, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return 0;
    }
    if (e == cudaSuccess) e = cudaMemset(images, 0, bytes);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        cudaFree(images);
        return check_cuda_failed(e, __FILE__, __LINE__, "probe batch");
    }
    Core *core = NULL;
    CoreBatch b = {images, NULL, n, CORE_MEMORY_DEVICE};
    int rc = core_create(&c, &core);
    if (rc == 0) rc = core_infer(core, &b, grad, NULL, NULL);
    if (rc == 0) rc = core_sync(core);
    core_free(core);
    cudaFree(images);
    if (rc == 0) *fits = true;
    else if (error_kind() == ERROR_OUT_OF_MEMORY) rc = 0;
    return rc;
}

// The core's peak bytes (model, workspace, the plan's arena) after one forward of n on the CPU.
static int cpu_peak(const CoreConfig *cfg, CoreGradMode grad, int n, size_t *peak)
{
    CoreConfig c = *cfg;
    c.batch_size = n;
    PracticeBatch pb;
    TRY(infer_batch_make(&pb, &c, true));
    CoreBatch b = practice_batch_view(&pb, n);
    Core *core = NULL;
    CoreStats s;
    int rc = core_create(&c, &core);
    if (rc == 0) rc = core_infer(core, &b, grad, NULL, NULL);
    if (rc == 0) rc = core_stats(core, &s);
    if (rc == 0) *peak = s.peak_bytes;
    core_free(core);
    practice_batch_free(&pb);
    return rc;
}

// The most values one image puts in a single tensor: the input, the stem's output (the
// ResNets' largest activation: later stages halve the size as they double the width) or
// an MLP's hidden layer.
static size_t largest_tensor_per_image(const CoreModelConfig *m)
{
    size_t in = (size_t)m->in_channels * m->image_size * m->image_size;
    size_t act = (size_t)m->mlp_hidden;
    if (m->kind == CORE_MODEL_RESNET) {
        size_t size = (size_t)(m->image_size - 1) / m->stem_stride + 1;
        act = (size_t)m->width * size * size;
    }
    return in > act ? in : act;
}

void infer_bench_max_batch(HarnessState *st, void *user)
{
    const InferVariant *v = user;
    CoreConfig cfg;
    if (!infer_run_config(st, v, &cfg)) return;
    int cap = (int)harness_option_int_value("max_batch_cap");
    const CoreModelConfig *m = &cfg.model;
    size_t image_bytes = (size_t)m->in_channels * m->image_size * m->image_size * sizeof(float);
    char label[700];
    if (cfg.backend == CORE_BACKEND_CUDA) {
        int largest = 0, rc = 0;
        bool fits = true;
        char stopped[300] = "";
        while (rc == 0 && harness_keep_running(st)) {  // one iteration: the whole probe
            double t0 = clock_seconds();
            largest = 0;
            fits = true;
            for (int n = 1; n <= cap && rc == 0 && fits; n *= 2) {
                // cuDNN (and int-indexed kernels) take tensors of fewer than 2^31 values: the
                // probe stops there rather than asking a library past its limit.
                if ((size_t)n * largest_tensor_per_image(m) > INT32_MAX) {
                    snprintf(stopped, sizeof stopped, "; stopped at %d: a tensor of %zu values "
                             "(2^31 is cuDNN's limit), still fitting", n,
                             (size_t)n * largest_tensor_per_image(m));
                    break;
                }
                rc = probe_gpu(&cfg, v->grad, n, &fits);
                if (rc == 0 && fits) largest = n;
                // Another error past a batch that fitted (a library's limit on a tensor's
                // elements, say) ends the probe there; it is said in the label.
                if (rc != 0 && largest > 0) {
                    snprintf(stopped, sizeof stopped, "; stopped at %d by: %s", n, error_message());
                    rc = 0;
                    fits = false;
                }
            }
            harness_set_iteration_time(st, clock_seconds() - t0);
        }
        if (rc != 0) {
            practice_fail_or_skip(st, "probing the largest batch");
            return;
        }
        harness_counter(st, "max_batch", largest, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "max_batch_capped", fits, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "max_batch_estimated", 0, HARNESS_COUNTER_PLAIN);
        snprintf(label, sizeof label, "%s: batch doubled from 1 until the forward ran out of device "
                 "memory%s%s", v->name, fits ? " (stopped at --max_batch_cap, still fitting)" : "",
                 stopped);
        harness_set_label(st, label);
        return;
    }
    // CPU: the peak grows linearly in the batch; the machine's memory over the slope.
    enum { N1 = 4, N2 = 8 };
    size_t p1 = 0, p2 = 0;
    int rc = 0;
    while (rc == 0 && harness_keep_running(st)) {  // one iteration: both measurements
        double t0 = clock_seconds();
        rc = cpu_peak(&cfg, v->grad, N1, &p1);
        if (rc == 0) rc = cpu_peak(&cfg, v->grad, N2, &p2);
        harness_set_iteration_time(st, clock_seconds() - t0);
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "measuring the core's bytes");
        return;
    }
    double per_image = (double)(p2 - p1) / (N2 - N1) + (double)image_bytes;  // + the input
    double fixed = (double)p1 - per_image * N1 + (double)image_bytes * N1;
    double memory = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    double largest = per_image > 0 ? floor((memory - fixed) / per_image) : 0;
    if (largest > cap) largest = cap;
    harness_counter(st, "max_batch", largest, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_batch_capped", largest >= cap, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_batch_estimated", 1, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "bytes_per_image", per_image, HARNESS_COUNTER_PLAIN);
    snprintf(label, sizeof label, "%s: estimated, not probed (a CPU swaps long before an allocation "
             "fails): %.1f GiB of memory over %.0f bytes per image (the core's peak at batch %d and "
             "%d, plus the input)", v->name, memory / (1 << 30), per_image, N1, N2);
    harness_set_label(st, label);
}
