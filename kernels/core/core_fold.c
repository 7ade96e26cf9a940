// core_fold.c: BN folding for inference (core_fold_bn): each conv -> BN pair of a trained
// core becomes one conv with a bias in a core built without BN. Reads the parameters and
// BN running statistics (device memory on CUDA, copied back after the core's stream is
// done), computes the folded weights in double, and sets them on the folded core.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/core_internal.h"
#include "kernels/rng.h"

// The model configs match apart from the two options the fold changes.
static bool same_network(CoreModelConfig a, CoreModelConfig b)
{
    a.conv_bias = b.conv_bias = false;
    a.no_batch_norm = b.no_batch_norm = false;
    return a.kind == b.kind && a.in_channels == b.in_channels && a.image_size == b.image_size &&
           a.num_classes == b.num_classes && a.width == b.width && a.stages == b.stages &&
           a.blocks_per_stage == b.blocks_per_stage && a.stem_kernel == b.stem_kernel &&
           a.stem_stride == b.stem_stride;
}

static int check_pair(const Core *bn, const Core *folded)
{
    const CoreModelConfig *a = &bn->cfg.model, *b = &folded->cfg.model;
    if (a->kind != CORE_MODEL_RESNET)
        return error_set(ERROR_BAD_USAGE, "core_fold_bn: the BN core must be a ResNet (the MLP has no BN)");
    if (a->no_batch_norm)
        return error_set(ERROR_BAD_USAGE, "core_fold_bn: the BN core was created with "
                         "no_batch_norm: there is no BN to fold");
    if (!b->conv_bias || !b->no_batch_norm)
        return error_set(ERROR_BAD_USAGE, "core_fold_bn: the folded core must be created with "
                         "conv_bias = true and no_batch_norm = true (it has conv_bias %s, "
                         "no_batch_norm %s)", b->conv_bias ? "true" : "false",
                         b->no_batch_norm ? "true" : "false");
    if (!same_network(*a, *b))
        return error_set(ERROR_BAD_USAGE, "core_fold_bn: the two cores' model configs differ "
                         "beyond conv_bias and no_batch_norm (use the same preset and sizes)");
    return 0;
}

// The BN running statistics in host memory (malloc'd into *out; NULL when count is 0).
static int read_stats(Core *core, float **out)
{
    *out = NULL;
    size_t count = core_buffer_count(core);
    float *buf = NULL;
    void *stream = NULL;
    TRY(core_buffers(core, &buf, &stream));
    float *host = malloc((count ? count : 1) * sizeof(float));
    if (!host) return error_set(ERROR_OUT_OF_MEMORY, "core_fold_bn: out of memory");
    if (stream) {  // CUDA: device memory used on the core's stream
        cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
        if (e == cudaSuccess) e = cudaMemcpy(host, buf, count * sizeof(float), cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            free(host);
            return error_set(ERROR_LIBRARY, "core_fold_bn: reading the running statistics: %s",
                             cudaGetErrorString(e));
        }
    } else if (count) {
        memcpy(host, buf, count * sizeof(float));
    }
    *out = host;
    return 0;
}

// The next op at or after *i of graph g with parameters of a conv or linear; -1 at the end.
static int next_param_op(const ModelGraph *g, int *i)
{
    for (; *i < g->n_ops; (*i)++)
        if (g->ops[*i].kind == OP_CONV || g->ops[*i].kind == OP_LINEAR) return (*i)++;
    return -1;
}

// The BN reading conv op `conv` of g (the op after it in this builder), or NULL.
static const ModelOp *bn_after(const ModelGraph *g, int conv)
{
    for (int j = conv + 1; j < g->n_ops; j++)
        if (g->ops[j].kind == OP_BN && g->ops[j].in == g->ops[conv].out) return &g->ops[j];
    return NULL;
}

static int fold_params(const ModelGraph *gb, const ModelGraph *gf, const float *pb,
                       const float *stats, float *pf, CoreFoldMode mode)
{
    int ib = 0, jf = 0;
    for (;;) {
        int a = next_param_op(gb, &ib), b = next_param_op(gf, &jf);
        if (a < 0 && b < 0) return 0;
        if (a < 0 || b < 0)
            return error_set(ERROR_BAD_USAGE, "core_fold_bn: the two networks' layers differ");
        const ModelOp *x = &gb->ops[a], *y = &gf->ops[b];
        if (x->kind != y->kind || x->cin != y->cin || x->cout != y->cout || x->k != y->k ||
            x->stride != y->stride)
            return error_set(ERROR_BAD_USAGE, "core_fold_bn: layer %d and %d do not match", a, b);
        if (x->kind == OP_LINEAR) {
            memcpy(pf + y->w_off, pb + x->w_off, (size_t)x->cout * x->cin * sizeof(float));
            memcpy(pf + y->b_off, pb + x->b_off, (size_t)x->cout * sizeof(float));
            continue;
        }
        const ModelOp *bn = bn_after(gb, a);
        if (!bn) return error_set(ERROR_BAD_USAGE, "core_fold_bn: conv op %d has no BN after it", a);
        size_t per_k = (size_t)x->cin * x->k * x->k;
        for (int k = 0; k < x->cout; k++) {
            double mean = stats[bn->stat_off + k], var = stats[bn->stat_off + bn->cin + k];
            if (mode == CORE_FOLD_FLAW_NO_RUNNING_STATS) { mean = 0.0; var = 1.0; }
            double eps = mode == CORE_FOLD_FLAW_NO_EPS ? 0.0 : (double)MODEL_BN_EPS;
            bool affine = mode != CORE_FOLD_FLAW_NO_AFFINE;
            double gamma = affine ? pb[bn->w_off + k] : 1.0, beta = affine ? pb[bn->b_off + k] : 0.0;
            double scale = gamma / sqrt(var + eps);
            double bias = x->bias ? pb[x->b_off + k] : 0.0;
            for (size_t j = 0; j < per_k; j++)
                pf[y->w_off + k * per_k + j] = (float)(pb[x->w_off + k * per_k + j] * scale);
            pf[y->b_off + k] = (float)((bias - mean) * scale + beta);
        }
    }
}

int core_fold_bn_mode(Core *bn_core, Core *folded_core, CoreFoldMode mode)
{
    if (!bn_core || !folded_core || bn_core == folded_core)
        return error_set(ERROR_BAD_USAGE, "core_fold_bn: two distinct cores are needed");
    TRY(check_pair(bn_core, folded_core));
    size_t nb = core_param_count(bn_core), nf = core_param_count(folded_core);
    float *pb = malloc(nb * sizeof(float)), *pf = calloc(nf, sizeof(float)), *stats = NULL;
    int rc = -1;
    if (!pb || !pf) {
        error_set(ERROR_OUT_OF_MEMORY, "core_fold_bn: out of memory");
        goto done;
    }
    if (core_params_get(bn_core, pb, nb) != 0 || read_stats(bn_core, &stats) != 0) goto done;
    if (fold_params(&bn_core->graph, &folded_core->graph, pb, stats, pf, mode) != 0) goto done;
    rc = core_params_set(folded_core, pf, nf);
done:
    free(pb);
    free(pf);
    free(stats);
    return rc;
}

// Writes host stats back into the core's BN running statistics (device memory on CUDA).
static int write_stats(Core *core, const float *host)
{
    size_t count = core_buffer_count(core);
    float *buf = NULL;
    void *stream = NULL;
    TRY(core_buffers(core, &buf, &stream));
    if (!stream) {
        if (count) memcpy(buf, host, count * sizeof(float));
        return 0;
    }
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaMemcpy(buf, host, count * sizeof(float), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();  // the core's stream is non-blocking
    if (e != cudaSuccess)
        return error_set(ERROR_LIBRARY, "core_bn_randomize: writing the running statistics: %s",
                         cudaGetErrorString(e));
    return 0;
}

int core_bn_randomize(Core *core, uint64_t seed)
{
    const ModelGraph *g = &core->graph;
    size_t np = core_param_count(core);
    float *p = malloc(np * sizeof(float)), *stats = NULL;
    int rc = -1;
    if (!p) {
        error_set(ERROR_OUT_OF_MEMORY, "core_bn_randomize: out of memory");
        goto done;
    }
    if (core_params_get(core, p, np) != 0 || read_stats(core, &stats) != 0) goto done;
    Rng r = rng_make(seed, 0xb9, 0);
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind != OP_BN) continue;
        for (int k = 0; k < op->cin; k++) {
            p[op->w_off + k] = 0.5f + rng_uniform_float(&r);                 // gamma in [0.5, 1.5)
            p[op->b_off + k] = rng_uniform_float(&r) - 0.5f;                 // beta in [-0.5, 0.5)
            stats[op->stat_off + k] = rng_uniform_float(&r) - 0.5f;          // mean in [-0.5, 0.5)
            stats[op->stat_off + op->cin + k] = 0.5f + 1.5f * rng_uniform_float(&r); // var in [0.5, 2)
        }
    }
    if (core_params_set(core, p, np) != 0 || write_stats(core, stats) != 0) goto done;
    rc = 0;
done:
    free(p);
    free(stats);
    return rc;
}

int core_fold_bn(Core *bn_core, Core *folded_core)
{
    return core_fold_bn_mode(bn_core, folded_core, CORE_FOLD_EXACT);
}
