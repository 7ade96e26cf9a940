// core_backends.h: the backends core_create chooses from (kernels/core/core.c). Each sets
// itself up on a Core whose cfg and graph are filled in, filling in its table of functions
// (core_internal.h). core.c calls these; a backend includes this header only to declare
// its own entry point and never calls back into core.c.
#ifndef CORE_BACKENDS_H
#define CORE_BACKENDS_H

#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

// The CPU backends, fast or reference by core->backend (kernels/cpu/core_cpu.c).
int core_cpu_init(Core *core);
// The CUDA backend (kernels/cuda/core_cuda.cu).
int core_cuda_init(Core *core);

#ifdef __cplusplus
}
#endif
#endif
