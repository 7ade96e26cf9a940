// practice_step.c: the cores and steps that every run of the practice driver and its check
// share (practice_internal.h): a variant's core as the timed run makes it (the micro-batch's
// size, the practice's core_created hook, the clip_before_unscale self-test's hook); the
// step (one core_step, or K accumulated micro-batches and one update: practice_step); the
// exact reference of accumulation the check compares such a step with; and the self-test's
// breakage of a step (skip_all) and of a config (half_lr).
#include "bench/driver/practice_internal.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/amp.h"
#include "kernels/check.h"
#include "kernels/error.h"

// ---- the step ---------------------------------------------------------------------------------

// The i-th of `micro` micro-batches of b (the first b->n % micro one image larger), in order;
// *done: the images before it, advanced past it.
static CoreBatch micro_batch(const Core *core, int in_channels, const CoreBatch *b, int micro, int i,
                             int *done)
{
    int part = b->n / micro + (i < b->n % micro);
    CoreBatch mb;
    if (b->tokens) {  // a GPT's sequences: core_image_size is its sequence length
        size_t t = (size_t)core_image_size(core);
        mb = (CoreBatch){.labels = b->labels + (size_t)*done * t, .n = part, .memory = b->memory,
                         .tokens = b->tokens + (size_t)*done * t};
    } else {
        size_t sample = (size_t)in_channels * core_image_size(core) * core_image_size(core);
        mb = (CoreBatch){.images = b->images + (size_t)*done * sample, .labels = b->labels + *done,
                         .n = part, .memory = b->memory};
    }
    *done += part;
    return mb;
}

static int check_micro(int micro, int n)
{
    if (micro <= n) return 0;
    return error_set(ERROR_BAD_USAGE, "gradient accumulation: %d micro-batches of a batch of %d images",
                     micro, n);
}

int practice_step(Core *core, int in_channels, const CoreBatch *b, int micro_batches,
                  CoreStepResult *result)
{
    if (micro_batches <= 1) return core_step(core, b, result);
    TRY(check_micro(micro_batches, b->n));
    CoreStepResult r;
    int done = 0;
    for (int i = 0; i < micro_batches; i++) {
        CoreBatch mb = micro_batch(core, in_channels, b, micro_batches, i, &done);
        // loss / K: the K gradients add up to the whole batch's mean gradient
        TRY(core_forward_backward_weighted(core, &mb, i > 0, (float)mb.n / (float)b->n));
    }
    TRY(core_apply_update(core, b->n, &r));
    if (result) *result = r;
    return 0;
}

int practice_core_config(const CoreConfig *cfg, int micro, CoreConfig *core_cfg)
{
    *core_cfg = *cfg;
    if (micro <= 1) return 0;
    if (cfg->batch_size % micro != 0)
        return error_set(ERROR_BAD_USAGE, "gradient accumulation: a batch of %d images does not split "
                         "into %d equal micro-batches", cfg->batch_size, micro);
    core_cfg->batch_size = cfg->batch_size / micro;
    return 0;
}

// ---- gradients seen from a hook (host memory on the CPU, device memory on the core's stream) ----

static int grads_to_host(const float *grads, size_t count, void *stream, float *host)
{
    if (!stream) {
        memcpy(host, grads, count * sizeof(float));
        return 0;
    }
    cudaError_t e = cudaMemcpyAsync(host, grads, count * sizeof(float), cudaMemcpyDeviceToHost,
                                    (cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);
    return e == cudaSuccess ? 0 : check_cuda_failed(e, __FILE__, __LINE__, "gradients to the host");
}

static int grads_from_host(float *grads, size_t count, void *stream, const float *host)
{
    if (!stream) {
        memcpy(grads, host, count * sizeof(float));
        return 0;
    }
    cudaError_t e = cudaMemcpyAsync(grads, host, count * sizeof(float), cudaMemcpyHostToDevice,
                                    (cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);  // host may go after
    return e == cudaSuccess ? 0 : check_cuda_failed(e, __FILE__, __LINE__, "gradients to the device");
}

static int no_ready(void *user, const CoreGradReady *ready)
{
    (void)user;
    (void)ready;
    return 0;
}

// ---- the self-test's breakage ----------------------------------------------------------------

void practice_selftest_config(Selftest selftest, CoreConfig *cfg)
{
    if (selftest != SELFTEST_HALF_LR) return;
    cfg->optim.base_lr *= 0.5f;  // the whole schedule: warm-up, decay and its floor
    cfg->optim.min_lr *= 0.5f;
}

// clip_before_unscale: clip_grad_norm_ on the gradients before_update sees, which still carry
// the loss scale; the core then unscales them (and its own clip, after unscaling, finds them
// already far below the norm). The max norm of the configs under test (runs are sequential).
static float clip_before_unscale_norm;

static int clip_scaled(void *user, float *grads, size_t count, void *stream)
{
    (void)user;
    float *host = malloc((count ? count : 1) * sizeof(float));
    if (!host) return error_set(ERROR_OUT_OF_MEMORY, "self-test: out of memory (host)");
    int rc = grads_to_host(grads, count, stream, host);
    double sq = 0.0;
    for (size_t i = 0; rc == 0 && i < count; i++) sq += (double)host[i] * host[i];
    float coef = amp_clip_coef(sqrt(sq), clip_before_unscale_norm);  // as clip_grad_norm_
    if (rc == 0 && coef < 1.0f) {
        for (size_t i = 0; i < count; i++) host[i] *= coef;
        rc = grads_from_host(grads, count, stream, host);
    }
    free(host);
    return rc;
}

int practice_run_step(Core *core, const CoreConfig *cfg, const CoreBatch *b, int micro,
                      Selftest selftest, float *scratch, int *driver_skipped)
{
    int ch = cfg->model.in_channels;
    if (selftest != SELFTEST_SKIP_ALL) return practice_step(core, ch, b, micro, NULL);
    // skip_all: fp16 gets an inf in its gradients (the core's own GradScaler skips the step,
    // backs off and counts it); the other precisions have no scaler, so the driver drops the
    // update itself (the parameters go back to what `scratch` held) and counts it
    if (cfg->precision == CORE_PRECISION_FP16) {
        TRY(core_inject_grad_fault(core, INFINITY));
        return practice_step(core, ch, b, micro, NULL);
    }
    size_t n = core_param_count(core);
    TRY(core_params_get(core, scratch, n));
    TRY(practice_step(core, ch, b, micro, NULL));
    TRY(core_params_set(core, scratch, n));
    (*driver_skipped)++;
    return 0;
}

// ---- the cores ---------------------------------------------------------------------------------

int practice_make_core(HarnessState *st, const Practice *p, const PracticeVariant *v, const CoreConfig *cfg,
                       int micro, Selftest selftest, Core **out)
{
    *out = NULL;
    CoreConfig core_cfg;
    TRY(practice_core_config(cfg, micro, &core_cfg));
    TRY(core_create(&core_cfg, out));
    int rc = 0;
    if (p->hooks && p->hooks->core_created) rc = p->hooks->core_created(p->hooks->ctx, st, *out, cfg, v);
    if (rc == 0 && selftest == SELFTEST_CLIP_BEFORE_UNSCALE && cfg->precision == CORE_PRECISION_FP16 &&
        cfg->optim.clip_norm > 0.0f) {
        clip_before_unscale_norm = cfg->optim.clip_norm;
        CoreGradHooks hooks = {no_ready, clip_scaled, NULL};
        rc = core_set_grad_hooks(*out, &hooks);
    }
    if (rc != 0) {
        core_free(*out);
        *out = NULL;
    }
    return rc;
}

// ---- the exact reference of accumulation --------------------------------------------------------

typedef struct ReplaceGrads {
    const float *grads;  // host, count floats: the gradient the update applies
} ReplaceGrads;

static int replace_grads(void *user, float *grads, size_t count, void *stream)
{
    const ReplaceGrads *r = user;
    return grads_from_host(grads, count, stream, r->grads);
}

int practice_reference_step(Core *core, int in_channels, const CoreBatch *b, int micro, double *sum,
                            float *part_grads)
{
    TRY(check_micro(micro, b->n));
    size_t np = core_param_count(core);
    memset(sum, 0, np * sizeof *sum);
    int done = 0;
    CoreBatch mb = *b;
    for (int i = 0; i < micro; i++) {
        mb = micro_batch(core, in_channels, b, micro, i, &done);
        float loss = 0.0f;
        TRY(core_loss_grad(core, &mb, &loss, part_grads));  // BN over this micro-batch alone
        double w = (double)mb.n / b->n;
        for (size_t j = 0; j < np; j++) sum[j] += w * part_grads[j];
    }
    CoreStats cs;
    TRY(core_stats(core, &cs));  // fp16: before_update sees the gradients times the loss scale
    double scale = cs.loss_scale > 0.0f ? cs.loss_scale : 1.0;
    for (size_t j = 0; j < np; j++) part_grads[j] = (float)(sum[j] * scale);
    ReplaceGrads r = {part_grads};
    CoreGradHooks hooks = {no_ready, replace_grads, &r};
    TRY(core_set_grad_hooks(core, &hooks));
    // The last micro-batch's pass arms the update (no whole-batch pass: its gradient is
    // replaced anyway); the LR is that of b->n images.
    int rc = core_forward_backward(core, &mb, false);
    if (rc == 0) rc = core_apply_update(core, b->n, NULL);
    if (core_set_grad_hooks(core, NULL) != 0 && rc == 0) rc = -1;
    return rc;
}
