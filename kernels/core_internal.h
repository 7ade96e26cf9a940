// core_internal.h: what core.c shares with the backends (not part of the public API).
// A Core holds the config, the op graph and a table of backend functions.
#ifndef CORE_INTERNAL_H
#define CORE_INTERNAL_H

#include "kernels/core.h"
#include "kernels/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CoreOps {
    int (*step)(Core *core, const CoreBatch *batch, float lr, CoreStepResult *result);
    int (*eval)(Core *core, const CoreBatch *batch, CoreEvalResult *result);
    int (*loss_grad)(Core *core, const CoreBatch *batch, float *loss, float *grad);
    int (*sync)(Core *core);
    int (*stats)(Core *core, CoreStats *stats);
    int (*params_get)(Core *core, float *dst);
    int (*params_set)(Core *core, const float *src);
    int (*inject)(Core *core, float value);
    int (*conv_algos)(Core *core, CoreConvAlgoInfo *out, int max); // NULL: no convolutions
    void (*destroy)(Core *core);
} CoreOps;

struct Core {
    CoreConfig cfg;
    CoreBackend backend;   // CPU or CUDA, never AUTO
    ModelGraph graph;
    const CoreOps *ops;
    void *impl;            // backend state
    int step;              // next step index
};

// Sets up a CPU backend (fast or reference, by core->backend) on a Core whose cfg and
// graph are filled in.
int core_cpu_init(Core *core);
// Sets up the CUDA backend likewise.
int core_cuda_init(Core *core);

#ifdef __cplusplus
}
#endif
#endif
