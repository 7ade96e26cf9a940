// core.h: the shared training core's public API.
// One model API, three backends (CUDA; the fast CPU backend; the plain-C CPU reference,
// the tests' oracle). A Core is created from a CoreConfig; every tuning practice is a
// field of that config. A training step takes a batch of NCHW float32 images and int32
// labels, in host or device memory, and runs forward, softmax cross-entropy, backward
// and the SGD update. All functions return 0 on success and -1 on error, with the reason
// (file and line) and its kind in the error store of kernels/error.h: ERROR_OUT_OF_MEMORY
// for a batch too large for the device, ERROR_NO_DEVICE, ERROR_BAD_USAGE for a bad config.
#ifndef CORE_H
#define CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/amp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CORE_BACKEND_AUTO,    // CUDA when a device is usable, else the fast CPU backend
    CORE_BACKEND_CPU,     // fast CPU: OpenBLAS GEMMs, OpenMP threads, SIMD loops
    CORE_BACKEND_CUDA,
    CORE_BACKEND_CPU_REF, // "cpu-ref": the plain-C, single-threaded reference, the oracle
                          // of the tests (same maths as CPU, different rounding)
} CoreBackend;

// What each precision means on the GPU (the CPU backends compute in fp32 throughout;
// FP16 still runs the whole loss-scaling path there).
typedef enum {
    CORE_PRECISION_FP32,        // PyTorch's fp32 default: cuDNN convolutions may use TF32
                                // (torch.backends.cudnn.allow_tf32 = True), cuBLAS GEMMs are
                                // strict fp32 (torch.backends.cuda.matmul.allow_tf32 = False)
    CORE_PRECISION_FP32_STRICT, // no TF32 anywhere: FMA-only cuDNN math, strict cuBLAS
    CORE_PRECISION_TF32,        // TF32 tensor-core math in convolutions and GEMMs
    CORE_PRECISION_FP16,        // fp16 compute, fp32 master weights, dynamic loss scaling
    CORE_PRECISION_BF16,        // bf16 compute, fp32 master weights, no scaling
    CORE_PRECISION_COUNT
} CorePrecision;

typedef enum { CORE_LAYOUT_NCHW, CORE_LAYOUT_NHWC } CoreLayout;

// The storage type of activations (CoreStats.activation_type).
typedef enum { CORE_DTYPE_FP32, CORE_DTYPE_FP16, CORE_DTYPE_BF16 } CoreDType;

typedef enum {
    CORE_ZERO_GRAD_MEMSET,      // memset every gradient, then accumulate (baseline)
    CORE_ZERO_GRAD_SET_TO_NONE, // the first write overwrites; no memset
} CoreZeroGrad;

typedef enum {
    CORE_CONV_ALGO_HEURISTIC, // cuDNN heuristics (cudnn.benchmark = False)
    CORE_CONV_ALGO_AUTOTUNE,  // time the candidates once per shape, cache the winner
} CoreConvAlgo;

typedef enum {
    CORE_READBACK_EVERY_STEP, // copy the loss to the host and sync each step (.item())
    CORE_READBACK_DEFERRED,   // accumulate on the device, read every readback_interval
} CoreReadback;

typedef enum {
    CORE_POINTWISE_SEPARATE, // BN, add and ReLU each their own kernel (PyTorch eager)
    CORE_POINTWISE_FUSED,    // BN+ReLU and add+ReLU one kernel each (what a fuser does)
} CorePointwise;

typedef enum { CORE_MODEL_RESNET, CORE_MODEL_MLP, CORE_MODEL_GPT } CoreModelKind;

// How a GPT's causal self-attention is computed (the same maths, parameters and result up
// to float rounding): what torch.nn.functional.scaled_dot_product_attention's backends
// choose between.
typedef enum {
    CORE_ATTENTION_UNFUSED, // softmax(QK^T / sqrt(d)) V with the T x T probabilities
                            // materialised and kept for backward (eager PyTorch; SDPA's math
                            // backend)
    CORE_ATTENTION_FUSED,   // one pass with an online softmax, the T x T matrix never stored;
                            // backward recomputes it from Q, K and each row's log-sum-exp
                            // (FlashAttention; SDPA's flash / memory-efficient backends)
} CoreAttention;

// CoreConfig.checkpoint_segments for a checkpoint around every unit but the head.
#define CORE_CHECKPOINT_EACH_UNIT 1024

typedef enum { CORE_LR_CONSTANT, CORE_LR_COSINE, CORE_LR_STEP } CoreLrDecay;

typedef enum { CORE_MEMORY_HOST, CORE_MEMORY_DEVICE } CoreMemory;

// The network. RESNET: stem conv (stem_kernel, stem_stride) + BN + ReLU, then
// `stages` stages of `blocks_per_stage` basic blocks (conv-BN-ReLU-conv-BN + shortcut,
// ReLU); stage s has width << s channels and stages after the first halve the size
// (1x1 projection shortcut). Then global average pooling and a linear classifier.
// MLP: flatten, mlp_layers hidden layers of mlp_hidden units with ReLU, linear.
// GPT (decoder-only transformer, GPT-2's shape): token embedding (num_classes = the
// vocabulary) plus learned position embedding (seq_len positions) of `width`, then
// gpt_layers pre-LayerNorm blocks (x += proj(attention(ln_1(x))); x += fc2(gelu(fc(ln_2(x)))),
// causal multi-head attention of gpt_heads heads over a fused q|k|v projection, an MLP of
// 4 x width, exact GELU), a final LayerNorm and an untied linear LM head (with bias) to the
// vocabulary; next-token cross-entropy averaged over every position of every sequence.
// in_channels, image_size and the ResNet / MLP fields are ignored; a batch carries tokens.
typedef struct CoreModelConfig {
    CoreModelKind kind;
    int in_channels;
    int image_size;  // square images: image_size x image_size
    int num_classes;
    int width;       // channels of the first stage
    int stages;
    int blocks_per_stage;
    int stem_kernel; // 3 or 7
    int stem_stride;
    int mlp_hidden;
    int mlp_layers;
    bool conv_bias;     // every convolution has a per-channel bias (PyTorch's Conv2d default,
                        // bias=True); false: bias=False, the tuning guide's advice before a BN
    bool no_batch_norm; // no BN ops at all: conv -> ReLU, the projection shortcut a conv
                        // alone (the shape of a BN-folded inference network, core_fold_bn);
                        // both false by default; the MLP (no convolution, no BN) ignores them
    int seq_len;        // GPT: tokens per sequence (the position table's rows)
    int gpt_layers;     // GPT: transformer blocks
    int gpt_heads;      // GPT: attention heads (width % gpt_heads == 0)
    CoreAttention attention; // GPT: how attention is computed (a practice: it changes the
                        // memory the pass needs, not the parameters or the maths)
} CoreModelConfig;

typedef enum {
    CORE_OPTIM_SGD,   // torch.optim.SGD: momentum, L2 weight decay added to the gradient
    CORE_OPTIM_ADAMW, // torch.optim.AdamW: betas, eps, decoupled weight decay
} CoreOptimizer;

// The optimizer (SGD with momentum, or AdamW), LR schedule, gradient clipping.
// AdamW follows torch.optim.AdamW (amsgrad = False): with t the number of updates applied
// (a step the GradScaler skips does not count), p *= 1 - lr * weight_decay (decoupled),
// m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2,
// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps); momentum is ignored.
// core_config_preset sets beta1, beta2, eps to torch's defaults (0.9, 0.999, 1e-8) and
// optimizer to SGD; core_config_validate refuses betas outside [0, 1) or eps <= 0 under AdamW.
typedef struct CoreOptimConfig {
    float base_lr;        // at reference_batch images per step
    float momentum;       // SGD only
    float weight_decay;   // SGD: L2 (g += wd p); AdamW: decoupled (p *= 1 - lr wd)
    float clip_norm;      // clip by global L2 norm (after unscaling); <= 0: off
    CoreLrDecay decay;
    int warmup_steps;     // linear warmup from base/warmup to base over these steps
    int total_steps;      // cosine decays to min_lr at total_steps
    float min_lr;
    int step_size;        // CORE_LR_STEP: lr *= step_gamma every step_size steps
    float step_gamma;
    bool linear_scaling;  // lr = base_lr * batch_size / reference_batch
    int reference_batch;
    CoreOptimizer optimizer;
    float beta1, beta2, eps; // AdamW only
} CoreOptimConfig;

typedef struct CoreConfig {
    CoreBackend backend;
    int device;                 // CUDA device ordinal
    CoreModelConfig model;
    CoreOptimConfig optim;
    CorePrecision precision;
    AmpScalerConfig scaler;     // used with CORE_PRECISION_FP16
    CoreLayout layout;          // activation layout on the GPU (the API is always NCHW)
    CoreZeroGrad zero_grad;
    CoreConvAlgo conv_algo;
    CoreReadback readback;
    int readback_interval;      // K for CORE_READBACK_DEFERRED
    CorePointwise pointwise;    // fused pointwise ops (CUDA and the fast CPU backend; the
                                // reference backend always runs them separately)
    int checkpoint_segments;    // activation checkpointing, as torch.utils.checkpoint's
                                // checkpoint_sequential(units, k) over the model's units (ResNet:
                                // the stem, each basic block, the head; MLP: each hidden layer,
                                // the head; GPT: the embedding, each transformer block, the head
                                // of final LayerNorm and LM head): 0 or 1 off; k: the first
                                // k - 1 segments of units / k units keep only their input in
                                // forward and run their forward again just before their
                                // backward (BN with the same batch
                                // statistics, running statistics updated once), the last runs
                                // plainly; k >= units (CORE_CHECKPOINT_EACH_UNIT): every unit
                                // but the head is its own segment (checkpoint() around each block).
                                // Training is bit-identical on the CPU backends. Unlike PyTorch,
                                // whose checkpoint reruns BN in training mode and so updates
                                // running_mean/var (and num_batches_tracked) a second time
                                // (pytorch/pytorch#96136; fairscale's checkpoint_wrapper patches
                                // BN to avoid it). Combines with cuda_graph (the recompute is
                                // more device work in the captured step) and with the split
                                // step, gradient hooks and every precision
    int batch_size;             // the expected batch; used for LR scaling (buffers and
                                // plans come with the first batch of each kind of pass)
    size_t workspace_limit;     // max cuDNN workspace bytes per convolution (0: 256 MiB)
    bool deterministic;         // only deterministic cuDNN algorithms (for tests that compare
                                // at tight tolerances; benchmarks leave it false, as PyTorch's
                                // torch.backends.cudnn.deterministic = False)
    uint64_t seed;              // weight initialisation
    int cpu_threads;            // fast CPU backend: compute threads of this core (0:
                                // core_cpu_threads(), the process-wide setting, as
                                // torch.set_num_threads / OMP_NUM_THREADS); results are the
                                // same for any count. The reference and CUDA backends ignore it
    uint64_t cpu_affinity;      // fast CPU backend: nonzero binds its compute threads to these
                                // CPUs (bit i: CPU i, the first 64), as GOMP_CPU_AFFINITY: the
                                // thread calling the core on the lowest, pool thread k on the
                                // next, cyclically (cpu_pool_bind: process-wide, set before
                                // each of this core's passes); 0: where the process may run (a
                                // binding another core made is undone at this core's next
                                // pass; a core that bound undoes it when destroyed). The
                                // reference and CUDA backends ignore it
    bool cuda_graph;            // CUDA backend: capture the whole training step of core_step
                                // as a CUDA graph and replay it (torch.cuda.graphs); the
                                // first step of each (batch, image size) runs eagerly (conv
                                // plans, autotuning), the next one captures, the rest replay;
                                // a new shape, a re-plan or core_conv_cache_clear captures
                                // again. Fault injection forces one eager step. Gradient hooks
                                // (DDP) are refused, the split step and eval stay eager. Any
                                // other backend: ERROR_BAD_USAGE (AUTO without a usable GPU:
                                // ERROR_NO_DEVICE)
} CoreConfig;

// One batch: n images (n, C, H, W) float32 NCHW and n int32 labels in [0, classes).
// A GPT model takes n sequences instead: tokens (n, seq_len) int32 in [0, vocabulary) and
// labels (n, seq_len), the next token of each position; images is NULL.
// HOST memory (pinned or not) can be reused as soon as core_step/core_eval return.
// DEVICE memory is read on the core's own stream: it must be ready before the call
// and stay unchanged until the step's work is done (core_sync).
// H = W is the core's current image size: the config's model.image_size until
// core_set_image_size changes it.
typedef struct CoreBatch {
    const float *images;
    const int32_t *labels;
    int n;
    CoreMemory memory; // where images and labels live (DEVICE: the Core's device)
    const int32_t *tokens; // GPT models only (else NULL), in the same memory
} CoreBatch;

typedef struct CoreStepResult {
    int step;          // index of the step just taken (0-based)
    float lr;          // the learning rate it used
    float loss;        // mean loss; valid only when loss_ready
    float accuracy;    // training-batch accuracy over the same steps; valid when loss_ready
    bool loss_ready;   // every step, or every readback_interval steps when deferred
    int loss_steps;    // number of steps averaged into loss and accuracy
} CoreStepResult;

typedef struct CoreEvalResult {
    float loss;     // mean cross-entropy
    float accuracy; // fraction correct in [0, 1]
    int n;
} CoreEvalResult;

typedef struct CoreStats {
    CoreBackend backend;      // the backend actually in use (never AUTO)
    size_t param_count;       // trainable parameters
    size_t peak_bytes;        // peak memory the core itself allocated (its buffers, the
                              // cuDNN workspace and the cuBLAS workspace it hands cuBLAS)
    size_t activation_bytes;  // the memory plan's arena for the current batch shape:
                              // activations and their gradients, reused by liveness
                              // (kernels/model_plan.h); 0 before the first plan
    size_t device_used_bytes; // CUDA: peak growth of the device's used memory since the core
                              // was created (cudaMemGetInfo, sampled after planning and at
                              // core_stats): everything the libraries allocated too; 0 on
                              // the CPU. Other processes on the same GPU count as well.
    int steps;                // optimizer steps attempted
    int skipped_steps;        // steps skipped because of inf/nan gradients
    float loss_scale;         // current scale (1 unless FP16)
    int growth_tracker;
    double autotune_ms;       // time spent timing convolution candidates
    int algo_cache_hits;      // per-shape algorithm cache hits
    int algo_cache_misses;
    int graph_captures;       // cuda_graph: training steps captured as CUDA graphs
    int graph_replays;        // cuda_graph: core_step calls that launched a captured graph
                              // (the capturing step included)
    int eager_steps;          // cuda_graph: core_step calls that ran op by op (the first
                              // step of each shape, fault injection)
    double capture_ms;        // cuda_graph: host time of the captures (stream capture and
                              // cudaGraphInstantiate), summed
    int fused_ops;            // pointwise pairs (BN+ReLU, add+ReLU) the current plan runs as
                              // one op each: 0 unless CORE_POINTWISE_FUSED on a backend that
                              // fuses (CUDA, fast CPU); 0 before the first plan
    int checkpointed_segments; // checkpoint_segments: segments the current plan recomputes in
                              // backward (0: none, or before the first plan)
    // What the backend really runs, so that a practice can assert its toggle took effect
    // (the CPU backends always run NCHW fp32 and choose no cuDNN algorithms):
    CoreLayout layout_in_effect;  // the activations' layout (NHWC: CUDA, ResNet models only)
    CoreDType activation_type;    // the activations' storage type
    bool tf32_allowed;            // some convolution of the current plan runs with a math type
                                  // that lets cuDNN use TF32 on fp32 data (not FMA), or the
                                  // GEMMs compute in TF32
    int conv_shapes;              // convolution layers of the current plan (CUDA; 0 before it)
    int conv_shapes_tuned;        // of those, the ones whose algorithms were chosen by timing
                                  // candidates (CORE_CONV_ALGO_AUTOTUNE, now or from the cache)
    int conv_biases;              // convolutions with a bias (CoreModelConfig.conv_bias)
    int conv_biases_fused;        // of those, the ones whose bias costs no pass of its own: the
                                  // fast CPU backend starts the convolution's GEMMs from it (as
                                  // PyTorch's CPU convolutions take it inside the kernel); CUDA
                                  // adds it after cuDNN's convolution, as PyTorch eager does
} CoreStats;

// The cuDNN algorithms actually in use for one convolution shape (CUDA backend).
typedef struct CoreConvAlgoInfo {
    int n, c, h, w;            // input (N, C, H, W)
    int k, r, stride, pad;     // output channels, square kernel, stride, padding
    int layers;                // convolution layers of the model with this shape
    const char *fwd, *bwd_data, *bwd_filter;                // algorithm names ("none": a
                                                            // core_infer plan has no backward)
    const char *fwd_math, *bwd_data_math, *bwd_filter_math; // cuDNN math types
} CoreConvAlgoInfo;

typedef struct Core Core;

// Fills cfg with a preset: "tiny" (trains in seconds on a CPU), "mlp", "small",
// "medium", "resnet18" (ResNet-18-like at 224x224); transformers "gpt-tiny" (2 layers,
// width 64, 4 heads, 64 tokens, vocabulary 64: seconds on a CPU), "gpt-mini" (4 layers,
// width 256, 256 tokens) and "gpt2-small" (GPT-2 small: 12 layers, width 768, 12 heads,
// 1024 tokens, vocabulary 50257; a GPU's). Returns -1 for an unknown name.
int core_config_preset(CoreConfig *cfg, const char *name);
// Checks a config for consistency; -1 with a reason in error_message().
int core_config_validate(const CoreConfig *cfg);
// Creates a model and its optimizer state from cfg. It plans nothing: the first pass of
// each kind (training, eval, core_infer per grad mode) plans the buffers and cuDNN
// algorithms it needs when its batch arrives, so an oversized batch fails there.
int core_create(const CoreConfig *cfg, Core **out);
// One training step on a batch (any n > 0; buffers are reallocated only for a new shape).
int core_step(Core *core, const CoreBatch *batch, CoreStepResult *result);
// Evaluates (BN in inference mode, no update): mean loss and accuracy of the batch.
int core_eval(Core *core, const CoreBatch *batch, CoreEvalResult *result);
// Whether an inference forward (core_infer) keeps what a backward would need, as a PyTorch
// forward under autograd does, or runs as under torch.no_grad() / torch.inference_mode().
typedef enum {
    CORE_GRAD_ON,  // autograd on (no no_grad): the training memory plan, every activation a
                   // backward reads (and the arena for the gradients) held for the whole pass
    CORE_GRAD_OFF, // no_grad: an inference plan (model_plan.h, training = false, reuse) that
                   // frees each activation once its consumers ran, so buffers are reused;
                   // CUDA: forward-only cuDNN plans (no backward algorithm chosen or tuned)
} CoreGradMode;

// An inference forward (BN with its running statistics, as model.eval(); nothing updated)
// of n images: the logits (n x classes, fp32, host memory) into `logits` unless NULL and,
// when the batch has labels and result is not NULL, the mean loss and accuracy into result
// (without labels result gets n and NaN loss and accuracy). batch->labels may be NULL. The
// call returns once its results are on the host (with neither logits nor labels: once the
// work is queued; core_sync waits for it). `grad` chooses the memory plan: CORE_GRAD_ON the
// training plan (core_step's, core_eval's), CORE_GRAD_OFF the inference plan. A change of
// plan (a core_infer of the other mode, or a core_step / core_eval after a CORE_GRAD_OFF
// one) frees the activation arena and allocates the new plan's at its exact size, and
// restarts the peak counts there, so CoreStats.activation_bytes is the plan of the last
// pass and peak_bytes (CUDA: device_used_bytes too) the peak since the last change of plan:
// the mode used last (plus the model's own buffers, and any larger batch met since).
// Precision and layout apply on CUDA as for training; conv_algo chooses the algorithms
// (autotuning times every pass a plan needs: forward and backward for CORE_GRAD_ON, the
// forward alone for CORE_GRAD_OFF). Labels are uploaded only when result is not NULL (a
// serving request carries none). With cuda_graph: the
// first call of each (batch, image size, mode) runs eagerly, the next one captures the
// forward as a CUDA graph, the rest replay it (see CoreConfig.cuda_graph), counted in
// CoreStats' graph_captures, graph_replays, eager_steps and capture_ms with core_step's.
int core_infer(Core *core, const CoreBatch *batch, CoreGradMode grad, float *logits,
               CoreEvalResult *result);
// Training-mode forward (and backward when grad != NULL) without updating anything:
// writes the mean loss and the unscaled fp32 gradient of every parameter (param_count).
int core_loss_grad(Core *core, const CoreBatch *batch, float *loss, float *grad);
// The image size (H = W) of the batches from the next call on; 0: the config's. Any
// size works for the ResNet models (global average pooling makes them size-agnostic;
// the MLP's first layer fixes its input: another size is ERROR_BAD_USAGE), so training
// can change it every step, as variable-resolution training does. Each new (n, size) is
// planned once, when a batch of it arrives: buffers grow, and the cuDNN algorithms come
// from the per-shape cache, so an autotuning core times the candidates of every shape it
// has not met before (what cudnn.benchmark = True does on a new input shape).
int core_set_image_size(Core *core, int image_size);
// The image size the next batch must have.
int core_image_size(const Core *core);
// Waits until all queued device work of this core is done (no-op on the CPU).
int core_sync(Core *core);
// Reads counters and figures (synchronises with the device).
int core_stats(Core *core, CoreStats *stats);
// The algorithms chosen for the current batch shape, one entry per distinct convolution
// shape (first use order); returns the count written (at most max; 0 on the CPU or
// before the first plan) or -1.
int core_conv_algos(Core *core, CoreConvAlgoInfo *out, int max);
// The same as one line of text ("cpu: no cuDNN" on the CPU), for labels and logs:
// "CxHxW>K kR sS: fwd ALGO/MATH bwd_data ALGO/MATH bwd_filter ALGO/MATH; ..." (after
// core_infer without gradients: "fwd ALGO/MATH (forward only)").
int core_conv_algo_summary(Core *core, char *buf, size_t size);
// Whether stats (of a core made from cfg) show what cfg asks for running: on CUDA, the
// layout, the activations' type, no TF32 under fp32_strict and some under tf32, and every
// convolution tuned under autotune (none under heuristic); always on the CPU backends, which
// run fp32 NCHW by design. 0 if so; 1 with the difference in `why` if not.
int core_config_in_effect(const CoreConfig *cfg, const CoreStats *stats, char *why, size_t size);
// core_config_in_effect on the core's current stats: 0, or -1 (ERROR_LIBRARY, "the practice
// was not in effect: ...") when the core ran something else than cfg asks.
int core_assert_in_effect(Core *core, const CoreConfig *cfg);
// Number of trainable parameters.
size_t core_param_count(const Core *core);
// Copies all parameters (fp32 master weights, fixed order) to host memory dst.
int core_params_get(Core *core, float *dst, size_t count);
// Overwrites all parameters from host memory src and resets the optimizer state: SGD's
// momentum; AdamW's exp_avg, exp_avg_sq and step count (a fresh torch.optim.AdamW).
int core_params_set(Core *core, const float *src, size_t count);
// Testing aid: the next step writes `value` (inf or nan) into one gradient element
// after backward and before the inf/nan check.
int core_inject_grad_fault(Core *core, float value);
// The learning rate of step `step` under an optimizer config and batch size.
float core_lr_at(const CoreOptimConfig *optim, int batch_size, int step);
// Frees everything; NULL is fine.
void core_free(Core *core);

// ---- BN folding (inference) -------------------------------------------------------------
// Folds every BN of bn_core into the convolution before it, using its running statistics
// (eval-mode BN), and writes the result into folded_core: per output channel k,
//   w'[k] = w[k] * gamma[k] / sqrt(var[k] + eps),
//   b'[k] = (b[k] - mean[k]) * gamma[k] / sqrt(var[k] + eps) + beta[k]
// (b = 0 when bn_core's convolutions have no bias); linear layers are copied. folded_core
// must be a ResNet created from the same model config with conv_bias = true and
// no_batch_norm = true (bn_core: BN on, conv_bias either way); anything else is
// ERROR_BAD_USAGE. core_eval of folded_core then equals bn_core's up to float rounding.
// Parameters are set with core_params_set (folded_core's momentum is reset). Any backends.
int core_fold_bn(Core *bn_core, Core *folded_core);
// Testing aid for the checks that must catch a wrong fold: the same with one deliberate
// mistake.
typedef enum {
    CORE_FOLD_EXACT,                // core_fold_bn
    CORE_FOLD_FLAW_NO_RUNNING_STATS, // mean 0, var 1 (the initial statistics) instead of
                                     // the running ones
    CORE_FOLD_FLAW_NO_EPS,          // 1 / sqrt(var) without eps
    CORE_FOLD_FLAW_NO_AFFINE,       // gamma 1 and beta 0 instead of the BN's own
} CoreFoldMode;
int core_fold_bn_mode(Core *bn_core, Core *folded_core, CoreFoldMode mode);
// Testing aid for the fold's check: sets every BN's gamma (0.5..1.5), beta (-0.5..0.5),
// running mean (-0.5..0.5) and running variance (0.5..2) to values drawn from seed, as a
// network trained for long has them, so that a fold that mishandles any of them shows (a
// few steps of training leave gamma near 1, beta near 0). Momentum is reset.
int core_bn_randomize(Core *core, uint64_t seed);

// ---- split step and gradient hooks (DistributedDataParallel, gradient accumulation) ----
// core_step = core_forward_backward(accumulate = false) + core_apply_update(lr_batch = n).
// With hooks set, backward reports each op's parameter gradients as soon as they are final,
// so a caller can reduce them (in buckets) while backward goes on; the update waits for
// before_update, so the GradScaler's inf check, clipping and SGD see what it leaves.
typedef struct CoreGradReady {
    size_t offset, count; // the op's range in the flat parameter order of core_params_get
    float *grads;         // the core's whole fp32 gradient buffer (device memory on CUDA)
    void *event;          // CUDA: cudaEvent_t recorded on `stream` after the range was
                          // written (wait on it from a communication stream); NULL on the CPU
    void *stream;         // CUDA: the core's compute stream (cudaStream_t); NULL on the CPU
} CoreGradReady;

typedef struct CoreGradHooks {
    // During the backward of core_step / core_forward_backward, once per op with
    // parameters, in backward order. Returns 0 or -1 (the step fails).
    int (*ready)(void *user, const CoreGradReady *ready);
    // After backward, before the inf/nan check, clipping and SGD: must leave the final
    // gradients (count floats) in grads; on CUDA ordered before the update on `stream`.
    int (*before_update)(void *user, float *grads, size_t count, void *stream);
    void *user;
} CoreGradHooks;

// BatchNorm running statistics (PyTorch's module buffers): their count (0 without BN) and
// where they live, for DDP's broadcast_buffers: host memory on the CPU backends (stream
// NULL), device memory on CUDA, used on the core's compute stream *stream (cudaStream_t).
// They may be overwritten in place between steps (on CUDA: work ordered on *stream).
size_t core_buffer_count(const Core *core);
int core_buffers(Core *core, float **buffers, void **stream);
// Installs the hooks (NULL removes them); core_loss_grad never calls them.
int core_set_grad_hooks(Core *core, const CoreGradHooks *hooks);
// Forward, loss and backward of one (micro-)batch, no update: gradients replace those
// held, or are added to them when accumulate (no_sync accumulation). Loss and accuracy
// count per call and are read back by core_apply_update.
int core_forward_backward(Core *core, const CoreBatch *batch, bool accumulate);
// The same with the gradient of loss_weight x the batch's mean loss (the loss and accuracy
// read back stay unweighted): PyTorch's (loss / K).backward() for one of K accumulated
// micro-batches is loss_weight = 1/K (generally micro-batch size / whole batch), so the K
// gradients sum to the whole batch's mean gradient, as one step on it has. Without it the
// accumulated gradient is the sum of the K micro-batch means, K times that (DDP's no_sync
// divides by world x accumulation_steps in its all-reduce instead). fp16: the GradScaler's
// scale multiplies it as it does the loss. loss_weight must be finite and > 0.
int core_forward_backward_weighted(Core *core, const CoreBatch *batch, bool accumulate,
                                   float loss_weight);
// The update after core_forward_backward: before_update hook, GradScaler check, clipping,
// SGD at the learning rate of this step for lr_batch images (the global batch under DDP).
// ERROR_BAD_USAGE unless a core_forward_backward succeeded since the last update (a
// core_step or a core_loss_grad with a gradient in between replaces those gradients).
int core_apply_update(Core *core, int lr_batch, CoreStepResult *result);
// Forgets every cached cuDNN algorithm choice (process-wide, as a fresh PyTorch process
// starts with an empty cudnn.benchmark cache); the next step of every CUDA core plans its
// shape again (autotuning cores time the candidates again). A no-op without CUDA work.
void core_conv_cache_clear(void);

// Threads of the fast CPU backend, process-wide like torch.set_num_threads: every CPU
// core uses this many from its next call on. n <= 0 restores the default, the CPUs the
// process may run on (as PyTorch). The reference backend always runs on one thread.
void core_cpu_set_threads(int n);
// The fast CPU backend's thread count now (>= 1).
int core_cpu_threads(void);
// What the fast CPU backend runs on, for result contexts and logs, e.g.
// "OpenBLAS 0.3.21 Cooperlake / avx512f loops" (no commas: it goes into CSV fields).
const char *core_cpu_kernels(void);

// Names for printing and parsing command-line values (parse returns -1 if unknown).
const char *core_backend_name(CoreBackend b);
const char *core_precision_name(CorePrecision p);
const char *core_layout_name(CoreLayout l);
const char *core_dtype_name(CoreDType t);
const char *core_zero_grad_name(CoreZeroGrad z);
const char *core_conv_algo_name(CoreConvAlgo a);
const char *core_readback_name(CoreReadback r);
const char *core_lr_decay_name(CoreLrDecay d);
const char *core_pointwise_name(CorePointwise p);
const char *core_attention_name(CoreAttention a);
const char *core_optimizer_name(CoreOptimizer o);
// "graph" when cuda_graph is set, else "eager".
const char *core_cuda_graph_name(bool cuda_graph);
// Parses "auto", "cpu", "cuda", "cpu-ref".
int core_backend_parse(const char *s, CoreBackend *out);
// Parses "fp32", "fp32_strict", "tf32", "fp16", "bf16".
int core_precision_parse(const char *s, CorePrecision *out);
// Parses "nchw", "nhwc".
int core_layout_parse(const char *s, CoreLayout *out);
// Parses "memset", "set_to_none".
int core_zero_grad_parse(const char *s, CoreZeroGrad *out);
// Parses "heuristic", "autotune".
int core_conv_algo_parse(const char *s, CoreConvAlgo *out);
// Parses "every_step", "deferred".
int core_readback_parse(const char *s, CoreReadback *out);
// Parses "constant", "cosine", "step".
int core_lr_decay_parse(const char *s, CoreLrDecay *out);
// Parses "separate", "fused".
int core_pointwise_parse(const char *s, CorePointwise *out);
// Parses "unfused", "fused".
int core_attention_parse(const char *s, CoreAttention *out);
// Parses "sgd", "adamw".
int core_optimizer_parse(const char *s, CoreOptimizer *out);
// Parses "eager", "graph" (the value of cuda_graph: false, true).
int core_cuda_graph_parse(const char *s, bool *out);

#ifdef __cplusplus
}
#endif
#endif
