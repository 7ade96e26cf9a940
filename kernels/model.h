// model.h: the network as a flat list of ops over numbered tensors, shared by both
// backends. Parameters live in one flat fp32 array (conv weights KCRS, then with
// CoreModelConfig.conv_bias the conv's bias of cout right after its weight: b_off = w_off +
// cout*cin*k*k; BN gamma then beta, linear weight [out][in] then bias), so zero-grad, clipping, the inf/nan check
// and SGD each touch one buffer. Tensor 0 is the input; shapes are per sample.
// A GPT's tensors are token-major rows: shape {c = features, h = tokens, w = 1} holds h rows
// of c floats per sequence (tensor 0: the tokens, {1, seq_len, 1}, never in the arena).
// Its parameters: an embedding's token table [vocab][c] at w_off and position table
// [seq_len][c] at b_off; a LayerNorm's gamma then beta; linears as above ([out][in], bias),
// applied to each of `rows` rows of a sample.
#ifndef MODEL_H
#define MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/core.h"
#include "kernels/layers_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_MAX_OPS 256
#define MODEL_MAX_TENSORS 256
#define MODEL_BN_EPS 1e-5f
#define MODEL_BN_MOMENTUM 0.1f
#define GPT_MAX_SEQ 4096  // tokens per sequence at most (the fast attention's row buffers)

typedef enum {
    OP_CONV, OP_BN, OP_RELU, OP_ADD, OP_GAP, OP_LINEAR,
    OP_EMBED,     // GPT: token + position embedding of the batch's tokens (no input gradient)
    OP_LAYERNORM, // GPT: LayerNorm over each row's c features (backward recomputes statistics)
    OP_GELU,      // GPT: exact GELU (backward reads its input)
    OP_ATTN,      // GPT: causal multi-head attention of a q|k|v tensor (in: {3c, t}, out:
                  // {c, t}); `aux` is what its backward needs besides in and out: the
                  // probabilities {heads * t * t, 1, 1} (unfused) or the rows' log-sum-exp
                  // {heads * t, 1, 1} (fused)
} ModelOpKind;

typedef struct ModelShape { int c, h, w; } ModelShape;

typedef struct ModelOp {
    ModelOpKind kind;
    int in, in2, out;        // tensor ids; in2 only for OP_ADD
    int cin, cout;           // conv: channels; linear: features; BN: cin = channels
    int k, stride, pad;      // conv
    size_t w_off, b_off;     // params: conv/linear weight, conv (when bias)/linear bias;
                             // BN gamma/beta
    bool bias;               // conv: has a bias at b_off = w_off + cout*cin*k*k (conv_bias)
    size_t stat_off;         // BN: running mean at stat_off, running var at +cin
    size_t save_off;         // BN: batch mean at save_off, inv std at +cin (per step)
    int rows;                // linear, LayerNorm: rows per sample (1 but for a GPT's tokens)
    int heads;               // attention: heads
    bool fused;              // attention: CORE_ATTENTION_FUSED
    int aux;                 // attention: the tensor its forward writes for backward (-1: none)
    float init_std;          // linear, embedding: normal(0, init_std) weights and zero bias
                             // (GPT-2's initialisation); 0: PyTorch's default init
    bool in_grad;            // backward must produce the gradient of `in`
    bool in_accum, in2_accum; // backward adds into the input gradient (else overwrites)
} ModelOp;

typedef struct ModelGraph {
    int n_ops, n_tensors;
    ModelOp ops[MODEL_MAX_OPS];
    ModelShape shapes[MODEL_MAX_TENSORS];
    size_t n_params;   // fp32 parameters
    size_t n_stats;    // BN running statistics
    size_t n_saved;    // BN per-step saved statistics
    int logits;        // tensor id of the output: N x rows (shape h) of classes (shape c)
    size_t max_col;    // floats of the largest im2col buffer per image (CPU)
} ModelGraph;

// Builds the op list for a model config; -1 (with a reason) if it does not fit.
int model_build(const CoreModelConfig *cfg, ModelGraph *g);
// The shape of convolution op for a batch of n.
ConvShape model_conv_shape(const ModelGraph *g, const ModelOp *op, int n);
// Elements per sample of tensor t.
size_t model_tensor_size(const ModelGraph *g, int t);
// Initial parameters (He-normal convs; conv biases, linears PyTorch-style uniform in
// +-1/sqrt(fan_in), a conv's bias drawn right after its weight; BN 1/0) and
// running statistics (mean 0, var 1), deterministic in seed.
void model_init(const ModelGraph *g, uint64_t seed, float *params, float *stats);

#ifdef __cplusplus
}
#endif
#endif
