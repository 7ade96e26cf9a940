// core.c: backend-independent parts of the core: presets, validation, the LR schedule,
// backend choice and dispatch.
#include "kernels/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/core_backends.h"
#include "kernels/core_internal.h"
#include "kernels/gpu_device.h"

static int bad(int line, const char *why)
{
    return error_set_at(ERROR_BAD_USAGE, __FILE__, line, "core_config: %s", why);
}
#define BAD(why) bad(__LINE__, why)

// The transformers: GPT-2's shape and training recipe (AdamW with betas 0.9, 0.95 and weight
// decay 0.1, warm-up then cosine decay, clipping at 1), sized from seconds on a CPU to GPT-2
// small.
static int gpt_preset(CoreConfig *c, const char *name)
{
    c->model.kind = CORE_MODEL_GPT;
    c->model.attention = CORE_ATTENTION_UNFUSED;
    c->optim.optimizer = CORE_OPTIM_ADAMW;  // betas (0.9, 0.95): GPT-2 / nanoGPT's
    c->optim.beta2 = 0.95f; c->optim.weight_decay = 0.1f; c->optim.clip_norm = 1.0f;
    if (strcmp(name, "gpt-tiny") == 0) {
        c->model.num_classes = 64; c->model.seq_len = 64; c->model.width = 64;
        c->model.gpt_layers = 2; c->model.gpt_heads = 4;
        c->batch_size = 16; c->optim.reference_batch = 16; c->optim.base_lr = 3e-3f;
        c->optim.warmup_steps = 20; c->optim.total_steps = 300;
    } else if (strcmp(name, "gpt-mini") == 0) {
        c->model.num_classes = 256; c->model.seq_len = 256; c->model.width = 256;
        c->model.gpt_layers = 4; c->model.gpt_heads = 4;
        c->batch_size = 16; c->optim.reference_batch = 16; c->optim.base_lr = 1e-3f;
        c->optim.warmup_steps = 50; c->optim.total_steps = 1000;
    } else if (strcmp(name, "gpt2-small") == 0) {
        c->model.num_classes = 50257; c->model.seq_len = 1024; c->model.width = 768;
        c->model.gpt_layers = 12; c->model.gpt_heads = 12;
        c->batch_size = 8; c->optim.reference_batch = 8; c->optim.base_lr = 6e-4f;
        c->optim.warmup_steps = 200; c->optim.total_steps = 5000;
    } else {
        return -1;
    }
    return 0;
}

int core_config_preset(CoreConfig *cfg, const char *name)
{
    CoreConfig c = {
        .backend = CORE_BACKEND_AUTO,
        .model = {.kind = CORE_MODEL_RESNET, .in_channels = 3, .image_size = 16,
                  .num_classes = 10, .width = 8, .stages = 2, .blocks_per_stage = 1,
                  .stem_kernel = 3, .stem_stride = 1, .mlp_hidden = 128, .mlp_layers = 2},
        .optim = {.base_lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f, .clip_norm = 0.0f,
                  .decay = CORE_LR_COSINE, .warmup_steps = 20, .total_steps = 200,
                  .min_lr = 0.0f, .step_size = 100, .step_gamma = 0.1f,
                  .linear_scaling = false, .reference_batch = 32,
                  .optimizer = CORE_OPTIM_SGD, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
        .precision = CORE_PRECISION_FP32,
        .scaler = amp_scaler_config_default(),
        .layout = CORE_LAYOUT_NCHW,
        .zero_grad = CORE_ZERO_GRAD_MEMSET,
        .conv_algo = CORE_CONV_ALGO_HEURISTIC,
        .pointwise = CORE_POINTWISE_SEPARATE,
        .readback = CORE_READBACK_EVERY_STEP,
        .readback_interval = 10,
        .batch_size = 32,
        .seed = 1,
    };
    if (strcmp(name, "tiny") == 0) {
        // defaults above
    } else if (strcmp(name, "mlp") == 0) {
        c.model.kind = CORE_MODEL_MLP;
        c.optim.base_lr = 0.02f;
    } else if (strcmp(name, "small") == 0) {
        c.model.image_size = 32; c.model.width = 32; c.model.stages = 3;
        c.model.blocks_per_stage = 2; c.batch_size = 128; c.optim.reference_batch = 128;
        c.optim.base_lr = 0.1f; c.optim.total_steps = 1000; c.optim.warmup_steps = 50;
    } else if (strcmp(name, "medium") == 0) {
        c.model.image_size = 64; c.model.width = 64; c.model.stages = 4;
        c.model.blocks_per_stage = 2; c.model.num_classes = 100; c.batch_size = 128;
        c.optim.reference_batch = 128; c.optim.base_lr = 0.1f; c.optim.total_steps = 2000;
        c.optim.warmup_steps = 100;
    } else if (strcmp(name, "resnet18") == 0) {
        // ResNet-18's shape at 224x224; a stride-4 7x7 stem stands in for conv+maxpool.
        c.model.image_size = 224; c.model.width = 64; c.model.stages = 4;
        c.model.blocks_per_stage = 2; c.model.num_classes = 1000; c.model.stem_kernel = 7;
        c.model.stem_stride = 4; c.batch_size = 256; c.optim.reference_batch = 256;
        c.optim.base_lr = 0.1f; c.optim.total_steps = 5000; c.optim.warmup_steps = 500;
        c.optim.weight_decay = 1e-4f;
    } else if (strncmp(name, "gpt", 3) == 0 && gpt_preset(&c, name) == 0) {
        // gpt-tiny, gpt-mini, gpt2-small
    } else {
        return error_set(ERROR_BAD_USAGE, "core_config_preset: unknown preset '%s' (tiny, mlp, "
                         "small, medium, resnet18, gpt-tiny, gpt-mini, gpt2-small)", name);
    }
    *cfg = c;
    return 0;
}

int core_config_validate(const CoreConfig *c)
{
    if (c->batch_size <= 0) return BAD("batch_size must be > 0");
    if (c->optim.base_lr < 0.0f || c->optim.momentum < 0.0f || c->optim.weight_decay < 0.0f)
        return BAD("base_lr, momentum and weight_decay must be >= 0");
    if (c->optim.warmup_steps < 0 || c->optim.total_steps < 0) return BAD("negative step counts");
    if ((unsigned)c->optim.optimizer > CORE_OPTIM_ADAMW) return BAD("optimizer out of range");
    if (c->optim.optimizer == CORE_OPTIM_ADAMW &&
        (!(c->optim.beta1 >= 0.0f && c->optim.beta1 < 1.0f) ||
         !(c->optim.beta2 >= 0.0f && c->optim.beta2 < 1.0f) || !(c->optim.eps > 0.0f)))
        return BAD("AdamW needs 0 <= beta1, beta2 < 1 and eps > 0");
    if (c->optim.decay == CORE_LR_STEP && c->optim.step_size <= 0) return BAD("step_size must be > 0");
    if (c->optim.linear_scaling && c->optim.reference_batch <= 0)
        return BAD("reference_batch must be > 0 with linear_scaling");
    if (c->readback == CORE_READBACK_DEFERRED && c->readback_interval <= 0)
        return BAD("readback_interval must be > 0");
    if (c->precision == CORE_PRECISION_FP16 &&
        (!(c->scaler.init_scale > 0.0f) || !(c->scaler.growth_factor > 1.0f) ||
         !(c->scaler.backoff_factor > 0.0f && c->scaler.backoff_factor < 1.0f) ||
         c->scaler.growth_interval <= 0))
        return BAD("GradScaler needs init_scale > 0, growth > 1, 0 < backoff < 1, interval > 0");
    if ((unsigned)c->precision >= CORE_PRECISION_COUNT || (unsigned)c->layout > CORE_LAYOUT_NHWC ||
        (unsigned)c->zero_grad > CORE_ZERO_GRAD_SET_TO_NONE ||
        (unsigned)c->conv_algo > CORE_CONV_ALGO_AUTOTUNE ||
        (unsigned)c->readback > CORE_READBACK_DEFERRED || (unsigned)c->backend > CORE_BACKEND_CPU_REF ||
        (unsigned)c->pointwise > CORE_POINTWISE_FUSED)
        return BAD("enum field out of range");
    if (c->cpu_threads < 0) return BAD("cpu_threads must be >= 0 (0: core_cpu_threads())");
    if (c->checkpoint_segments < 0) return BAD("checkpoint_segments must be >= 0 (0: off)");
    if (c->cuda_graph && (c->backend == CORE_BACKEND_CPU || c->backend == CORE_BACKEND_CPU_REF))
        return BAD("cuda_graph needs the CUDA backend (CUDA graphs replay device work)");
    if ((unsigned)c->model.kind > CORE_MODEL_GPT) return BAD("model kind out of range");
    ModelGraph *g = malloc(sizeof *g);
    if (!g) return BAD("out of memory");
    int rc = model_build(&c->model, g);
    free(g);
    return rc;
}

float core_lr_at(const CoreOptimConfig *o, int batch_size, int step)
{
    double base = o->base_lr;
    if (o->linear_scaling && o->reference_batch > 0) base *= (double)batch_size / o->reference_batch;
    if (step < o->warmup_steps) return (float)(base * (step + 1) / o->warmup_steps);
    int t = step - o->warmup_steps;
    switch (o->decay) {
    case CORE_LR_CONSTANT: return (float)base;
    case CORE_LR_STEP: return (float)(base * pow(o->step_gamma, t / o->step_size));
    case CORE_LR_COSINE: {
        int span = o->total_steps - o->warmup_steps;
        if (span <= 0 || t >= span) return o->min_lr;
        return (float)(o->min_lr + 0.5 * (base - o->min_lr) * (1.0 + cos(M_PI * t / span)));
    }
    }
    return (float)base;
}

int core_create(const CoreConfig *cfg, Core **out)
{
    *out = NULL;
    TRY(core_config_validate(cfg));
    Core *core = calloc(1, sizeof *core);
    if (!core) return error_set(ERROR_OUT_OF_MEMORY, "calloc(Core): out of memory");
    core->cfg = *cfg;
    if (core->cfg.workspace_limit == 0) core->cfg.workspace_limit = (size_t)256 << 20;
    if (model_build(&cfg->model, &core->graph) != 0) { free(core); return -1; }
    core->backend = cfg->backend;
    if (core->backend == CORE_BACKEND_AUTO) {
        char why[256];
        core->backend = gpu_device_available(why, sizeof why) ? CORE_BACKEND_CUDA : CORE_BACKEND_CPU;
        if (cfg->cuda_graph && core->backend != CORE_BACKEND_CUDA) {
            free(core);
            return error_set(ERROR_NO_DEVICE, "core_create: cuda_graph needs a CUDA device: %s", why);
        }
    }
    if (core->backend == CORE_BACKEND_CUDA && cfg->model.kind == CORE_MODEL_GPT) {
        free(core);
        return error_set(ERROR_BAD_USAGE, "core_create: the CUDA backend does not run gpt models "
                         "yet; the cpu and cpu-ref backends do (--backend cpu)");
    }
    int rc = core->backend == CORE_BACKEND_CUDA ? core_cuda_init(core) : core_cpu_init(core);
    if (rc != 0) { core_free(core); return -1; }
    *out = core;
    return 0;
}

// A GPT batch in host memory: every token and label in the vocabulary (an embedding row
// or a class outside it would be read out of bounds).
static int check_tokens(const Core *core, const CoreBatch *b)
{
    int vocab = core->cfg.model.num_classes;
    size_t count = (size_t)b->n * core->cfg.model.seq_len;
    for (size_t i = 0; i < count; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= vocab)
            return error_set(ERROR_BAD_USAGE, "core batch: token %d at %zu outside the vocabulary "
                             "[0, %d)", b->tokens[i], i, vocab);
        if (b->labels && (b->labels[i] < 0 || b->labels[i] >= vocab))
            return error_set(ERROR_BAD_USAGE, "core batch: label %d at %zu outside the vocabulary "
                             "[0, %d)", b->labels[i], i, vocab);
    }
    return 0;
}

static int check_batch(const Core *core, const CoreBatch *b)
{
    bool gpt = core->cfg.model.kind == CORE_MODEL_GPT;
    if (!b || b->n <= 0 || !b->labels || (gpt ? !b->tokens : !b->images))
        return error_set(ERROR_BAD_USAGE, "core batch: empty batch or NULL pointers (%s)",
                         gpt ? "a gpt model takes tokens and labels" : "images and labels");
    if (b->memory == CORE_MEMORY_DEVICE && core->backend != CORE_BACKEND_CUDA)
        return error_set(ERROR_BAD_USAGE, "core batch: device memory batch on the CPU backend");
    if (gpt && b->memory == CORE_MEMORY_HOST) TRY(check_tokens(core, b));
    return 0;
}

int core_step(Core *core, const CoreBatch *batch, CoreStepResult *result)
{
    TRY(check_batch(core, batch));
    CoreStepResult r = {.step = core->step};
    r.lr = core_lr_at(&core->cfg.optim, batch->n, core->step);
    core->hooks_armed = true;
    core->grads_pending = false;  // the step's own gradients replace any held
    int rc = core->ops->step(core, batch, r.lr, &r);
    core->hooks_armed = false;
    TRY(rc);
    core->step++;
    if (result) *result = r;
    return 0;
}

// ---- split step and gradient hooks -------------------------------------------------

int core_set_grad_hooks(Core *core, const CoreGradHooks *hooks)
{
    if (hooks && (!hooks->ready || !hooks->before_update))
        return error_set(ERROR_BAD_USAGE, "core_set_grad_hooks: ready and before_update are both needed");
    if (hooks && (!core->ops->forward_backward || !core->ops->update))
        return error_set(ERROR_BAD_USAGE, "core_set_grad_hooks: the %s backend has no split step",
                         core_backend_name(core->backend));
    // A captured step would replay the hooks' reports and their host-side work would not
    // run at all: DDP and CUDA graphs are not combined (as DDP's hooks need a static
    // bucket plan under torch.cuda.graphs).
    if (hooks && core->cfg.cuda_graph)
        return error_set(ERROR_BAD_USAGE, "core_set_grad_hooks: gradient hooks (DDP) and cuda_graph "
                         "do not combine; create the core without cuda_graph");
    memset(&core->hooks, 0, sizeof core->hooks);
    if (hooks) core->hooks = *hooks;
    return 0;
}

int core_forward_backward(Core *core, const CoreBatch *batch, bool accumulate)
{
    return core_forward_backward_weighted(core, batch, accumulate, 1.0f);
}

int core_forward_backward_weighted(Core *core, const CoreBatch *batch, bool accumulate, float loss_weight)
{
    if (!(loss_weight > 0.0f) || !isfinite(loss_weight))
        return error_set(ERROR_BAD_USAGE, "core_forward_backward_weighted: loss_weight %g must be "
                         "finite and > 0", (double)loss_weight);
    TRY(check_batch(core, batch));
    if (!core->ops->forward_backward)
        return error_set(ERROR_BAD_USAGE, "core_forward_backward: the %s backend has no split step",
                         core_backend_name(core->backend));
    core->hooks_armed = true;
    int rc = core->ops->forward_backward(core, batch, accumulate, loss_weight);
    core->hooks_armed = false;
    core->grads_pending = rc == 0;  // a failed backward leaves partial gradients
    return rc;
}

int core_apply_update(Core *core, int lr_batch, CoreStepResult *result)
{
    if (lr_batch <= 0) return error_set(ERROR_BAD_USAGE, "core_apply_update: lr_batch must be > 0");
    if (!core->ops->update)
        return error_set(ERROR_BAD_USAGE, "core_apply_update: the %s backend has no split step",
                         core_backend_name(core->backend));
    // Without a backward since the last update, SGD would apply stale gradients and the
    // loss window would be empty (0 / 0).
    if (!core->grads_pending)
        return error_set(ERROR_BAD_USAGE, "core_apply_update: no successful core_forward_backward "
                         "since the last update");
    CoreStepResult r = {.step = core->step};
    r.lr = core_lr_at(&core->cfg.optim, lr_batch, core->step);
    core->grads_pending = false;
    TRY(core->ops->update(core, r.lr, &r));
    core->step++;
    if (result) *result = r;
    return 0;
}

int core_eval(Core *core, const CoreBatch *batch, CoreEvalResult *result)
{
    TRY(check_batch(core, batch));
    return core->ops->eval(core, batch, result);
}

int core_infer(Core *core, const CoreBatch *batch, CoreGradMode grad, float *logits,
               CoreEvalResult *result)
{
    bool gpt = core->cfg.model.kind == CORE_MODEL_GPT;
    if (!batch || batch->n <= 0 || (gpt ? !batch->tokens : !batch->images))
        return error_set(ERROR_BAD_USAGE, "core_infer: empty batch or NULL %s", gpt ? "tokens" : "images");
    if (batch->memory == CORE_MEMORY_DEVICE && core->backend != CORE_BACKEND_CUDA)
        return error_set(ERROR_BAD_USAGE, "core_infer: device memory batch on the CPU backend");
    if (gpt && batch->memory == CORE_MEMORY_HOST) TRY(check_tokens(core, batch));
    if (grad != CORE_GRAD_ON && grad != CORE_GRAD_OFF)
        return error_set(ERROR_BAD_USAGE, "core_infer: grad mode %d is neither CORE_GRAD_ON nor "
                         "CORE_GRAD_OFF", (int)grad);
    if (!core->ops->infer)
        return error_set(ERROR_BAD_USAGE, "core_infer: the %s backend has no inference forward",
                         core_backend_name(core->backend));
    return core->ops->infer(core, batch, grad, logits, result);
}

int core_loss_grad(Core *core, const CoreBatch *batch, float *loss, float *grad)
{
    TRY(check_batch(core, batch));
    if (grad) core->grads_pending = false;  // its backward overwrites the held gradients
    return core->ops->loss_grad(core, batch, loss, grad);
}

int core_set_image_size(Core *core, int image_size)
{
    if (image_size < 0) return error_set(ERROR_BAD_USAGE, "core_set_image_size: size %d < 0", image_size);
    if (core->cfg.model.kind == CORE_MODEL_GPT)
        return error_set(ERROR_BAD_USAGE, "core_set_image_size: a gpt model takes sequences of "
                         "model.seq_len tokens, not images");
    CoreModelConfig m = core->cfg.model;
    if (image_size > 0) m.image_size = image_size;
    if (m.image_size == core->graph.shapes[0].h) return 0;
    ModelGraph *g = malloc(sizeof *g);
    if (!g) return error_set(ERROR_OUT_OF_MEMORY, "core_set_image_size: out of memory");
    if (model_build(&m, g) != 0) {
        free(g);
        return error_wrap("images of %dx%d", m.image_size, m.image_size);
    }
    // The same ops and parameters at another size; only the activations' shapes change.
    const ModelGraph *old = &core->graph;
    bool same = g->n_ops == old->n_ops && g->n_tensors == old->n_tensors &&
                g->n_params == old->n_params && g->n_stats == old->n_stats &&
                g->n_saved == old->n_saved;
    if (!same) {
        free(g);
        return error_set(ERROR_BAD_USAGE, "core_set_image_size: %dx%d images change the "
                         "model's parameters (the MLP's first layer fixes its input size; only "
                         "the ResNet models take any size)", m.image_size, m.image_size);
    }
    core->graph = *g;  // the backends re-plan for it when its first batch arrives
    free(g);
    return 0;
}

int core_image_size(const Core *core) { return core->graph.shapes[0].h; }

int core_sync(Core *core) { return core->ops->sync(core); }

int core_stats(Core *core, CoreStats *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->backend = core->backend;
    stats->param_count = core->graph.n_params;
    stats->steps = core->step;
    for (int i = 0; i < core->graph.n_ops; i++)  // the model's; the backend says which it fuses
        stats->conv_biases += core->graph.ops[i].kind == OP_CONV && core->graph.ops[i].bias;
    return core->ops->stats(core, stats);
}

size_t core_param_count(const Core *core) { return core->graph.n_params; }
size_t core_buffer_count(const Core *core) { return core->graph.n_stats; }

int core_buffers(Core *core, float **buffers, void **stream)
{
    *buffers = NULL;
    *stream = NULL;
    if (!core->ops->buffers)
        return error_set(ERROR_BAD_USAGE, "core_buffers: the %s backend does not expose its buffers",
                         core_backend_name(core->backend));
    *buffers = core->ops->buffers(core, stream);
    return 0;
}

int core_params_get(Core *core, float *dst, size_t count)
{
    if (count != core->graph.n_params)
        return error_set(ERROR_BAD_USAGE, "core_params_get: count != core_param_count");
    return core->ops->params_get(core, dst);
}

int core_params_set(Core *core, const float *src, size_t count)
{
    if (count != core->graph.n_params)
        return error_set(ERROR_BAD_USAGE, "core_params_set: count != core_param_count");
    return core->ops->params_set(core, src);
}

int core_conv_algos(Core *core, CoreConvAlgoInfo *out, int max)
{
    if (max < 0) return error_set(ERROR_BAD_USAGE, "core_conv_algos: max < 0");
    return core->ops->conv_algos ? core->ops->conv_algos(core, out, max) : 0;
}

int core_conv_algo_summary(Core *core, char *buf, size_t size)
{
    enum { MAX_SHAPES = 64 };
    CoreConvAlgoInfo info[MAX_SHAPES];
    if (!buf || size == 0) return error_set(ERROR_BAD_USAGE, "core_conv_algo_summary: no buffer");
    buf[0] = '\0';
    if (core->backend != CORE_BACKEND_CUDA) {
        snprintf(buf, size, "%s: no cuDNN", core_backend_name(core->backend));
        return 0;
    }
    int n = core_conv_algos(core, info, MAX_SHAPES);
    if (n < 0) return -1;
    if (n == 0) {
        snprintf(buf, size, "no convolutions planned");
        return 0;
    }
    size_t used = 0;
    for (int i = 0; i < n && used + 1 < size; i++) {
        const CoreConvAlgoInfo *a = &info[i];
        int w = snprintf(buf + used, size - used, "%s%dx%dx%d>%d k%d s%d (%d layer%s): fwd %s/%s",
                         i ? "; " : "", a->c, a->h, a->w, a->k, a->r, a->stride, a->layers,
                         a->layers == 1 ? "" : "s", a->fwd, a->fwd_math);
        if (w >= 0 && (size_t)w < size - used) {
            used += (size_t)w;
            if (strcmp(a->bwd_data, "none") == 0)  // core_infer's forward-only plan
                w = snprintf(buf + used, size - used, " (forward only)");
            else
                w = snprintf(buf + used, size - used, " bwd_data %s/%s bwd_filter %s/%s", a->bwd_data,
                             a->bwd_data_math, a->bwd_filter, a->bwd_filter_math);
        }
        if (w < 0) break;
        used += (size_t)w < size - used ? (size_t)w : size - used - 1;
    }
    return 0;
}

int core_inject_grad_fault(Core *core, float value) { return core->ops->inject(core, value); }

void core_free(Core *core)
{
    if (!core) return;
    if (core->ops && core->ops->destroy) core->ops->destroy(core);
    free(core);
}
