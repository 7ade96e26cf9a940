// core_names.c: printable names of the config enums and their command-line parsers.
#include <string.h>

#include "kernels/check.h"
#include "kernels/core.h"

static const char *backend_names[] = {"auto", "cpu", "cuda", "cpu-ref"};
static const char *precision_names[] = {"fp32", "fp32_strict", "tf32", "fp16", "bf16"};
static const char *layout_names[] = {"nchw", "nhwc"};
static const char *dtype_names[] = {"fp32", "fp16", "bf16"};
static const char *zero_grad_names[] = {"memset", "set_to_none"};
static const char *conv_algo_names[] = {"heuristic", "autotune"};
static const char *readback_names[] = {"every_step", "deferred"};
static const char *lr_decay_names[] = {"constant", "cosine", "step"};
static const char *pointwise_names[] = {"separate", "fused"};
static const char *cuda_graph_names[] = {"eager", "graph"};
static const char *attention_names[] = {"unfused", "fused"};
static const char *optimizer_names[] = {"sgd", "adamw"};

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))
#define NAME(table, v) (((unsigned)(v) < (unsigned)COUNT(table)) ? table[v] : "?")

static int lookup(const char *const *table, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(table[i], s) == 0) return i;
    error_set(ERROR_BAD_USAGE, "unknown value '%s'", s ? s : "(null)");
    return -1;
}

#define PARSER(fn, table, type) \
    int fn(const char *s, type *out) \
    { \
        int i = lookup(table, COUNT(table), s); \
        if (i >= 0) *out = (type)i; \
        return i < 0 ? -1 : 0; \
    }

const char *core_backend_name(CoreBackend b) { return NAME(backend_names, b); }
const char *core_precision_name(CorePrecision p) { return NAME(precision_names, p); }
const char *core_layout_name(CoreLayout l) { return NAME(layout_names, l); }
const char *core_dtype_name(CoreDType t) { return NAME(dtype_names, t); }
const char *core_zero_grad_name(CoreZeroGrad z) { return NAME(zero_grad_names, z); }
const char *core_conv_algo_name(CoreConvAlgo a) { return NAME(conv_algo_names, a); }
const char *core_readback_name(CoreReadback r) { return NAME(readback_names, r); }
const char *core_lr_decay_name(CoreLrDecay d) { return NAME(lr_decay_names, d); }
const char *core_pointwise_name(CorePointwise p) { return NAME(pointwise_names, p); }
const char *core_attention_name(CoreAttention a) { return NAME(attention_names, a); }
const char *core_optimizer_name(CoreOptimizer o) { return NAME(optimizer_names, o); }
const char *core_cuda_graph_name(bool cuda_graph) { return cuda_graph_names[cuda_graph ? 1 : 0]; }

PARSER(core_backend_parse, backend_names, CoreBackend)
PARSER(core_precision_parse, precision_names, CorePrecision)
PARSER(core_layout_parse, layout_names, CoreLayout)
PARSER(core_zero_grad_parse, zero_grad_names, CoreZeroGrad)
PARSER(core_conv_algo_parse, conv_algo_names, CoreConvAlgo)
PARSER(core_readback_parse, readback_names, CoreReadback)
PARSER(core_lr_decay_parse, lr_decay_names, CoreLrDecay)
PARSER(core_pointwise_parse, pointwise_names, CorePointwise)
PARSER(core_attention_parse, attention_names, CoreAttention)
PARSER(core_optimizer_parse, optimizer_names, CoreOptimizer)

int core_cuda_graph_parse(const char *s, bool *out)
{
    int i = lookup(cuda_graph_names, COUNT(cuda_graph_names), s);
    if (i >= 0) *out = i == 1;
    return i < 0 ? -1 : 0;
}
