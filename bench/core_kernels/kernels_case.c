// kernels_case.c: inputs, CPU reference, fast-CPU candidate and validation of bench_kernels
// (kernels_case.h).
#include "bench/core_kernels/kernels_case.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/error.h"
#include "kernels/layers_cpu.h"
#include "kernels/layers_cpu_fast.h"

static const struct {
    const char *name;
    bool bn, cpu_fast, cudnn;
    double passes;      // tensor-sized reads + writes, in elements of the storage type
    const char *note;
} kernel_info[KB_COUNT] = {
    [KB_BN_FWD_TRAIN] = {"bn_fwd_train", true, true, true, 3,
                         "x read twice (statistics, then y), y written"},
    [KB_BN_RELU_FWD_TRAIN] = {"bn_relu_fwd_train", true, true, false, 3,
                              "x read twice (statistics, then y), y written"},
    [KB_BN_FWD_INFER] = {"bn_fwd_infer", true, true, true, 2, "x read, y written"},
    [KB_BN_BWD] = {"bn_bwd", true, true, true, 5,
                   "x and dy read twice (sums, then dx), dx written"},
    [KB_BN_RELU_BWD] = {"bn_relu_bwd", true, true, false, 7,
                        "x, y and dy read twice (sums, then dx), dx written"},
    [KB_RELU_FWD] = {"relu_fwd", false, true, false, 2, "x read, y written"},
    [KB_RELU_BWD] = {"relu_bwd", false, true, false, 3, "y and dy read, dx written"},
    [KB_ADD] = {"add", false, true, false, 3, "a and b read, y written"},
    [KB_ADD_RELU] = {"add_relu", false, true, false, 3, "a and b read, y written"},
    [KB_COPY_GRAD_ACCUM] = {"copy_grad_accum", false, true, false, 3, "dy and dx read, dx written"},
    [KB_CAST] = {"cast", false, false, false, 1, "fp32 source read (4 bytes), destination written"},
};

const char *kb_kernel_name(KbKernel k) { return (unsigned)k < KB_COUNT ? kernel_info[k].name : "?"; }

int kb_kernel_parse(const char *name, KbKernel *out)
{
    for (int k = 0; k < KB_COUNT; k++)
        if (strcmp(name, kernel_info[k].name) == 0) {
            *out = (KbKernel)k;
            return 0;
        }
    return -1;
}

bool kb_kernel_is_bn(KbKernel k) { return (unsigned)k < KB_COUNT && kernel_info[k].bn; }
bool kb_kernel_has_cpu_fast(KbKernel k) { return (unsigned)k < KB_COUNT && kernel_info[k].cpu_fast; }
bool kb_kernel_has_cudnn(KbKernel k) { return (unsigned)k < KB_COUNT && kernel_info[k].cudnn; }

double kb_bytes(KbKernel k, size_t count, size_t elem_size)
{
    if ((unsigned)k >= KB_COUNT) return 0.0;
    if (k == KB_CAST) return (double)count * (4.0 + (double)elem_size);
    return kernel_info[k].passes * (double)count * (double)elem_size;
}

const char *kb_bytes_note(KbKernel k) { return (unsigned)k < KB_COUNT ? kernel_info[k].note : "?"; }

// Multiples of 1/32 in [-2, 2) plus shift (a multiple of 1/32 too): exact in fp32, fp16 and
// bf16 while at most 8 significant bits (|values| < 4.5 here).
static void fill(float *p, size_t n, uint64_t seed, float lo_shift)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        int v = (int)((s * 0x2545F4914F6CDD1Dull) >> 57) - 64;  // -64 .. 63
        p[i] = (float)v / 32.0f + lo_shift;
    }
}

static float *alloc_floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) error_set(ERROR_OUT_OF_MEMORY, "bench_kernels: %zu host floats", n);
    return p;
}

void kb_case_free(KbCase *kc)
{
    float *bufs[] = {kc->x, kc->x2, kc->dy, kc->y, kc->dx_init, kc->gamma, kc->beta, kc->mean,
                     kc->invstd, kc->running_mean, kc->running_var, kc->ref[0], kc->ref[1], kc->ref[2]};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(kc, 0, sizeof *kc);
}

static void set_outputs(KbCase *kc)
{
    size_t c = (size_t)kc->c;
    kc->outputs = 1;
    kc->out_count[0] = kc->count;
    switch (kc->kernel) {
    case KB_BN_FWD_TRAIN:
    case KB_BN_RELU_FWD_TRAIN:
        kc->outputs = 3;
        kc->out_name[0] = "y"; kc->out_name[1] = "mean"; kc->out_name[2] = "invstd";
        kc->out_count[1] = kc->out_count[2] = c;
        break;
    case KB_BN_BWD:
    case KB_BN_RELU_BWD:
        kc->outputs = 3;
        kc->out_name[0] = "dx"; kc->out_name[1] = "dgamma"; kc->out_name[2] = "dbeta";
        kc->out_count[1] = kc->out_count[2] = c;
        break;
    case KB_RELU_BWD:
    case KB_COPY_GRAD_ACCUM: kc->out_name[0] = "dx"; break;
    default: kc->out_name[0] = "y"; break;
    }
}

// y = relu(bn(x)) or bn(x) with batch statistics, into y, mean, invstd.
static void bn_forward_ref(const KbCase *kc, bool relu, float *y, float *mean, float *invstd)
{
    bn_fwd_train_cpu(kc->n, kc->c, kc->hw, kc->x, kc->gamma, kc->beta, y, mean, invstd, NULL, NULL);
    if (relu) relu_fwd_cpu(kc->count, y, y);
}

static int make_inputs(KbCase *kc)
{
    KbKernel k = kc->kernel;
    size_t n = kc->count, c = (size_t)kc->c;
    bool bn = kb_kernel_is_bn(k);
    if (!(kc->x = alloc_floats(n))) return -1;
    fill(kc->x, n, 1, bn ? 1.0f : 0.0f);  // BN: a mean away from 0
    if (k == KB_ADD || k == KB_ADD_RELU) {
        if (!(kc->x2 = alloc_floats(n))) return -1;
        fill(kc->x2, n, 2, 0.0f);
    }
    if (k == KB_BN_BWD || k == KB_BN_RELU_BWD || k == KB_RELU_BWD || k == KB_COPY_GRAD_ACCUM) {
        if (!(kc->dy = alloc_floats(n))) return -1;
        fill(kc->dy, n, 3, 0.0f);
    }
    if (k == KB_COPY_GRAD_ACCUM) {
        if (!(kc->dx_init = alloc_floats(n))) return -1;
        fill(kc->dx_init, n, 4, 0.0f);
    }
    if (!bn) {
        if (k == KB_RELU_BWD) {  // the ReLU's output
            if (!(kc->y = alloc_floats(n))) return -1;
            relu_fwd_cpu(n, kc->x, kc->y);
        }
        return 0;
    }
    float **per_channel[] = {&kc->gamma, &kc->beta, &kc->mean, &kc->invstd, &kc->running_mean,
                             &kc->running_var};
    for (size_t i = 0; i < sizeof per_channel / sizeof per_channel[0]; i++)
        if (!(*per_channel[i] = alloc_floats(c))) return -1;
    fill(kc->gamma, c, 5, 1.0f);        // -1 .. 3
    fill(kc->beta, c, 6, 0.0f);
    fill(kc->running_mean, c, 7, 1.0f);
    fill(kc->running_var, c, 8, 2.5f);  // 0.5 .. 4.5: positive
    if (k == KB_BN_BWD || k == KB_BN_RELU_BWD) {  // the forward's statistics (and output)
        if (!(kc->y = alloc_floats(n))) return -1;
        bn_forward_ref(kc, k == KB_BN_RELU_BWD, kc->y, kc->mean, kc->invstd);
    }
    return 0;
}

static int run_reference(KbCase *kc)
{
    float **r = kc->ref;
    const int n = kc->n, c = kc->c, hw = kc->hw;
    const size_t count = kc->count;
    switch (kc->kernel) {
    case KB_BN_FWD_TRAIN: bn_forward_ref(kc, false, r[0], r[1], r[2]); break;
    case KB_BN_RELU_FWD_TRAIN: bn_forward_ref(kc, true, r[0], r[1], r[2]); break;
    case KB_BN_FWD_INFER:
        bn_fwd_infer_cpu(n, c, hw, kc->x, kc->gamma, kc->beta, kc->running_mean, kc->running_var, r[0]);
        break;
    case KB_BN_BWD:
        bn_bwd_cpu(n, c, hw, kc->x, kc->dy, kc->gamma, kc->mean, kc->invstd, r[0], false, r[1], r[2], false);
        break;
    case KB_BN_RELU_BWD: {
        float *masked = alloc_floats(count);
        if (!masked) return -1;
        relu_bwd_cpu(count, kc->y, kc->dy, masked, false);
        bn_bwd_cpu(n, c, hw, kc->x, masked, kc->gamma, kc->mean, kc->invstd, r[0], false, r[1], r[2], false);
        free(masked);
        break;
    }
    case KB_RELU_FWD: relu_fwd_cpu(count, kc->x, r[0]); break;
    case KB_RELU_BWD: relu_bwd_cpu(count, kc->y, kc->dy, r[0], false); break;
    case KB_ADD: add_fwd_cpu(count, kc->x, kc->x2, r[0]); break;
    case KB_ADD_RELU:
        add_fwd_cpu(count, kc->x, kc->x2, r[0]);
        relu_fwd_cpu(count, r[0], r[0]);
        break;
    case KB_COPY_GRAD_ACCUM:
        memcpy(r[0], kc->dx_init, count * sizeof(float));
        copy_grad_cpu(count, kc->dy, r[0], true);
        break;
    case KB_CAST: memcpy(r[0], kc->x, count * sizeof(float)); break;
    case KB_COUNT: break;
    }
    return 0;
}

int kb_case_make(KbCase *kc, KbKernel k, int n, int c, int hw)
{
    memset(kc, 0, sizeof *kc);
    if ((unsigned)k >= KB_COUNT || n < 1 || c < 1 || hw < 1)
        return error_set(ERROR_BAD_USAGE, "bench_kernels: bad case (kernel %d, %d x %d x %d)", (int)k, n, c, hw);
    kc->kernel = k;
    kc->n = n; kc->c = c; kc->hw = hw;
    kc->count = (size_t)n * c * hw;
    set_outputs(kc);
    int rc = make_inputs(kc);
    for (int i = 0; rc == 0 && i < kc->outputs; i++)
        if (!(kc->ref[i] = alloc_floats(kc->out_count[i]))) rc = -1;
    if (rc == 0) rc = run_reference(kc);
    if (rc != 0) kb_case_free(kc);
    return rc;
}

int kb_outputs_alloc(const KbCase *kc, float *out[KB_MAX_OUT])
{
    for (int i = 0; i < KB_MAX_OUT; i++) out[i] = NULL;
    for (int i = 0; i < kc->outputs; i++)
        if (!(out[i] = alloc_floats(kc->out_count[i]))) {
            kb_outputs_free(out);
            return -1;
        }
    return 0;
}

void kb_outputs_free(float *out[KB_MAX_OUT])
{
    for (int i = 0; i < KB_MAX_OUT; i++) {
        free(out[i]);
        out[i] = NULL;
    }
}

static int cpu_fast_layers(const KbCase *kc, const CpuWorkspace *ws, float *out[KB_MAX_OUT])
{
    const int n = kc->n, c = kc->c, hw = kc->hw;
    const size_t count = kc->count;
    switch (kc->kernel) {
    case KB_BN_FWD_TRAIN:
    case KB_BN_RELU_FWD_TRAIN:
        bn_fwd_train_fast(ws, n, c, hw, kc->x, kc->gamma, kc->beta, out[0], out[1], out[2], NULL, NULL);
        if (kc->kernel == KB_BN_RELU_FWD_TRAIN) relu_fwd_fast(ws, count, out[0], out[0]);
        return 0;
    case KB_BN_FWD_INFER:
        bn_fwd_infer_fast(ws, n, c, hw, kc->x, kc->gamma, kc->beta, kc->running_mean, kc->running_var, out[0]);
        return 0;
    case KB_BN_BWD:
        bn_bwd_fast(ws, n, c, hw, kc->x, kc->dy, kc->gamma, kc->mean, kc->invstd, out[0], false, out[1],
                    out[2], false);
        return 0;
    case KB_BN_RELU_BWD: {
        float *masked = alloc_floats(count);
        if (!masked) return -1;
        relu_bwd_fast(ws, count, kc->y, kc->dy, masked, false);
        bn_bwd_fast(ws, n, c, hw, kc->x, masked, kc->gamma, kc->mean, kc->invstd, out[0], false, out[1],
                    out[2], false);
        free(masked);
        return 0;
    }
    case KB_RELU_FWD: relu_fwd_fast(ws, count, kc->x, out[0]); return 0;
    case KB_RELU_BWD: relu_bwd_fast(ws, count, kc->y, kc->dy, out[0], false); return 0;
    case KB_ADD: add_fwd_fast(ws, count, kc->x, kc->x2, out[0]); return 0;
    case KB_ADD_RELU:
        add_fwd_fast(ws, count, kc->x, kc->x2, out[0]);
        relu_fwd_fast(ws, count, out[0], out[0]);
        return 0;
    case KB_COPY_GRAD_ACCUM:
        memcpy(out[0], kc->dx_init, count * sizeof(float));
        copy_grad_fast(ws, count, kc->dy, out[0], true);
        return 0;
    case KB_CAST:
    case KB_COUNT: break;
    }
    return error_set(ERROR_BAD_USAGE, "bench_kernels: %s has no fast CPU layer", kb_kernel_name(kc->kernel));
}

int kb_run_cpu_fast(const KbCase *kc, int threads, float *out[KB_MAX_OUT])
{
    if (!kb_kernel_has_cpu_fast(kc->kernel))
        return error_set(ERROR_BAD_USAGE, "bench_kernels: %s has no fast CPU layer", kb_kernel_name(kc->kernel));
    cpu_fast_init();
    CpuWorkspace ws;
    if (cpu_workspace_init(&ws, NULL, 0, threads < 1 ? 1 : threads) != 0)
        return error_set(ERROR_OUT_OF_MEMORY, "bench_kernels: CPU workspace");
    int rc = cpu_fast_layers(kc, &ws, out);
    cpu_workspace_free(&ws);
    return rc;
}

void kb_validate(const KbCase *kc, float *const got[KB_MAX_OUT], double *max_abs, double *max_rel)
{
    *max_abs = 0.0;
    *max_rel = 0.0;
    for (int o = 0; o < kc->outputs; o++) {
        double worst = 0.0, scale = 0.0;
        for (size_t i = 0; i < kc->out_count[o]; i++) {
            double r = kc->ref[o][i], g = got[o][i], d = fabs(g - r);
            if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;  // NaN: infinitely wrong
            if (fabs(r) > scale) scale = fabs(r);
        }
        double rel = scale > 0.0 ? worst / scale : worst;
        if (worst > *max_abs) *max_abs = worst;
        if (rel > *max_rel) *max_rel = rel;
    }
}

double kb_tolerance(int storage)
{
    switch (storage) {
    case 1: return 2e-3;
    case 2: return 1.6e-2;
    default: return 1e-4;
    }
}
