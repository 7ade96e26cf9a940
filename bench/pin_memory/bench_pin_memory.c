// bench_pin_memory.c: the pin_memory / non_blocking practice (machinery in transfer.h).
// Micro (pin_memory/*): one host<->device copy per iteration over sizes from 4 KiB
//   to 256 MiB: pageable memory with a blocking copy (baseline), pinned (cudaHostAlloc)
//   blocking, pinned with cudaMemcpyAsync on a stream, and malloc'd memory registered
//   with cudaHostRegister. Timed with CUDA events; every run checks the bytes it moved.
// Macro (pin_memory_step/*): 8 steps of "copy batch i in, compute on batch i-1", every
//   variant with the same streams (copies queued on a copy stream, compute on a compute
//   stream, ordered by events): copies from the batches' pageable memory (baseline, the
//   driver stages them while the host waits) versus pin_memory: a pin thread copies each
//   batch into pinned buffers off the timed thread, as PyTorch's DataLoader does, and the
//   copies overlap the compute. Wall clock across the steps, ending in a device
//   synchronize; the last step's output is checked against the CPU.
// Macro (pin_memory_alloc/*): the pitfall of a cudaHostAlloc per batch on the pin thread
//   and a cudaFreeHost once its copy is done (baseline) versus pinned buffers allocated once.
#include <stdio.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "bench/driver/transfer.h"

static void bench_copy(HarnessState *st, void *user)
{
    const CopyVariant *variant = user;
    if (practice_skip_without_gpu(st)) return;
    const bool h2d = harness_axis_int(st, "h2d") != 0;
    const size_t bytes = (size_t)harness_axis_int(st, "bytes");
    CopySetup s;
    int64_t wrong = 0;
    if (copy_prepare(&s, *variant, bytes) != 0 || copy_verify(&s, h2d, &wrong) != 0) {
        practice_fail_or_skip(st, "setup");
        copy_release(&s);
        return;
    }
    while (harness_keep_running(st)) {
        double seconds = 0;
        if (copy_timed(&s, h2d, &seconds) != 0) {
            practice_fail_or_skip(st, "copy");
            break;
        }
        harness_set_iteration_time(st, seconds);
    }
    harness_set_bytes_processed(st, harness_max_iterations(st) * (int64_t)bytes);
    harness_counter(st, "wrong_bytes", (double)wrong, HARNESS_COUNTER_PLAIN);
    if (wrong) {
        char msg[96];
        snprintf(msg, sizeof msg, "%lld of %zu bytes arrived wrong", (long long)wrong, bytes);
        harness_fail(st, msg);
    }
    copy_release(&s);
}

static void bench_steps(HarnessState *st, void *user)
{
    const StepsVariant variant = *(const StepsVariant *)user;
    if (practice_skip_without_gpu(st)) return;
    const size_t bytes = (size_t)harness_axis_int(st, "bytes");
    const int fma = (int)harness_axis_int(st, "fma");
    StepsSetup s;
    // the first pass is the warm-up (first-touch, module load), not timed
    if (steps_prepare(&s, variant, bytes) != 0 || steps_run(&s, fma) != 0) {
        practice_fail_or_skip(st, "setup");
        steps_release(&s);
        return;
    }
    while (harness_keep_running(st)) {
        if (steps_run(&s, fma) != 0) {
            practice_fail_or_skip(st, "steps");
            break;
        }
    }
    int64_t steps = harness_max_iterations(st) * TRANSFER_STEPS_PER_ITERATION, wrong = 0;
    if (steps_check_output(&s, fma, &wrong) != 0) practice_fail_or_skip(st, "check");
    harness_counter(st, "wrong_values", (double)wrong, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "steps_per_second", (double)steps, HARNESS_COUNTER_RATE);
    harness_set_bytes_processed(st, steps * (int64_t)bytes);
    harness_set_label(st, "8 steps per iteration");
    if (wrong) harness_fail(st, "compute output differs from the CPU reference");
    steps_release(&s);
}

static const CopyVariant copy_pageable = {HOST_PAGEABLE, false};
static const CopyVariant copy_pinned = {HOST_PINNED, false};
static const CopyVariant copy_pinned_async = {HOST_PINNED, true};
static const CopyVariant copy_registered_async = {HOST_REGISTERED, true};
static const StepsVariant steps_variants[] = {STEPS_PAGEABLE_BLOCKING, STEPS_PINNED_ASYNC,
                                              STEPS_PINNED_PER_BATCH};

static void register_copies(void)
{
    struct { const char *name; const CopyVariant *v; HarnessRole role; } variants[] = {
        {"pageable", &copy_pageable, HARNESS_BASELINE},
        {"pinned", &copy_pinned, HARNESS_TUNED},
        {"pinned_async", &copy_pinned_async, HARNESS_TUNED},
        {"registered_async", &copy_registered_async, HARNESS_TUNED},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        harness_register(&(HarnessSpec){
            .practice = "pin_memory", .variant = variants[i].name, .role = variants[i].role,
            .timing = HARNESS_TIMING_CUDA_EVENTS, .fn = bench_copy, .user = (void *)variants[i].v,
            .axes = {{"h2d", "1,0"}, {"bytes", "4096:268435456:*4"}}, .unit = HARNESS_US,
            // warm: the same buffers every iteration, as a loader's pinned ring; the copy is
            // bound by PCIe and host memory, which an L2 flush would not change
            .cache = HARNESS_CACHE_WARM});
    }
}

static void register_steps(const char *practice, const char *variant, HarnessRole role,
                           const StepsVariant *steps)
{
    harness_register(&(HarnessSpec){
        .practice = practice, .variant = variant, .role = role, .timing = HARNESS_TIMING_WALL,
        .fn = bench_steps, .user = (void *)steps,
        .axes = {{"bytes", "4194304:67108864:*4"}, {"fma", "64:4096:*8"}}, .unit = HARNESS_MS,
        .gpu_only = true});
}

int main(int argc, char **argv)
{
    register_copies();
    register_steps("pin_memory_step", "pageable_blocking", HARNESS_BASELINE, &steps_variants[0]);
    register_steps("pin_memory_step", "pinned_async_overlap", HARNESS_TUNED, &steps_variants[1]);
    register_steps("pin_memory_alloc", "pinned_per_batch", HARNESS_BASELINE, &steps_variants[2]);
    register_steps("pin_memory_alloc", "pinned_once", HARNESS_TUNED, &steps_variants[1]);
    return harness_main(argc, argv);
}
