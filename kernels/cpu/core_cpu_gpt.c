// core_cpu_gpt.c: the transformer ops of the CPU backends (core_cpu_gpt.h) over the layers
// of kernels/layers_gpt.h: the reference's on one thread, or the fast backend's.
#include "kernels/cpu/core_cpu_gpt.h"

#include "kernels/layers_gpt.h"

bool cpu_gpt_op(const ModelOp *op)
{
    return op->kind == OP_EMBED || op->kind == OP_LAYERNORM || op->kind == OP_GELU ||
           op->kind == OP_ATTN;
}

void cpu_gpt_forward(bool fast, const CpuWorkspace *ws, const ModelOp *op, int n,
                     const float *params, const GptOpIo *io)
{
    int rows = n * op->rows, t = op->rows;
    switch (op->kind) {
    case OP_EMBED:
        if (fast) embed_fwd_fast(ws, n, t, op->cout, io->tokens, params + op->w_off, params + op->b_off, io->y);
        else embed_fwd_cpu(n, t, op->cout, io->tokens, params + op->w_off, params + op->b_off, io->y);
        break;
    case OP_LAYERNORM:
        if (fast) layernorm_fwd_fast(ws, rows, op->cin, io->x, params + op->w_off, params + op->b_off, io->y);
        else layernorm_fwd_cpu(rows, op->cin, io->x, params + op->w_off, params + op->b_off, io->y);
        break;
    case OP_GELU: {
        size_t count = (size_t)rows * op->cin;
        if (fast) gelu_fwd_fast(ws, count, io->x, io->y);
        else gelu_fwd_cpu(count, io->x, io->y);
        break;
    }
    case OP_ATTN:
        if (op->fused) {
            if (fast) attn_fwd_fused_fast(ws, n, t, op->cout, op->heads, io->x, io->aux, io->y);
            else attn_fwd_fused_cpu(n, t, op->cout, op->heads, io->x, io->aux, io->y);
        } else {
            if (fast) attn_fwd_unfused_fast(ws, n, t, op->cout, op->heads, io->x, io->aux, io->y);
            else attn_fwd_unfused_cpu(n, t, op->cout, op->heads, io->x, io->aux, io->y);
        }
        break;
    default: break;
    }
}

void cpu_gpt_backward(bool fast, const CpuWorkspace *ws, const ModelOp *op, int n,
                      const float *params, const GptOpIo *io, float *grads, bool accum_params)
{
    int rows = n * op->rows, t = op->rows;
    switch (op->kind) {
    case OP_EMBED:
        if (fast)
            embed_bwd_fast(ws, n, t, op->cout, op->cin, io->tokens, io->dy, grads + op->w_off,
                           grads + op->b_off, accum_params);
        else
            embed_bwd_cpu(n, t, op->cout, op->cin, io->tokens, io->dy, grads + op->w_off,
                          grads + op->b_off, accum_params);
        break;
    case OP_LAYERNORM:
        if (fast)
            layernorm_bwd_fast(ws, rows, op->cin, io->x, io->dy, params + op->w_off, io->dx,
                               op->in_accum, grads + op->w_off, grads + op->b_off, accum_params);
        else
            layernorm_bwd_cpu(rows, op->cin, io->x, io->dy, params + op->w_off, io->dx,
                              op->in_accum, grads + op->w_off, grads + op->b_off, accum_params);
        break;
    case OP_GELU: {
        if (!io->dx) break;
        size_t count = (size_t)rows * op->cin;
        if (fast) gelu_bwd_fast(ws, count, io->x, io->dy, io->dx, op->in_accum);
        else gelu_bwd_cpu(count, io->x, io->dy, io->dx, op->in_accum);
        break;
    }
    case OP_ATTN:
        if (!io->dx) break;
        if (op->fused) {
            if (fast)
                attn_bwd_fused_fast(ws, n, t, op->cout, op->heads, io->x, io->y, io->aux, io->dy,
                                    io->dx, op->in_accum);
            else
                attn_bwd_fused_cpu(n, t, op->cout, op->heads, io->x, io->y, io->aux, io->dy,
                                   io->dx, op->in_accum);
        } else {
            if (fast)
                attn_bwd_unfused_fast(ws, n, t, op->cout, op->heads, io->x, io->aux, io->dy,
                                      io->dx, op->in_accum);
            else
                attn_bwd_unfused_cpu(n, t, op->cout, op->heads, io->x, io->aux, io->dy, io->dx,
                                     op->in_accum);
        }
        break;
    default: break;
    }
}
