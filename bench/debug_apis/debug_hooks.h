// debug_hooks.h: what PyTorch's debugging APIs cost in a training step, as gradient hooks of
// the training core (core_set_grad_hooks): anomaly detection (torch.autograd.detect_anomaly:
// after every op's backward its gradients are scanned for NaN/Inf, with the sync the scan
// needs to raise at once) and per-op profiling (torch.autograd.profiler.profile: a timestamp
// per op, CPU clock or a CUDA event on the core's stream, read after the step). One state
// per core, kept while the process lives (found again by the core's address).
#ifndef DEBUG_HOOKS_H
#define DEBUG_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

// DEBUG_OFF: no hooks (the debugging APIs disabled, the guide's advice).
typedef enum { DEBUG_OFF, DEBUG_ANOMALY, DEBUG_PROFILER } DebugMode;

// What a core's hooks did since they were installed.
typedef struct DebugCounts {
    int64_t steps;        // updates the hooks saw (before_update calls)
    int64_t ops_checked;  // anomaly: op gradient ranges scanned
    int64_t events;       // profiler: timestamps taken (CPU) or CUDA events recorded
    int64_t events_read;  // profiler: of those, read back after their step
    double profiled_ms;   // profiler: the op intervals read back, summed
} DebugCounts;

// Installs the mode's hooks on core (its state reset; DEBUG_OFF: none, counts 0), on the CPU
// or on the core's CUDA stream (gpu). 0 or -1.
int debug_hooks_install(Core *core, DebugMode mode, bool gpu);
// The counts of core's hooks (all 0 when none were installed on it).
DebugCounts debug_hooks_counts(const Core *core);

// The anomaly scan of one op's gradient range grads[offset, offset + count): on the CPU
// (host memory), or on the GPU (device memory, on `stream`, waited for). 0 when every value
// is finite; -1 with ERROR_BAD_DATA naming the range and the first bad value otherwise.
int debug_scan_host(const float *grads, size_t offset, size_t count);
int debug_scan_device(const float *grads, size_t offset, size_t count, void *stream);

// The GPU half (debug_hooks_cuda.cu). A scan flag per process; events per core state.
// The first index in [0, count) of a non-finite value of device range, or -1 (in *bad_index).
int debug_cuda_find_nonfinite(const float *grads, size_t count, void *stream, int64_t *bad_index);
typedef struct DebugEvents DebugEvents;
int debug_cuda_events_create(DebugEvents **out);
// Records event number `index` of the current step on stream.
int debug_cuda_event_record(DebugEvents *e, int index, void *stream);
// Waits for the step's last event (`count` recorded) and sums the intervals between them (ms).
int debug_cuda_events_read(DebugEvents *e, int count, double *ms);
void debug_cuda_events_free(DebugEvents *e);

#ifdef __cplusplus
}
#endif
#endif
