// bench_kernels.c: micro benchmarks of the core's own CUDA kernels
// (kernels/cuda/layers_cuda*.cu), in the llm.c dev/cuda style: each kernel next to its CPU
// reference, validated, and timed.
//   kernels_bn/ours (tuned) and kernels_bn/cudnn (baseline, cuDNN's legacy batch norm as
//     PyTorch calls it: training, inference, backward): batch norm on every preset's BN
//     shapes, fp32/fp16/bf16, NCHW and NHWC; speedup = cuDNN's time / ours.
//   kernels_ew/ours (reference): ReLU forward and backward, residual add, add+ReLU, gradient
//     accumulation, fp32 cast, on every preset's ReLU/add shapes, fp32/fp16/bf16.
//   Each GPU row: its inputs (multiples of 1/32, exact in every storage type) converted to the
//   storage type and layout; one launch, whose outputs are compared with the CPU reference
//   (kernels/reference/layers_cpu.c, fp32, the same inputs): max error relative to the output's
//   largest magnitude, within a tolerance per storage type, else the row FAILS (no time);
//   then CUDA events around each launch alone after an L2 flush (cold cache); GB/s = the
//   bytes the kernel must move (kernels_case.h's model) / time, and its fraction of the
//   device's peak DRAM bandwidth (from the device attributes).
//   kernels_bn/cpu_fast and kernels_ew/cpu_fast (reference, CPU, wall clock): the fast CPU
//     backend's layers (kernels/layers_cpu_fast.h) validated against the same reference the
//     same way: this is what runs without a GPU, so the validation code is exercised
//     everywhere (--kernels_perturb shows it fails on a wrong result).
// Shapes come from the model graph of each preset (model_build) at its default batch, plus
// resnet18 at 128 and 256: by default the largest and smallest distinct shape of each (preset,
// batch); --kernels_shapes=all takes every distinct one.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/driver/harness.h"
#include "bench/core_kernels/kernels_case.h"
#include "bench/core_kernels/kernels_gpu.h"
#include "bench/driver/practice.h"
#include "kernels/error.h"
#include "kernels/model.h"

#define CPU_MAX_ELEMENTS_DEFAULT (1 << 22)
#define SHAPES_CAP 4096

static const char *storage_names[] = {"fp32", "fp16", "bf16"};

typedef struct Family {
    bool bn;      // kernels_bn (layout axis) or kernels_ew
    bool gpu;
    KbImpl impl;  // GPU rows
} Family;

static char bn_shapes[SHAPES_CAP], ew_shapes[SHAPES_CAP];
static int perturb;
static int64_t cpu_max_elements;
static double peak_bps;
static char peak_source[200];

// ---- shapes of the presets -------------------------------------------------------------

static void add_shape(char *list, int n, ModelShape s)
{
    char name[64];
    snprintf(name, sizeof name, "n%dc%dh%dw%d", n, s.c, s.h, s.w);
    size_t len = strlen(name), used = strlen(list);
    for (const char *p = list; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ','))
        if (strcspn(p, ",") == len && strncmp(p, name, len) == 0) return;
    if (used + len + 2 < SHAPES_CAP) snprintf(list + used, SHAPES_CAP - used, "%s%s", used ? "," : "", name);
}

static size_t shape_size(ModelShape s) { return (size_t)s.c * s.h * s.w; }

// The distinct shapes of one preset at batch n (BN inputs, or ReLU/add outputs); all of them,
// or the largest and the smallest.
static void add_preset_shapes(const ModelGraph *g, int n, bool bn, bool all, char *list)
{
    ModelShape seen[MODEL_MAX_TENSORS];
    int count = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const ModelOp *op = &g->ops[i];
        bool take = bn ? op->kind == OP_BN : op->kind == OP_RELU || op->kind == OP_ADD;
        if (!take) continue;
        ModelShape s = g->shapes[bn ? op->in : op->out];
        bool dup = false;
        for (int j = 0; j < count && !dup; j++)
            dup = seen[j].c == s.c && seen[j].h == s.h && seen[j].w == s.w;
        if (!dup) seen[count++] = s;
    }
    if (!count) return;
    int lo = 0, hi = 0;
    for (int j = 1; j < count; j++) {
        if (shape_size(seen[j]) < shape_size(seen[lo])) lo = j;
        if (shape_size(seen[j]) > shape_size(seen[hi])) hi = j;
    }
    for (int j = 0; j < count; j++)
        if (all || j == lo || j == hi) add_shape(list, n, seen[j]);
}

static void collect_shapes(bool all)
{
    static const char *presets[] = {"tiny", "mlp", "small", "medium", "resnet18"};
    ModelGraph *g = malloc(sizeof *g);
    for (size_t i = 0; g && i < sizeof presets / sizeof presets[0]; i++) {
        CoreConfig cfg;
        if (core_config_preset(&cfg, presets[i]) != 0 || model_build(&cfg.model, g) != 0) continue;
        int batches[3] = {cfg.batch_size, 0, 0};
        if (strcmp(presets[i], "resnet18") == 0) {
            batches[0] = 128;
            batches[1] = 256;
            batches[2] = cfg.batch_size == 128 || cfg.batch_size == 256 ? 0 : cfg.batch_size;
        }
        for (int b = 0; b < 3 && batches[b]; b++) {
            add_preset_shapes(g, batches[b], true, all, bn_shapes);
            add_preset_shapes(g, batches[b], false, all, ew_shapes);
        }
    }
    free(g);
    if (!bn_shapes[0]) snprintf(bn_shapes, sizeof bn_shapes, "n32c8h16w16");
    if (!ew_shapes[0]) snprintf(ew_shapes, sizeof ew_shapes, "n32c8h16w16");
}

// ---- one run ---------------------------------------------------------------------------

static KbCase cached;
static bool cached_ok;

// The case of this run (the reference is computed once per kernel and shape).
static const KbCase *case_of(HarnessState *st, KbKernel k, bool bn)
{
    int n = 0, c = 0, h = 0, w = 0;
    char tail;
    const char *shape = harness_axis_str(st, "shape");
    if (sscanf(shape, "n%dc%dh%dw%d%c", &n, &c, &h, &w, &tail) != 4 || n < 1 || c < 1 || h < 1 || w < 1 ||
        (double)n * c * h * w > 2e9) {
        harness_fail(st, "shape must be nNcChHwW with positive sizes (at most 2e9 elements)");
        return NULL;
    }
    if (bn != kb_kernel_is_bn(k)) {
        harness_fail(st, "this kernel belongs to the other family (kernels_bn / kernels_ew)");
        return NULL;
    }
    if (cached_ok && cached.kernel == k && cached.n == n && cached.c == c && cached.hw == h * w) return &cached;
    if (cached_ok) kb_case_free(&cached);
    cached_ok = false;
    if (kb_case_make(&cached, k, n, c, h * w) != 0) {
        practice_fail_or_skip(st, "the inputs and CPU reference");
        return NULL;
    }
    cached_ok = true;
    return &cached;
}

static int storage_of(HarnessState *st)
{
    const char *d = harness_axis_str(st, "dtype");
    for (int i = 0; i < 3; i++)
        if (strcmp(d, storage_names[i]) == 0) return i;
    harness_fail(st, "dtype must be fp32, fp16 or bf16");
    return -1;
}

// Validates got (perturbed first when --kernels_perturb); false (the run failed) when off.
static bool validate(HarnessState *st, const KbCase *kc, float *got[KB_MAX_OUT], int storage, double *err)
{
    if (perturb) got[0][0] += 0.1f * (1.0f + fabsf(kc->ref[0][0]));
    double max_abs = 0.0, tol = kb_tolerance(storage);
    kb_validate(kc, got, &max_abs, err);
    harness_counter(st, "max_rel_err", *err, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_abs_err", max_abs, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "tolerance", tol, HARNESS_COUNTER_PLAIN);
    if (*err <= tol) return true;
    char msg[200];
    snprintf(msg, sizeof msg, "validation failed: max error %.3g of the output's scale > tolerance %g "
             "(against the CPU reference)", *err, tol);
    harness_fail(st, msg);
    return false;
}

static void report_rate(HarnessState *st, double bytes, double total, int64_t iterations)
{
    double gbps = total > 0.0 ? bytes * (double)iterations / total / 1e9 : 0.0;
    harness_counter(st, "bytes", bytes, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "gbps", gbps, HARNESS_COUNTER_PLAIN);
    if (peak_bps > 0.0) {
        harness_counter(st, "peak_gbps", peak_bps / 1e9, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "fraction_of_peak", gbps * 1e9 / peak_bps, HARNESS_COUNTER_PLAIN);
    }
}

static void bench_gpu(HarnessState *st, void *user)
{
    const Family *f = user;
    if (practice_skip_without_gpu(st)) return;
    KbKernel k;
    if (kb_kernel_parse(harness_axis_str(st, "kernel"), &k) != 0) {
        harness_fail(st, "unknown kernel");
        return;
    }
    int storage = storage_of(st);
    bool nhwc = f->bn && strcmp(harness_axis_str(st, "layout"), "nhwc") == 0;
    if (storage < 0) return;
    if (f->bn && !nhwc && strcmp(harness_axis_str(st, "layout"), "nchw") != 0) {
        harness_fail(st, "layout must be nchw or nhwc");
        return;
    }
    if (f->impl == KB_IMPL_CUDNN && !kb_kernel_has_cudnn(k)) {
        harness_skip(st, "cuDNN has no such kernel (its batch norm: bn_fwd_train, bn_fwd_infer, bn_bwd)");
        return;
    }
    const KbCase *kc = case_of(st, k, f->bn);
    if (!kc) return;
    KbGpu *g = NULL;
    float *got[KB_MAX_OUT] = {NULL, NULL, NULL};
    double seconds = 0.0, total = 0.0, err = 0.0;
    int64_t iterations = 0;
    int rc = kb_outputs_alloc(kc, got);
    if (rc == 0) rc = kb_gpu_create(kc, storage, nhwc, f->impl, &g);
    if (rc == 0) rc = kb_gpu_run(g, &seconds);  // untimed: the run validated
    if (rc == 0) rc = kb_gpu_outputs(g, got);
    if (rc != 0 && f->impl == KB_IMPL_CUDNN && kb_gpu_cudnn_refusal()) {
        harness_skip(st, kb_gpu_cudnn_refusal());
    } else if (rc != 0) {
        practice_fail_or_skip(st, f->impl == KB_IMPL_CUDNN ? "cuDNN's batch norm" : "the kernel");
    } else if (validate(st, kc, got, storage, &err)) {
        while (rc == 0 && harness_keep_running(st)) {
            rc = kb_gpu_run(g, &seconds);
            harness_set_iteration_time(st, seconds);
            total += seconds;
            iterations++;
        }
        if (rc != 0) {
            practice_fail_or_skip(st, "the timed launches");
        } else {
            double bytes = kb_bytes(k, kc->count, storage == 0 ? 4 : 2);
            report_rate(st, bytes, total, iterations);
            char label[768];
            snprintf(label, sizeof label, "%s: %s, %s%s%s, (%d, %d, %d): one launch timed by CUDA events after an "
                     "L2 flush; bytes: %s; validated against the CPU reference: max error %.2g of the output's "
                     "scale (tolerance %g); peak: %s", kb_kernel_name(k), kb_gpu_note(g), storage_names[storage],
                     f->bn ? " " : "", f->bn ? (nhwc ? "NHWC" : "NCHW") : "", kc->n, kc->c, kc->hw, kb_bytes_note(k),
                     err, kb_tolerance(storage), peak_bps > 0.0 ? peak_source : "unknown (no fraction reported)");
            harness_set_label(st, label);
        }
    }
    kb_gpu_free(g);
    kb_outputs_free(got);
}

static void bench_cpu(HarnessState *st, void *user)
{
    const Family *f = user;
    KbKernel k;
    if (kb_kernel_parse(harness_axis_str(st, "kernel"), &k) != 0 || !kb_kernel_has_cpu_fast(k)) {
        harness_fail(st, "unknown kernel, or one without a fast CPU layer");
        return;
    }
    const KbCase *kc = NULL;
    int n = 0, c = 0, h = 0, w = 0;
    if (sscanf(harness_axis_str(st, "shape"), "n%dc%dh%dw%d", &n, &c, &h, &w) == 4 &&
        (double)n * c * h * w > (double)cpu_max_elements) {
        char why[200];
        snprintf(why, sizeof why, "%.0f elements: more than --kernels_cpu_max_elements=%lld (the fast CPU "
                 "layers' check is meant for small shapes)", (double)n * c * h * w, (long long)cpu_max_elements);
        harness_skip(st, why);
        return;
    }
    if (!(kc = case_of(st, k, f->bn))) return;
    float *got[KB_MAX_OUT] = {NULL, NULL, NULL};
    double err = 0.0;
    const HarnessCommon *common = harness_common();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = common->threads > 0 ? common->threads : cores > 0 ? (int)cores : 1;
    int rc = kb_outputs_alloc(kc, got);
    if (rc == 0) rc = kb_run_cpu_fast(kc, threads, got);
    if (rc != 0) {
        practice_fail_or_skip(st, "the fast CPU layer");
    } else if (validate(st, kc, got, 0, &err)) {
        int64_t iterations = 0;
        while (rc == 0 && harness_keep_running(st)) {
            rc = kb_run_cpu_fast(kc, threads, got);
            iterations++;
        }
        if (rc != 0) {
            practice_fail_or_skip(st, "the fast CPU layer");
        } else {
            harness_counter(st, "bytes", kb_bytes(k, kc->count, 4), HARNESS_COUNTER_PLAIN);
            // a rate counter is divided by the run's whole measured time: give it every iteration's bytes
            harness_counter(st, "gbps", kb_bytes(k, kc->count, 4) * (double)iterations / 1e9, HARNESS_COUNTER_RATE);
            char label[512];
            snprintf(label, sizeof label, "%s: the fast CPU layer (layers_cpu_fast.c, %d thread%s), fp32 NCHW, "
                     "(%d, %d, %d), wall clock; validated against the CPU reference: max error %.2g of the "
                     "output's scale (tolerance %g)", kb_kernel_name(k), threads, threads == 1 ? "" : "s", kc->n,
                     kc->c, kc->hw, err, kb_tolerance(0));
            harness_set_label(st, label);
        }
    }
    kb_outputs_free(got);
}

// ---- registration ----------------------------------------------------------------------

static void kernel_list(bool bn, bool cpu, bool cudnn, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int k = 0; k < KB_COUNT; k++) {
        if (kb_kernel_is_bn((KbKernel)k) != bn || (cpu && !kb_kernel_has_cpu_fast((KbKernel)k)) ||
            (cudnn && !kb_kernel_has_cudnn((KbKernel)k)))
            continue;
        int wr = snprintf(out + used, size - used, "%s%s", used ? "," : "", kb_kernel_name((KbKernel)k));
        if (wr > 0 && (size_t)wr < size - used) used += (size_t)wr;
    }
}

static void register_family(const char *practice, const char *variant, HarnessRole role, const Family *f,
                            const char *kernels, const char *shapes)
{
    HarnessSpec spec = {.practice = practice, .variant = variant, .role = role, .fn = f->gpu ? bench_gpu : bench_cpu,
                        .user = (void *)f, .unit = HARNESS_US, .min_time = f->gpu ? 0.05 : 0.02};
    spec.axes[0] = (HarnessAxis){"kernel", kernels, true};
    spec.axes[1] = (HarnessAxis){"shape", shapes, true};
    if (f->gpu) {
        spec.timing = HARNESS_TIMING_CUDA_EVENTS;
        spec.cache = HARNESS_CACHE_COLD;
        spec.axes[2] = (HarnessAxis){"dtype", "fp32,fp16,bf16", true};
        if (f->bn) spec.axes[3] = (HarnessAxis){"layout", "nchw,nhwc", true};
    } else {
        spec.timing = HARNESS_TIMING_WALL;
    }
    harness_register(&spec);
}

int main(int argc, char **argv)
{
    harness_option_str("kernels_shapes", "default", NULL,
                       "default: the largest and smallest distinct BN (and ReLU/add) shape of every preset at its "
                       "default batch and of resnet18 at 128 and 256; all: every distinct shape of those");
    harness_option_int("kernels_cpu_max_elements", CPU_MAX_ELEMENTS_DEFAULT, 1, (int64_t)1 << 31, NULL,
                       "the cpu_fast rows skip shapes with more elements than this (the reference and the fast "
                       "CPU layers on a ResNet-18 batch take seconds each)");
    harness_option_int("kernels_perturb", 0, 0, 1, NULL,
                       "1: add 0.1 x scale to the first output of every candidate before validating it, so "
                       "every validated row must fail (proves the validation can fail)");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    const char *which = harness_option_str_value("kernels_shapes");
    if (strcmp(which, "default") != 0 && strcmp(which, "all") != 0) {
        fprintf(stderr, "bench_kernels: --kernels_shapes must be default or all (got %s)\n", which);
        return 2;
    }
    perturb = (int)harness_option_int_value("kernels_perturb");
    cpu_max_elements = harness_option_int_value("kernels_cpu_max_elements");
    collect_shapes(strcmp(which, "all") == 0);
    if (practice_on_gpu() && kb_peak_bandwidth(&peak_bps, peak_source, sizeof peak_source) == 0) {
        harness_add_context("peak_dram_bandwidth", peak_source);
    } else {
        peak_bps = 0.0;
        error_clear();
    }

    static const Family bn_ours = {true, true, KB_IMPL_OURS}, bn_cudnn = {true, true, KB_IMPL_CUDNN},
                        bn_cpu = {true, false, KB_IMPL_OURS}, ew_ours = {false, true, KB_IMPL_OURS},
                        ew_cpu = {false, false, KB_IMPL_OURS};
    static char bn_all[256], bn_cudnn_list[256], bn_cpu_list[256], ew_all[256], ew_cpu_list[256];
    kernel_list(true, false, false, bn_all, sizeof bn_all);
    kernel_list(true, false, true, bn_cudnn_list, sizeof bn_cudnn_list);
    kernel_list(true, true, false, bn_cpu_list, sizeof bn_cpu_list);
    kernel_list(false, false, false, ew_all, sizeof ew_all);
    kernel_list(false, true, false, ew_cpu_list, sizeof ew_cpu_list);
    register_family("kernels_bn", "ours", HARNESS_TUNED, &bn_ours, bn_all, bn_shapes);
    register_family("kernels_bn", "cudnn", HARNESS_BASELINE, &bn_cudnn, bn_cudnn_list, bn_shapes);
    register_family("kernels_bn", "cpu_fast", HARNESS_REFERENCE, &bn_cpu, bn_cpu_list, bn_shapes);
    register_family("kernels_ew", "ours", HARNESS_REFERENCE, &ew_ours, ew_all, ew_shapes);
    register_family("kernels_ew", "cpu_fast", HARNESS_REFERENCE, &ew_cpu, ew_cpu_list, ew_shapes);
    rc = harness_run();
    if (cached_ok) kb_case_free(&cached);
    return rc;
}
