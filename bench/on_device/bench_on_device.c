// bench_on_device.c: the on_device practice, constructing tensors directly on the GPU
// (torch.randn(n, device='cuda')) rather than on the host and then copying them
// (torch.randn(n).cuda()).
// Micro (on_device_randn/*, on_device_zeros/*, on_device_arange/*), 4 KiB to 256 MiB:
//   a tensor of standard normal values, of zeros, or an arange (int32), built on the host
//   in pageable memory and copied (baseline), for random values also built in pinned
//   memory (allocated once) with an async copy, against built by the device (a Philox
//   kernel, cudaMemsetAsync, an arange kernel). Wall clock from the start of the build
//   until the tensor is on the device (the stream synchronized). Every variant's tensor is
//   checked once: zeros and aranges exact, random values' mean and standard deviation
//   within FILL_CHECK_SIGMAS standard errors of the sample size.
// Macro (on_device/*): training steps that each add fresh Gaussian noise of the batch's
//   size to the batch (noise augmentation, bench/on_device/noisy_batches.h), the noise built on the
//   host and copied (baseline) or built on the device.
// Without a GPU every run is skipped with the reason.
#include <stdio.h>

#include "bench/driver/harness.h"
#include "bench/on_device/noisy_batches.h"
#include "bench/on_device/on_device.h"
#include "bench/driver/practice.h"
#include "kernels/clock.h"

typedef struct MicroVariant {
    TensorKind kind;
    TensorBuild build;
} MicroVariant;

static const char *build_text(const MicroVariant *v)
{
    static const char *what[3][3] = {
        {"host RNG into pageable memory + copy", "host RNG into pinned memory + async copy",
         "Philox kernel (cuRAND device API)"},
        {"host memset + pageable copy", "host memset + pinned async copy", "cudaMemsetAsync"},
        {"host loop + pageable copy", "host loop + pinned async copy", "arange kernel"},
    };
    return what[v->kind][v->build];
}

static void bench_micro(HarnessState *st, void *user)
{
    const MicroVariant *v = user;
    if (practice_skip_without_gpu(st)) return;
    int64_t axis_bytes = harness_axis_int(st, "bytes");
    if (axis_bytes < 4 || axis_bytes > ((int64_t)1 << 40)) {
        harness_fail(st, "bytes out of range 4..2^40");
        return;
    }
    size_t bytes = (size_t)axis_bytes;
    TensorBuilder b;
    int64_t wrong = 0;
    NormalCheck normal;
    // the check's build doubles as the untimed warm-up (module load, first touch)
    if (tensor_builder_create(&b, v->kind, v->build, bytes) != 0 ||
        tensor_builder_check(&b, &wrong, &normal) != 0) {
        practice_fail_or_skip(st, "setting up and checking");
        tensor_builder_free(&b);
        return;
    }
    int rc = 0;
    while (rc == 0 && harness_keep_running(st)) {
        double t0 = clock_seconds();
        rc = tensor_builder_run(&b);
        harness_set_iteration_time(st, clock_seconds() - t0);
    }
    tensor_builder_free(&b);
    if (rc != 0) {
        practice_fail_or_skip(st, "building the tensor");
        return;
    }
    harness_set_bytes_processed(st, harness_max_iterations(st) * (int64_t)bytes);
    harness_counter(st, "wrong", (double)wrong, HARNESS_COUNTER_PLAIN);
    if (v->kind == TENSOR_NORMAL) {
        harness_counter(st, "sample_mean", normal.mean, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "sample_std", normal.std, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "mean_tolerance", normal.mean_tol, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "std_tolerance", normal.std_tol, HARNESS_COUNTER_PLAIN);
    }
    char label[300];
    snprintf(label, sizeof label, "%s; wall clock until the tensor is on the device (stream "
             "synchronized); warm: the same host and device buffers every iteration", build_text(v));
    harness_set_label(st, label);
    if (wrong) {
        char msg[240];
        if (v->kind == TENSOR_NORMAL)
            snprintf(msg, sizeof msg, "not standard normal: mean %.4g (tolerance %.3g), std %.4g (tolerance "
                     "1 +- %.3g) over %zu values", normal.mean, normal.mean_tol, normal.std, normal.std_tol,
                     normal.n);
        else
            snprintf(msg, sizeof msg, "%lld %s wrong", (long long)wrong,
                     v->kind == TENSOR_ZEROS ? "bytes not zero" : "elements of the arange");
        harness_fail(st, msg);
    }
}

static const MicroVariant micro_variants[] = {
    {TENSOR_NORMAL, BUILT_HOST_PAGEABLE}, {TENSOR_NORMAL, BUILT_HOST_PINNED}, {TENSOR_NORMAL, BUILT_DEVICE},
    {TENSOR_ZEROS, BUILT_HOST_PAGEABLE},  {TENSOR_ZEROS, BUILT_DEVICE},
    {TENSOR_ARANGE, BUILT_HOST_PAGEABLE}, {TENSOR_ARANGE, BUILT_DEVICE},
};

static void register_micro(const char *practice, const char *variant, HarnessRole role, const MicroVariant *v)
{
    harness_register(&(HarnessSpec){
        .practice = practice, .variant = variant, .role = role, .timing = HARNESS_TIMING_MANUAL,
        .fn = bench_micro, .user = (void *)v, .axes = {{"bytes", "4096:268435456:*4"}},
        .unit = HARNESS_US, .min_time = 0.1, .cache = HARNESS_CACHE_WARM, .gpu_only = true});
}

static const TensorBuild built_on_host = BUILT_HOST_PAGEABLE, built_on_device = BUILT_DEVICE;

static const PracticeVariant macro_variants[] = {
    {"host_built", HARNESS_BASELINE, NULL, &built_on_host},
    {"device_built", HARNESS_TUNED, NULL, &built_on_device},
};

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    static Practice macro = {
        .name = "on_device", .variants = macro_variants, .variant_count = 2,
        .presets = "tiny,small,resnet18", .batches = "0", .mode = PRACTICE_THROUGHPUT,
        .gpu_only = true, .min_time = 0.5, .check = PRACTICE_CHECK_NONE,
        .label = "fresh N(0, 0.1^2) noise of the batch's size added every step: host RNG + pageable copy "
                 "vs Philox kernel, on a side stream synchronized before the step; noise checked"};
    macro.source = noisy_batches_source();
    practice_register(&macro);
    register_micro("on_device_randn", "host_pageable", HARNESS_BASELINE, &micro_variants[0]);
    register_micro("on_device_randn", "host_pinned", HARNESS_TUNED, &micro_variants[1]);
    register_micro("on_device_randn", "device", HARNESS_TUNED, &micro_variants[2]);
    register_micro("on_device_zeros", "host_pageable", HARNESS_BASELINE, &micro_variants[3]);
    register_micro("on_device_zeros", "device", HARNESS_TUNED, &micro_variants[4]);
    register_micro("on_device_arange", "host_pageable", HARNESS_BASELINE, &micro_variants[5]);
    register_micro("on_device_arange", "device", HARNESS_TUNED, &micro_variants[6]);
    return harness_run();
}
