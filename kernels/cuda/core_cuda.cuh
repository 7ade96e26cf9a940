// core_cuda.cuh: what the files of the CUDA backend share (private to kernels/cuda/): its
// state (CudaCore), the captured-step bookkeeping (StepGraph), and the functions one file
// defines and another calls. Creation, state and queries: core_cuda.cu; memory, plans and
// uploads: core_cuda_buffers.cu; the step: core_cuda_step.cu; CUDA graphs: core_cuda_graph.cu.
#ifndef KERNELS_CUDA_CORE_CUDA_CUH
#define KERNELS_CUDA_CORE_CUDA_CUH

#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/conv_bias_cuda.cuh"
#include "kernels/conv_cudnn.cuh"
#include "kernels/conv_select.h"
#include "kernels/core_internal.h"
#include "kernels/layers_cuda.cuh"
#include "kernels/model_plan.h"
#include "kernels/optim_cuda.cuh"

typedef enum { FWD_TRAIN, FWD_TRAIN_NO_STATS, FWD_INFER } FwdMode;

// Everything a captured step reads by address (CUDA graph kernels hold raw pointers and
// sizes): the shape, the plans' generation and every buffer. A graph is replayed only
// while the key it was captured under still holds.
#define STEP_GRAPH_KEY_MAX (24 + 2 * MODEL_MAX_TENSORS)

// cuda_graph: the captured training step of the current shape (see graph_step).
typedef struct StepGraph {
    cudaGraphExec_t exec;          // NULL: none captured for `key`
    uintptr_t key[STEP_GRAPH_KEY_MAX];
    int key_len;                   // 0: no shape seen yet
    bool eager_done;               // a step of this key ran eagerly (plans, autotuning done)
    int captures, replays, eager_steps;
    double capture_ms;
} StepGraph;

typedef struct CudaCore {
    int device;
    cudaStream_t s;              // all compute
    cudaStream_t cs;             // host-to-device uploads of batches
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    DType dt;                    // activation storage type
    bool nhwc;                   // activation layout (ResNet only; MLP always NCHW)
    bool staged;                 // weights cast/permuted per step; conv dW gathered back
    float *params, *grads, *mom, *stats, *saved;
    float *mom_sq;               // AdamW's exp_avg_sq (mom: exp_avg); NULL under SGD
    float *scratch;              // the reductions' scratch, one user at a time on the compute
                                 // stream: BN's (cuda_bn_scratch_floats), the conv biases'
                                 // gradient's (cuda_conv_bias_scratch_floats) and the loss's
                                 // per-sample values (one float per sample)
    size_t scratch_cap;          // floats of scratch
    void *wc;                    // compute-type weight copy (staged)
    void *gc;                    // compute-type conv filter gradient (staged); always the
                                 // candidate trials' filter-gradient scratch
    ModelPlan plan;              // where activations and gradients live (model_plan.h)
    void *arena;                 // the plan's arena; it only grows
    size_t arena_cap;            // bytes of arena
    void *act[MODEL_MAX_TENSORS], *dact[MODEL_MAX_TENSORS]; // views into arena; act[0]: the
                                 // staged input (its own buffer), NULL when not staged
    float *in_stage[2];          // device copies of host batches, ping-pong
    int32_t *lab_stage[2];
    cudaEvent_t copied[2], consumed[2];
    int next_slot, slot;
    const void *x0;              // this pass's tensor 0
    const int32_t *labels;       // this pass's labels on the device
    void *ws;
    size_t ws_size;
    ConvPlan plans[MODEL_MAX_OPS];
    size_t x0_cap;               // elements allocated for act[0]
    size_t in_cap[2];            // floats of in_stage[i]
    size_t lab_cap[2];           // labels of lab_stage[i]
    int cur_n, cur_size;         // the (n, image size) the plans are for; 0: none
    bool plan_infer;             // plan is core_infer's inference plan (CORE_GRAD_OFF)
    unsigned replans;            // prepare's re-plans so far (a captured graph's buffers
                                 // and algorithms are those of one plan)
    float *logits32;             // core_infer: fp32 logits of a non-fp32 pass
    size_t logits32_cap;         // floats of logits32
    unsigned plan_generation;    // conv_cache_generation() when they were made
    DevScalars *dsc;             // device scalars
    DevScalars *hsc;             // pinned host mirror
    int loss_count;              // steps in the current read-back window
    long window_samples;         // images in the current read-back window
    bool fault_pending;
    float fault_value;
    size_t bytes, peak;
    void *blas_ws;               // cuBLAS workspace, ours so that peak counts it
    size_t free_at_create;       // cudaMemGetInfo's free bytes before the core allocated
    size_t device_used_peak;     // largest drop of free bytes since then
    ConvTuneStats tune;
    cudaEvent_t grad_ready[MODEL_MAX_OPS]; // per op, recorded after its gradients (DDP hooks)
    StepGraph graph;             // cuda_graph
    StepGraph infer_graph;       // cuda_graph: core_infer's captured forward
} CudaCore;

static inline CudaCore *cu(Core *core) { return (CudaCore *)core->impl; }

// ---- core_cuda_buffers.cu: memory, plans, uploads ----------------------------------------
int sample_device_used(CudaCore *c);
int dev_alloc(CudaCore *c, void **p, size_t bytes);
void dev_free(CudaCore *c, void **p, size_t bytes);
#define DEV_ALLOC(c, ptr, bytes) dev_alloc((c), (void **)&(ptr), (bytes))
#define DEV_FREE(c, ptr, bytes) dev_free((c), (void **)&(ptr), (bytes))
size_t in_elems(const Core *core, int n);
void free_activations(Core *core);
int grow(CudaCore *c, void **p, size_t *cap, size_t need, size_t elem);
int stage_reserve(Core *core, int i, int n, bool labels);
int prepare_pass(Core *core, int n, bool inference);
int prepare(Core *core, int n);
ChanGeom geom(const Core *core, int t, int n);
int stage_host_batch(Core *core, const CoreBatch *b, int i, bool labels);
int set_input(Core *core, const float *src, int n);
int upload(Core *core, const CoreBatch *b, bool labels);
int release_batch(Core *core, const CoreBatch *b);
void *weight(const Core *core, const ModelOp *op);
int cast_weights(Core *core);
cublasComputeType_t gemm_compute(const Core *core);

// ---- core_cuda_step.cu: the step ----------------------------------------------------------
int forward(Core *core, int n, FwdMode mode);
int read_scalars(CudaCore *c);
int start_loss_window(CudaCore *c);
int forward_backward_work(Core *core, int n, bool accumulate, float loss_weight);
int cuda_forward_backward(Core *core, const CoreBatch *b, bool accumulate, float loss_weight);
int update_work(Core *core, float lr, const float *lr_dev);
int read_back_if_due(Core *core, CoreStepResult *r);
int cuda_update(Core *core, float lr, CoreStepResult *r);
int cuda_step(Core *core, const CoreBatch *b, float lr, CoreStepResult *r);
int cuda_eval(Core *core, const CoreBatch *b, CoreEvalResult *r);
int cuda_loss_grad(Core *core, const CoreBatch *b, float *loss, float *grad);

// ---- core_cuda_graph.cu: CUDA graphs --------------------------------------------------------
void graph_drop(StepGraph *sg);
int graph_step(Core *core, const CoreBatch *b, float lr, CoreStepResult *r);
int cuda_infer(Core *core, const CoreBatch *b, CoreGradMode grad, float *logits, CoreEvalResult *r);

#endif
