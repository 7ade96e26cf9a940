// model_plan.h: the memory plan of one pass over a ModelGraph, shared by the backends.
// Activations and their gradients live at offsets in one arena. The plan keeps what
// backward needs and no more (as autograd's saved tensors): a conv its input, a BN its
// input (and its output when a ReLU is fused into it), a ReLU its output, a linear its
// input; an add and the global average pool nothing. Everything else is reused as soon as
// its last reader is done:
//   - a ReLU (and an add, as torchvision's `out += identity`) runs in place over an input
//     that nothing reads later; a ReLU or BN backward writes dx over dy likewise;
//   - the add's backward passes its output gradient on as the gradient of an input whose
//     write would be a plain copy (no copy); an input gradient that accumulates is added
//     into only after every reader of the buffer's old value;
//   - buffers whose lifetimes do not overlap share bytes (greedy offset placement,
//     largest first).
// With fusion, BN+ReLU and add+ReLU are one op each: the ReLU's output is the fused op's.
// The timeline of a training pass: forward op i at time i, the loss at n_ops, backward op
// i at 2 * n_ops - i. Tensor 0 (the input batch) is not in the arena.
#ifndef MODEL_PLAN_H
#define MODEL_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_PLAN_ALIGN 256  // bytes: every buffer's offset and size are multiples
#define MODEL_PLAN_NONE ((size_t)-1)

typedef struct ModelPlanOptions {
    bool training;  // forward, loss and backward (else forward and loss only: eval)
    bool reuse;     // reuse and alias buffers; false: every activation and gradient in its
                    // own buffer for the whole pass (the keep-everything layout)
    bool fuse;      // BN+ReLU and add+ReLU as one op each
    int checkpoint_segments; // activation checkpointing (training only): 0 or 1 none; k:
                    // checkpoint_sequential over the graph's units (model_plan_units) in
                    // k segments of units / k units (k > units: units); the first k - 1
                    // keep only their input, the rest is dropped after the forward and
                    // recomputed just before the segment's backward; the last runs plainly
} ModelPlanOptions;

// What the plan changes in how an op runs.
typedef struct ModelPlanOp {
    bool relu_fused;  // BN or add: writes max(., 0); the ReLU after it runs nothing forward
    bool fused_away;  // ReLU: computed forward by the op before it (its output is that op's)
    bool bwd_fused;   // ReLU: its backward runs inside the BN backward before it (BN+ReLU;
                      // the BN's dy is the ReLU's dy, and it reads the ReLU's output y)
    bool in_alias;    // add backward: the gradient of `in` is dy's buffer itself (no copy)
    bool in2_alias;   // the same for in2
    bool recompute;   // checkpointing: runs forward again (training mode, running statistics
                      // untouched) before its segment's backward, into rec_off
    bool recompute_before; // the last op of a checkpointed segment: before its backward, the
                      // ops segment_first..this one with `recompute` set run forward again,
                      // in order, reading and writing rec_off where a tensor has one
    int segment_first;
} ModelPlanOp;

typedef struct ModelPlan {
    ModelPlanOptions options;
    int n;                                // batch
    size_t elem_size;                     // bytes per element
    size_t act_off[MODEL_MAX_TENSORS];    // byte offset of tensor t's activation (NONE for 0)
    size_t dact_off[MODEL_MAX_TENSORS];   // byte offset of its gradient (NONE: not needed)
    size_t tensor_bytes[MODEL_MAX_TENSORS]; // n * elements * elem_size (unaligned)
    size_t rec_off[MODEL_MAX_TENSORS];  // checkpointing: byte offset of tensor t's recomputed
                                        // activation, what backward reads (NONE: not recomputed)
    ModelPlanOp ops[MODEL_MAX_OPS];
    int checkpointed_segments;          // segments recomputed in backward (0: none)
    size_t arena_bytes;     // the arena this plan needs
    size_t keep_all_bytes;  // every activation and gradient in its own buffer (no plan)
    size_t live_peak_bytes; // most bytes of buffers live at one time: no placement of these
                            // buffers needs less
} ModelPlan;

// Plans a pass of batch n with elements of elem_size bytes; -1 (bad usage) for n <= 0,
// elem_size 0 or sizes that overflow.
int model_plan_make(const ModelGraph *g, int n, size_t elem_size, const ModelPlanOptions *o,
                    ModelPlan *plan);
// Whether op i of g (a BN or an add) can take the ReLU after it: the next op is a ReLU of
// its output and nothing else reads that output.
bool model_plan_fusable(const ModelGraph *g, int i);
// The graph's units for checkpointing, as a sequential model's modules: writes the first op
// of each (at most max) and returns their count. A cut is safe after any op whose output
// is the only value made before the cut that later ops read (a GPT's residual stream x);
// of the safe cuts, a unit ends at those after an op that closes a module: a ReLU, the
// embedding, or a residual add with a GELU since the unit began (a transformer block's
// second add; its first, after attention, leaves the block whole). ResNet: the stem, each
// basic block, then the head of pooling and classifier; MLP: each hidden layer, then the
// classifier; GPT: the embedding, each block (ln_1 .. second add), then the head (final
// LayerNorm and LM head).
int model_plan_units(const ModelGraph *g, int *first, int max);

#ifdef __cplusplus
}
#endif
#endif
