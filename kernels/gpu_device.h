// gpu_device.h: is there a usable CUDA device, and why not.
#ifndef GPU_DEVICE_H
#define GPU_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// True when at least one CUDA device can be used. Otherwise writes a reason that
// starts with "no CUDA device" into why (if not NULL). Never aborts.
bool gpu_device_available(char *why, size_t why_size);

#ifdef __cplusplus
}
#endif
#endif
