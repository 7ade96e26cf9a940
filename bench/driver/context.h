// context.h: the device and library facts that make a result comparable across
// machines (GPU, driver, CUDA runtime, cuBLAS, cuDNN, NCCL, host), gathered once.
#ifndef CONTEXT_H
#define CONTEXT_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CONTEXT_MAX_KEYS 32

typedef struct {
    int count;
    char keys[CONTEXT_MAX_KEYS][32];
    char values[CONTEXT_MAX_KEYS][256];
    bool has_gpu;
    char no_gpu_reason[128];
} SuiteContext;

// NVML's view of device 0 at one moment (as nvbench records around a measurement).
typedef struct {
    bool has_clock, has_temperature, has_throttle;
    unsigned sm_clock_mhz;                // current SM clock
    unsigned temperature_c;               // GPU die temperature
    unsigned long long throttle_reasons;  // NVML clock-event (throttle) reason bits
} GpuState;

// Samples device 0 through NVML, opened at run time on the first call and kept open.
// False (and *s all "has_" false) when there is no NVML or it does not answer.
bool context_gpu_state(GpuState *s);

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
