// bench_tensor_cores.c: the tuning guide's "use tensor-core-friendly sizes": fp16 (and bf16)
// matrix dimensions that are multiples of 8 (16 bytes), which NVIDIA's "Matrix
// Multiplication Background User's Guide" ("Tensor Core Requirements") names as what
// tensor-core GEMMs are most efficient with.
// Micro (tensor_cores_gemm/*): one square cuBLAS GEMM, fp16 inputs and output with fp32
//   accumulation (cublasGemmEx), m = n = k = `size` (a multiple of 8: aligned, tuned) or
//   size - 1 (misaligned, baseline); CUDA events around the call alone, warm caches. The
//   two do different work (0.3% apart at 1024, 0.07% at 4096), so the fair figure is the rate,
//   the counter tflops (2 m n k / time); 16 sampled entries of C are checked against the
//   exact product (wrong = 1 fails the row).
// Macro (tensor_cores_width/*): fp16 training steps of the small preset with model.width
//   --tc_width (aligned, a multiple of 8) against one less (misaligned: every stage's
//   channels odd or not a multiple of 8), through the practice driver; images/s. No update
//   check: the two are different models (other parameter counts), nothing to compare.
// GPU only: without a usable CUDA device every row skips, naming why.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "bench/tensor_cores/tc_gemm.h"
#include "kernels/error.h"

#define GEMM_SAMPLES 16
#define GEMM_SIZES "1024,4096,8192"

typedef struct GemmVariant { const char *name; int minus; } GemmVariant;
static const GemmVariant misaligned_gemm = {"misaligned", 1};
static const GemmVariant aligned_gemm = {"aligned", 0};

static void bench_gemm(HarnessState *st, void *user)
{
    const GemmVariant *v = user;
    if (practice_skip_without_gpu(st)) return;
    int64_t size = harness_axis_int(st, "size");
    if (size < 8 || size > 65536 || size % 8 != 0) {
        harness_fail(st, "size must be a multiple of 8 in 8..65536 (the aligned dimension)");
        return;
    }
    int n = (int)size - v->minus;
    TcGemm *g = NULL;
    double seconds = 0.0, total = 0.0, err = 0.0;
    int64_t calls = 0;
    // one untimed call (cuBLAS's heuristics and kernel loading), then its result checked
    int rc = tc_gemm_create(n, &g);
    if (rc == 0) rc = tc_gemm_time(g, &seconds);
    if (rc == 0) rc = tc_gemm_check(g, GEMM_SAMPLES, &err);
    while (rc == 0 && harness_keep_running(st)) {
        rc = tc_gemm_time(g, &seconds);
        harness_set_iteration_time(st, seconds);
        total += seconds;
        calls++;
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "the GEMM");
        tc_gemm_free(g);
        return;
    }
    bool wrong = !(err <= tc_gemm_tolerance());
    harness_counter(st, "tflops", total > 0 ? tc_gemm_flops(g) * calls / total / 1e12 : 0.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_rel_err", err, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "tolerance", tc_gemm_tolerance(), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
    char label[400];
    snprintf(label, sizeof label, "%s: cuBLAS cublasGemmEx m = n = k = %d (%s), fp16 in and out + fp32 "
             "accumulate (CUBLAS_COMPUTE_32F); CUDA events around the call alone; warm caches; %d sampled "
             "entries checked against the exact product (tolerance %g of sum |a b|)", v->name, n,
             n % 8 == 0 ? "a multiple of 8" : "not a multiple of 8", GEMM_SAMPLES, tc_gemm_tolerance());
    harness_set_label(st, label);
    if (wrong) {
        char msg[160];
        snprintf(msg, sizeof msg, "GEMM result off: relative error %.3g > tolerance %g", err, tc_gemm_tolerance());
        harness_fail(st, msg);
    }
    tc_gemm_free(g);
}

// ---- the macro: model width ------------------------------------------------------------

static int aligned_width = 64;  // --tc_width

static void fp16_width(CoreConfig *c, int width)
{
    c->precision = CORE_PRECISION_FP16;
    c->model.width = width;
}
static void use_misaligned_width(CoreConfig *c) { fp16_width(c, aligned_width - 1); }
static void use_aligned_width(CoreConfig *c) { fp16_width(c, aligned_width); }

static const PracticeVariant width_variants[] = {
    {"misaligned", HARNESS_BASELINE, use_misaligned_width, NULL},
    {"aligned", HARNESS_TUNED, use_aligned_width, NULL},
};

int main(int argc, char **argv)
{
    harness_option_int("tc_width", 64, 8, 4096, NULL,
                       "tensor_cores_width: the aligned model.width, a multiple of 8 (the misaligned "
                       "variant trains one channel less); stage s has width << s channels");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    aligned_width = (int)harness_option_int_value("tc_width");
    if (aligned_width % 8 != 0) {
        fprintf(stderr, "--tc_width=%d: must be a multiple of 8 (the aligned width)\n", aligned_width);
        return 2;
    }
    const HarnessAxis gemm_axes[] = {{"size", GEMM_SIZES, false}, {NULL, NULL, false}};
    HarnessSpec spec = {.practice = "tensor_cores_gemm", .variant = misaligned_gemm.name,
                        .role = HARNESS_BASELINE, .timing = HARNESS_TIMING_CUDA_EVENTS, .fn = bench_gemm,
                        .user = (void *)&misaligned_gemm, .unit = HARNESS_US, .cache = HARNESS_CACHE_WARM,
                        .gpu_only = true};
    harness_register_axes(&spec, gemm_axes);
    spec.variant = aligned_gemm.name;
    spec.role = HARNESS_TUNED;
    spec.user = (void *)&aligned_gemm;
    harness_register_axes(&spec, gemm_axes);

    static char label[200];
    snprintf(label, sizeof label, "fp16 training steps, model.width %d (aligned) vs %d (misaligned); "
             "no update check: different models", aligned_width, aligned_width - 1);
    static Practice width = {
        .name = "tensor_cores_width", .variants = width_variants, .variant_count = 2, .presets = "small",
        .batches = "0", .mode = PRACTICE_THROUGHPUT, .gpu_only = true, .steps = 10, .min_time = 0.5,
        .check = PRACTICE_CHECK_NONE};
    width.label = label;
    practice_register(&width);
    return harness_run();
}
