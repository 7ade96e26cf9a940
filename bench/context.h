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
