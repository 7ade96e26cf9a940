// context.h: the device and library facts that make a result comparable across
// machines (GPU, driver, CUDA runtime, cuBLAS, cuDNN, NCCL, host), gathered once.
#ifndef CONTEXT_H
#define CONTEXT_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CONTEXT_MAX_KEYS 64

typedef struct {
    int count;
    char keys[CONTEXT_MAX_KEYS][32];
    char values[CONTEXT_MAX_KEYS][256];
    bool has_gpu;
    char no_gpu_reason[128];
} SuiteContext;

// NVML's view of device 0 at one moment (as nvbench records around a measurement).
typedef struct {
    bool has_clock, has_temperature, has_throttle, has_power;
    unsigned sm_clock_mhz;                // current SM clock
    unsigned temperature_c;               // GPU die temperature
    unsigned long long throttle_reasons;  // NVML clock-event (throttle) reason bits
    double power_w;                       // board power draw
} GpuState;

// Samples device 0 through NVML, opened at run time on the first call and kept open.
// False (and *s all "has_" false) when there is no NVML or it does not answer.
bool context_gpu_state(GpuState *s);

// A GpuState as a run's counters, named "<what>_<when>..." (when: "before" or "after"):
// gpu_sm_clock_<when>_mhz, gpu_temp_<when>_c, gpu_throttle_<when>, gpu_power_<when>_w,
// each only when NVML gave it. Returns how many it wrote into out.
#define GPU_STATE_MAX_COUNTERS 4
typedef struct {
    char name[40];
    double value;
} GpuStateCounter;
int context_gpu_state_counters(const GpuState *s, const char *when, GpuStateCounter out[GPU_STATE_MAX_COUNTERS]);

// The clock a repetition's SM clock is judged against: the locked SM clock when the
// clocks are locked, else the default (maximum) SM clock; 0 where unknown.
typedef struct {
    unsigned locked_sm_mhz;
    unsigned default_sm_mhz;
} GpuClockReference;

// Throttled, as nvbench judges a sample: the SM clock after the run under this fraction
// of the reference clock (the locked one if set, else the default)...
#define GPU_THROTTLE_CLOCK_FRACTION 0.75
// ...or, before or after the run, one of these NVML clock-event reasons: hardware slowdown
// (0x8), software and hardware thermal slowdown (0x20, 0x40), hardware power brake (0x80).
// Idle (0x1), user-set clocks (0x2), the power cap (0x4, a loaded GPU's normal state) and
// sync boost (0x10) are not throttling.
#define GPU_THROTTLE_REASONS 0xE8ULL

// Whether a repetition ran throttled, from the samples taken before and after it (before
// may be NULL) and the reference clock. Unknown parts (a sample without a clock, a
// reference of 0) count as not throttled: only what NVML said can discard a repetition.
bool gpu_sample_throttled(const GpuState *before, const GpuState *after, const GpuClockReference *ref);
// The reference clock from a context (gpu_clocks_locked, gpu_sm_clock_max_mhz): all 0
// without a GPU or where the context cannot say.
void context_clock_reference(const SuiteContext *c, GpuClockReference *ref);

// Collects the context of device 0 and of the linked libraries. Device fields are
// "none" without a GPU; library versions are always filled. Never fails.
void context_collect(SuiteContext *c);
// Value of a key, or "" when absent.
const char *context_get(const SuiteContext *c, const char *key);
// Results-folder slug: "<gpu-slug>_<driver>", or "cpu_<host>" without a GPU.
void context_slug(const SuiteContext *c, char *out, size_t out_size);

#ifdef __cplusplus
}
#endif
#endif
