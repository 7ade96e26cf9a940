// model.c: builds the ResNet-style and MLP op lists and initialises their parameters.
#include "kernels/model.h"
#include "kernels/rng.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "kernels/check.h"

ConvShape model_conv_shape(const ModelGraph *g, const ModelOp *op, int n)
{
    ModelShape in = g->shapes[op->in], out = g->shapes[op->out];
    return (ConvShape){n, in.c, in.h, in.w, op->cout, op->k, op->stride, op->pad, out.h, out.w};
}

size_t model_tensor_size(const ModelGraph *g, int t)
{
    return (size_t)g->shapes[t].c * g->shapes[t].h * g->shapes[t].w;
}

#define fail(why) error_set(ERROR_BAD_USAGE, "model_build: %s", (why))

static int new_tensor(ModelGraph *g, int c, int h, int w)
{
    if (g->n_tensors >= MODEL_MAX_TENSORS) return -1;
    g->shapes[g->n_tensors] = (ModelShape){c, h, w};
    return g->n_tensors++;
}

static ModelOp *new_op(ModelGraph *g, ModelOpKind kind, int in)
{
    if (g->n_ops >= MODEL_MAX_OPS) return NULL;
    ModelOp *op = &g->ops[g->n_ops++];
    *op = (ModelOp){.kind = kind, .in = in, .in2 = -1, .out = -1, .aux = -1, .rows = 1};
    return op;
}

// Each helper returns the output tensor id, or -1 when the graph is full.
static int add_conv(ModelGraph *g, int in, int cout, int k, int stride, bool bias)
{
    ModelShape s = g->shapes[in];
    ModelOp *op = new_op(g, OP_CONV, in);
    if (!op) return -1;
    op->cin = s.c; op->cout = cout; op->k = k; op->stride = stride; op->pad = k / 2;
    int h = (s.h + 2 * op->pad - k) / stride + 1, w = (s.w + 2 * op->pad - k) / stride + 1;
    op->w_off = g->n_params;
    g->n_params += (size_t)cout * s.c * k * k;
    if ((op->bias = bias)) {
        op->b_off = g->n_params;
        g->n_params += (size_t)cout;
    }
    size_t col = (size_t)s.c * k * k * h * w;
    if (col > g->max_col) g->max_col = col;
    return op->out = new_tensor(g, cout, h, w);
}

static int add_bn(ModelGraph *g, int in)
{
    ModelShape s = g->shapes[in];
    ModelOp *op = new_op(g, OP_BN, in);
    if (!op) return -1;
    op->cin = op->cout = s.c;
    op->w_off = g->n_params; op->b_off = g->n_params + s.c;
    g->n_params += 2 * (size_t)s.c;
    op->stat_off = g->n_stats; g->n_stats += 2 * (size_t)s.c;
    op->save_off = g->n_saved; g->n_saved += 2 * (size_t)s.c;
    return op->out = new_tensor(g, s.c, s.h, s.w);
}

// A BN after a conv, or nothing (the tensor itself) in a model without BN.
static int add_norm(ModelGraph *g, const CoreModelConfig *m, int in)
{
    return m->no_batch_norm ? in : add_bn(g, in);
}

static int add_unary(ModelGraph *g, ModelOpKind kind, int in)
{
    ModelShape s = g->shapes[in];
    ModelOp *op = new_op(g, kind, in);
    if (!op) return -1;
    op->cin = op->cout = s.c;
    if (kind == OP_GAP) return op->out = new_tensor(g, s.c, 1, 1);
    return op->out = new_tensor(g, s.c, s.h, s.w);
}

static int add_add(ModelGraph *g, int a, int b)
{
    ModelShape s = g->shapes[a];
    ModelOp *op = new_op(g, OP_ADD, a);
    if (!op) return -1;
    op->in2 = b; op->cin = op->cout = s.c;
    return op->out = new_tensor(g, s.c, s.h, s.w);
}

static int add_linear(ModelGraph *g, int in, int cout)
{
    ModelOp *op = new_op(g, OP_LINEAR, in);
    if (!op) return -1;
    op->cin = (int)model_tensor_size(g, in); op->cout = cout;
    op->w_off = g->n_params; g->n_params += (size_t)cout * op->cin;
    op->b_off = g->n_params; g->n_params += (size_t)cout;
    return op->out = new_tensor(g, cout, 1, 1);
}

// ---- GPT: token-major tensors {features, tokens, 1} ---------------------------------

// A linear applied to each token of `in` ({cin, t}): out {cout, t}.
static int add_token_linear(ModelGraph *g, int in, int cout, float init_std)
{
    ModelShape s = g->shapes[in];
    ModelOp *op = new_op(g, OP_LINEAR, in);
    if (!op) return -1;
    op->cin = s.c; op->cout = cout; op->rows = s.h; op->init_std = init_std;
    op->w_off = g->n_params; g->n_params += (size_t)cout * s.c;
    op->b_off = g->n_params; g->n_params += (size_t)cout;
    return op->out = new_tensor(g, cout, s.h, 1);
}

static int add_layernorm(ModelGraph *g, int in)
{
    ModelShape s = g->shapes[in];
    ModelOp *op = new_op(g, OP_LAYERNORM, in);
    if (!op) return -1;
    op->cin = op->cout = s.c; op->rows = s.h;
    op->w_off = g->n_params; op->b_off = g->n_params + s.c;
    g->n_params += 2 * (size_t)s.c;
    return op->out = new_tensor(g, s.c, s.h, 1);
}

static int add_gelu(ModelGraph *g, int in)
{
    ModelShape s = g->shapes[in];
    ModelOp *op = new_op(g, OP_GELU, in);
    if (!op) return -1;
    op->cin = op->cout = s.c; op->rows = s.h;
    return op->out = new_tensor(g, s.c, s.h, 1);
}

static int add_attention(ModelGraph *g, int qkv, int heads, bool fused)
{
    ModelShape s = g->shapes[qkv];
    ModelOp *op = new_op(g, OP_ATTN, qkv);
    if (!op) return -1;
    int c = s.c / 3, t = s.h;
    op->cin = s.c; op->cout = c; op->rows = t; op->heads = heads; op->fused = fused;
    op->out = new_tensor(g, c, t, 1);
    if (op->out < 0) return -1;
    op->aux = fused ? new_tensor(g, heads * t, 1, 1) : new_tensor(g, heads * t * t, 1, 1);
    return op->aux < 0 ? -1 : op->out;
}

static int add_embed(ModelGraph *g, int vocab, int t, int c)
{
    ModelOp *op = new_op(g, OP_EMBED, 0);
    if (!op) return -1;
    op->cin = vocab; op->cout = c; op->rows = t; op->init_std = 0.02f;
    op->w_off = g->n_params; g->n_params += (size_t)vocab * c;
    op->b_off = g->n_params; g->n_params += (size_t)t * c;
    return op->out = new_tensor(g, c, t, 1);
}

#define CHAIN(expr) do { t = (expr); if (t < 0) return fail("model too large for MODEL_MAX_OPS"); } while (0)

static int build_resnet(const CoreModelConfig *m, ModelGraph *g)
{
    int t = 0;
    CHAIN(add_conv(g, t, m->width, m->stem_kernel, m->stem_stride, m->conv_bias));
    CHAIN(add_norm(g, m, t));
    CHAIN(add_unary(g, OP_RELU, t));
    for (int s = 0; s < m->stages; s++) {
        int ch = m->width << s;
        for (int b = 0; b < m->blocks_per_stage; b++) {
            int stride = (s > 0 && b == 0) ? 2 : 1;
            int x = t, shortcut = x;
            if (stride != 1 || g->shapes[x].c != ch) {
                CHAIN(add_conv(g, x, ch, 1, stride, m->conv_bias));
                CHAIN(add_norm(g, m, t));
                shortcut = t;
            }
            CHAIN(add_conv(g, x, ch, 3, stride, m->conv_bias));
            CHAIN(add_norm(g, m, t));
            CHAIN(add_unary(g, OP_RELU, t));
            CHAIN(add_conv(g, t, ch, 3, 1, m->conv_bias));
            CHAIN(add_norm(g, m, t));
            CHAIN(add_add(g, t, shortcut));
            CHAIN(add_unary(g, OP_RELU, t));
        }
    }
    CHAIN(add_unary(g, OP_GAP, t));
    CHAIN(add_linear(g, t, m->num_classes));
    return 0;
}

static int build_mlp(const CoreModelConfig *m, ModelGraph *g)
{
    int t = 0;
    for (int l = 0; l < m->mlp_layers; l++) {
        CHAIN(add_linear(g, t, m->mlp_hidden));
        CHAIN(add_unary(g, OP_RELU, t));
    }
    CHAIN(add_linear(g, t, m->num_classes));
    return 0;
}

static int build_gpt(const CoreModelConfig *m, ModelGraph *g)
{
    const float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)m->gpt_layers);
    int t = 0, c = m->width;
    CHAIN(add_embed(g, m->num_classes, m->seq_len, c));
    for (int l = 0; l < m->gpt_layers; l++) {
        int x = t;
        CHAIN(add_layernorm(g, x));
        CHAIN(add_token_linear(g, t, 3 * c, std));
        CHAIN(add_attention(g, t, m->gpt_heads, m->attention == CORE_ATTENTION_FUSED));
        CHAIN(add_token_linear(g, t, c, proj_std));
        CHAIN(add_add(g, x, t));
        x = t;
        CHAIN(add_layernorm(g, x));
        CHAIN(add_token_linear(g, t, 4 * c, std));
        CHAIN(add_gelu(g, t));
        CHAIN(add_token_linear(g, t, c, proj_std));
        CHAIN(add_add(g, x, t));
    }
    CHAIN(add_layernorm(g, t));
    CHAIN(add_token_linear(g, t, m->num_classes, std));
    return 0;
}

static int check_gpt(const CoreModelConfig *m)
{
    if (m->num_classes <= 1 || m->width <= 0 || m->seq_len <= 0 || m->gpt_layers <= 0 ||
        m->gpt_heads <= 0)
        return fail("gpt needs a vocabulary (num_classes) > 1 and width, seq_len, gpt_layers, "
                    "gpt_heads > 0");
    if (m->width % m->gpt_heads != 0) return fail("gpt: width must be a multiple of gpt_heads");
    if (m->seq_len > GPT_MAX_SEQ) return fail("gpt: seq_len must be <= 4096");
    if ((unsigned)m->attention > CORE_ATTENTION_FUSED) return fail("gpt: attention out of range");
    // every per-sample tensor (the unfused probabilities heads x t x t the largest) < 2^31
    if ((size_t)m->gpt_heads * m->seq_len * m->seq_len > INT_MAX ||
        (size_t)m->num_classes * m->seq_len > INT_MAX || (size_t)4 * m->width * m->seq_len > INT_MAX)
        return fail("gpt too large: heads x seq_len^2, vocabulary x seq_len and 4 x width x "
                    "seq_len must be < 2^31 values");
    return 0;
}

// Marks which input gradients backward must produce, and whether each write is the
// first one (overwrite) or a later one (accumulate), walking the ops in reverse.
static void plan_backward(ModelGraph *g)
{
    bool written[MODEL_MAX_TENSORS] = {false};
    for (int i = g->n_ops - 1; i >= 0; i--) {
        ModelOp *op = &g->ops[i];
        op->in_grad = op->in != 0 && op->kind != OP_EMBED;
        op->in_accum = written[op->in];
        written[op->in] = true;
        if (op->in2 >= 0) {
            op->in2_accum = written[op->in2];
            written[op->in2] = true;
        }
    }
}

int model_build(const CoreModelConfig *m, ModelGraph *g)
{
    *g = (ModelGraph){0};
    if (m->kind == CORE_MODEL_GPT) {
        TRY(check_gpt(m));
        g->shapes[0] = (ModelShape){1, m->seq_len, 1};
        g->n_tensors = 1;
        TRY(build_gpt(m, g));
        g->logits = g->ops[g->n_ops - 1].out;
        plan_backward(g);
        return 0;
    }
    if (m->in_channels <= 0 || m->image_size <= 0 || m->num_classes <= 1)
        return fail("in_channels, image_size must be > 0 and num_classes > 1");
    // Shapes and op fields are ints: one sample's tensors must stay below 2^31 values.
    if ((size_t)m->in_channels * m->image_size * m->image_size > INT_MAX)
        return fail("image too large: in_channels x image_size^2 must be < 2^31 values");
    g->shapes[0] = (ModelShape){m->in_channels, m->image_size, m->image_size};
    g->n_tensors = 1;
    if (m->kind == CORE_MODEL_RESNET) {
        if (m->width <= 0 || m->stages <= 0 || m->blocks_per_stage <= 0 ||
            m->stem_kernel <= 0 || m->stem_kernel % 2 == 0 || m->stem_stride <= 0)
            return fail("resnet needs width, stages, blocks_per_stage > 0 and an odd stem_kernel");
        int size = (m->image_size - 1) / m->stem_stride + 1;
        if ((size >> (m->stages - 1)) < 1) return fail("image too small for that many stages");
        if (((size_t)m->width << (m->stages - 1)) > INT_MAX ||
            (size_t)m->width * size * size > INT_MAX)
            return fail("model too large: width x (image_size / stem_stride)^2 must be < 2^31 values");
        TRY(build_resnet(m, g));
    } else {
        if (m->mlp_hidden <= 0 || m->mlp_layers < 0) return fail("mlp needs mlp_hidden > 0");
        TRY(build_mlp(m, g));
    }
    g->logits = g->ops[g->n_ops - 1].out;
    plan_backward(g);
    return 0;
}

void model_init(const ModelGraph *g, uint64_t seed, float *params, float *stats)
{
    Rng r = {seed * 0x2545F4914F6CDD1Dull + 1};
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind == OP_CONV) {
            size_t fan_in = (size_t)op->cin * op->k * op->k, n = fan_in * op->cout;
            float std = sqrtf(2.0f / (float)fan_in);
            for (size_t j = 0; j < n; j++) params[op->w_off + j] = std * rng_normal_float(&r);
            float bound = 1.0f / sqrtf((float)fan_in);  // nn.Conv2d's bias init
            if (op->bias)
                for (int j = 0; j < op->cout; j++)
                    params[op->b_off + j] = bound * (2.0f * rng_uniform_float(&r) - 1.0f);
        } else if (op->kind == OP_BN) {
            for (int c = 0; c < op->cin; c++) {
                params[op->w_off + c] = 1.0f;
                params[op->b_off + c] = 0.0f;
                stats[op->stat_off + c] = 0.0f;
                stats[op->stat_off + op->cin + c] = 1.0f;
            }
        } else if (op->kind == OP_LAYERNORM) {
            for (int c = 0; c < op->cin; c++) {
                params[op->w_off + c] = 1.0f;
                params[op->b_off + c] = 0.0f;
            }
        } else if (op->kind == OP_EMBED) {  // nn.Embedding-like tables, GPT-2's std
            size_t n = ((size_t)op->cin + op->rows) * op->cout;
            for (size_t j = 0; j < n; j++) params[op->w_off + j] = op->init_std * rng_normal_float(&r);
        } else if (op->kind == OP_LINEAR && op->init_std > 0.0f) {  // GPT-2's init
            size_t n = (size_t)op->cin * op->cout;
            for (size_t j = 0; j < n; j++) params[op->w_off + j] = op->init_std * rng_normal_float(&r);
            for (int j = 0; j < op->cout; j++) params[op->b_off + j] = 0.0f;
        } else if (op->kind == OP_LINEAR) {
            float bound = 1.0f / sqrtf((float)op->cin);
            size_t n = (size_t)op->cin * op->cout;
            for (size_t j = 0; j < n; j++)
                params[op->w_off + j] = bound * (2.0f * rng_uniform_float(&r) - 1.0f);
            for (int j = 0; j < op->cout; j++)
                params[op->b_off + j] = bound * (2.0f * rng_uniform_float(&r) - 1.0f);
        }
    }
}
