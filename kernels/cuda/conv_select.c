// conv_select.c: the candidate walk behind every convolution plan (see conv_select.h).
#include "kernels/conv_select.h"

#include <stdio.h>
#include <string.h>

#include "kernels/error.h"

static const char *fwd_names[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                  "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
static const char *bwd_data_names[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                                       "WINOGRAD_NONFUSED"};
static const char *bwd_filter_names[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                                         "WINOGRAD_NONFUSED", "FFT_TILING"};

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

const char *conv_algo_name(ConvPass pass, int algo)
{
    switch (pass) {
    case CONV_PASS_FWD: return algo >= 0 && algo < COUNT(fwd_names) ? fwd_names[algo] : "?";
    case CONV_PASS_BWD_DATA:
        return algo >= 0 && algo < COUNT(bwd_data_names) ? bwd_data_names[algo] : "?";
    case CONV_PASS_BWD_FILTER:
        return algo >= 0 && algo < COUNT(bwd_filter_names) ? bwd_filter_names[algo] : "?";
    }
    return "?";
}

const char *conv_math_name(cudnnMathType_t math)
{
    switch (math) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor_op_allow_conversion";
    case CUDNN_FMA_MATH: return "fma";
    }
    return "?";
}

const char *conv_pass_name(ConvPass pass)
{
    switch (pass) {
    case CONV_PASS_FWD: return "forward";
    case CONV_PASS_BWD_DATA: return "backward-data";
    case CONV_PASS_BWD_FILTER: return "backward-filter";
    }
    return "?";
}

static bool tensor_op(cudnnMathType_t m)
{
    return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

cudnnMathType_t conv_select_run_math(const ConvSelectRules *rules, cudnnMathType_t reported)
{
    return rules->strict_fp32 ? CUDNN_FMA_MATH : reported;
}

// Why the rules pass over c (NULL when they allow it).
static const char *excluded(const ConvSelectRules *rules, const ConvCandidate *c, char *buf,
                            size_t n)
{
    if (c->status != CUDNN_STATUS_SUCCESS) {
        snprintf(buf, n, "reported %s", cudnnGetErrorString(c->status));
        return buf;
    }
    if (c->memory > rules->workspace_limit) {
        snprintf(buf, n, "workspace %zu MiB over the %zu MiB limit", c->memory >> 20,
                 rules->workspace_limit >> 20);
        return buf;
    }
    if (rules->strict_fp32 && tensor_op(c->math)) return "tensor-op math (strict fp32)";
    if (rules->deterministic_only && c->determinism == CUDNN_NON_DETERMINISTIC)
        return "non-deterministic (deterministic mode)";
    return NULL;
}

int conv_select(ConvPass pass, const ConvCandidate *cands, int count, const ConvSelectRules *rules,
                ConvTrialFn trial, void *ctx, const char *what)
{
    char tried[768] = "";
    size_t used = 0;
    bool out_of_memory = false;  // a workspace that did not fit is a fact about the machine
    for (int i = 0; i < count; i++) {
        char why_buf[96];
        const char *why = excluded(rules, &cands[i], why_buf, sizeof why_buf);
        if (!why) {
            cudnnStatus_t s = trial(ctx, &cands[i]);
            if (s == CUDNN_STATUS_SUCCESS) {
                error_clear();
                return i;
            }
            if (s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
                out_of_memory = true;
                snprintf(why_buf, sizeof why_buf, "its %zu MiB workspace: out of memory",
                         cands[i].memory >> 20);
            } else
                snprintf(why_buf, sizeof why_buf, "%s on a real call", cudnnGetErrorString(s));
            why = why_buf;
        }
        if (used + 1 < sizeof tried) {
            int w = snprintf(tried + used, sizeof tried - used, "%s%s (%s)", used ? "; " : "",
                             conv_algo_name(pass, cands[i].algo), why);
            if (w > 0) used += (size_t)w < sizeof tried - used ? (size_t)w : sizeof tried - used - 1;
        }
    }
    return error_set(out_of_memory ? ERROR_OUT_OF_MEMORY : ERROR_LIBRARY,
                     "%s: no %s algorithm works of the %d cuDNN offered: %s", what,
                     conv_pass_name(pass), count, count ? tried : "none offered");
}
