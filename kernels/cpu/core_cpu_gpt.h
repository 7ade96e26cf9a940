// core_cpu_gpt.h: the transformer ops of the CPU backends' driver (core_cpu.c): each op's
// forward and backward on the reference layers (one thread) or the fast ones, by `fast`.
// Internal to kernels/cpu/.
#ifndef CORE_CPU_GPT_H
#define CORE_CPU_GPT_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/layers_cpu_fast.h"
#include "kernels/model.h"

// The buffers one op reads and writes (NULL where it has none).
typedef struct GptOpIo {
    const int32_t *tokens; // the batch's (OP_EMBED)
    const float *x;        // input activation
    float *y;              // output activation (backward: read by the fused attention)
    float *aux;            // attention: probabilities or log-sum-exp
    const float *dy;       // output gradient
    float *dx;             // input gradient (NULL: not needed)
} GptOpIo;

// Whether op is one of the transformer's own kinds (embedding, LayerNorm, GELU, attention).
bool cpu_gpt_op(const ModelOp *op);
// Forward of op over n sequences.
void cpu_gpt_forward(bool fast, const CpuWorkspace *ws, const ModelOp *op, int n,
                     const float *params, const GptOpIo *io);
// Backward: io->dx (=|+= op->in_accum) and the op's parameter gradients in grads (=|+=
// accum_params).
void cpu_gpt_backward(bool fast, const CpuWorkspace *ws, const ModelOp *op, int n,
                      const float *params, const GptOpIo *io, float *grads, bool accum_params);

#endif
