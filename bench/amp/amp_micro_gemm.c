// amp_micro_gemm.c: the GEMM micro of the amp practice (amp_gemm/*, amp_gemm_linear/*):
// cuBLAS GEMMs (bench/amp/amp_gemm.cu) timed by CUDA events around the calls alone, warm
// caches, strict fp32 vs TF32, fp16 and bf16; TFLOP/s and the fraction of the GPU's dense
// peak for that type (bench/amp/amp_peak.c); sampled entries checked against the exact
// product, and the strict-fp32 probe (bench/amp/amp_probe.h) on the fp32 and tf32 rows.
// Also the skip both micro families share when the GPU lacks TF32 or bf16.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/amp/amp_gemm.h"
#include "bench/amp/amp_peak.h"
#include "bench/amp/amp_practice.h"
#include "bench/amp/amp_probe.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/error.h"
#include "kernels/model.h"

#define GEMM_SAMPLES 16         // entries of C checked against the exact product
#define MAX_LINEAR 8

static const char *gemm_math_text(AmpMath m)
{
    switch (m) {
    case AMP_MATH_FP32: return "strict fp32 (CUBLAS_COMPUTE_32F)";
    case AMP_MATH_TF32: return "TF32 (CUBLAS_COMPUTE_32F_FAST_TF32)";
    case AMP_MATH_FP16: return "fp16 in and out + fp32 accumulate (CUBLAS_COMPUTE_32F)";
    default: return "bf16 in and out + fp32 accumulate (CUBLAS_COMPUTE_32F)";
    }
}

// The current device's dense peak for m (0 when amp_peak.c has no entry) and how it was computed.
static double device_peak(AmpMath m, char *how, size_t size)
{
    int dev = 0, major = 0, minor = 0, sms = 0, khz = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev);
    double per = amp_peak_flops_per_clock_sm(major, minor, m);
    if (per > 0)
        snprintf(how, size, "peak %d SMs x %d MHz (max SM clock) x %.0f %s FLOP/clock/SM (sm_%d%d)", sms,
                 khz / 1000, per, amp_math_name(m), major, minor);
    else
        snprintf(how, size, "no peak: sm_%d%d has no %s entry in bench/amp/amp_peak.c", major, minor, amp_math_name(m));
    return amp_peak_flops(major, minor, sms, 1e3 * khz, m);
}

// TF32 and bf16 exist from compute capability 8.0 (Ampere) on: older GPUs lack the type,
// a fact about the machine (a skip with the reason), not a failure. NVIDIA_TF32_OVERRIDE=0
// makes the libraries run every TF32 request in strict fp32: a TF32 row would time fp32.
// True when skipped.
bool amp_bench_skip_without_math(HarnessState *st, bool tf32, bool bf16)
{
    const char *override = getenv("NVIDIA_TF32_OVERRIDE");
    if (tf32 && override && strcmp(override, "0") == 0) {
        harness_skip(st, "NVIDIA_TF32_OVERRIDE=0 turns TF32 off in cuBLAS and cuDNN: unset it to measure TF32");
        return true;
    }
    int dev = 0, major = 0, minor = 0;
    if (!(tf32 || bf16) || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess || major >= 8) {
        (void)cudaGetLastError();
        return false;  // a CUDA error here shows up, with its kind, in the run itself
    }
    char why[120];
    snprintf(why, sizeof why, "TF32 and bf16 need compute capability 8.0 or newer (this GPU: sm_%d%d)", major, minor);
    harness_skip(st, why);
    return true;
}

// Times `count` GEMMs one after the other per iteration; checks each first.
static void run_gemms(HarnessState *st, AmpMath math, const int (*mnk)[3], int count, const char *what)
{
    if (amp_bench_skip_without_math(st, math == AMP_MATH_TF32, math == AMP_MATH_BF16)) return;
    AmpGemm *g[MAX_LINEAR] = {NULL};
    int made = 0, rc = 0;
    double worst = 0.0, flops = 0.0, seconds = 0.0, total = 0.0;
    int64_t iterations = 0;
    for (; made < count && rc == 0; made++) rc = amp_gemm_create(math, mnk[made][0], mnk[made][1], mnk[made][2], &g[made]);
    if (rc != 0) made--;
    for (int i = 0; i < made && rc == 0; i++) {  // untimed warm-up GEMM, then its check
        double err = 0.0;
        rc = amp_gemm_time(g[i], &seconds);
        if (rc == 0) rc = amp_gemm_check(g[i], GEMM_SAMPLES, &err);
        if (isnan(err) || err > worst) worst = err;
        flops += amp_gemm_flops(g[i]);
    }
    // The strict-fp32 probe (operands TF32 cannot represent): strict fp32's error must stay
    // below what TF32 rounding gives, so a "strict" baseline that ran TF32 is caught; the
    // strict row also measures TF32's, the evidence that the probe tells them apart.
    bool probed = math == AMP_MATH_FP32 || math == AMP_MATH_TF32;
    double probe_err = 0.0, probe_tf32_err = 0.0;
    if (rc == 0 && probed) rc = amp_gemm_probe(math, GEMM_SAMPLES, &probe_err);
    if (rc == 0 && math == AMP_MATH_FP32) rc = amp_gemm_probe(AMP_MATH_TF32, GEMM_SAMPLES, &probe_tf32_err);
    while (rc == 0 && harness_keep_running(st)) {
        double it = 0.0;
        for (int i = 0; i < made && rc == 0; i++) {
            rc = amp_gemm_time(g[i], &seconds);
            it += seconds;
        }
        harness_set_iteration_time(st, it);
        total += it;
        iterations++;
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "the GEMM");
    } else {
        char how[200], label[600];
        double peak = device_peak(math, how, sizeof how);
        double tflops = total > 0 ? flops * iterations / total / 1e12 : 0.0;
        bool strict_like_tf32 = math == AMP_MATH_FP32 && !(probe_err < AMP_PROBE_STRICT_LIMIT);
        bool wrong = !(worst <= amp_gemm_tolerance(math)) || strict_like_tf32;
        harness_counter(st, "tflops", tflops, HARNESS_COUNTER_PLAIN);
        if (probed) harness_counter(st, "probe_err", probe_err, HARNESS_COUNTER_PLAIN);
        if (math == AMP_MATH_FP32) harness_counter(st, "probe_tf32_err", probe_tf32_err, HARNESS_COUNTER_PLAIN);
        if (peak > 0) {
            harness_counter(st, "peak_tflops", peak / 1e12, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "fraction_of_peak", tflops * 1e12 / peak, HARNESS_COUNTER_PLAIN);
        }
        harness_counter(st, "max_rel_err", worst, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "tolerance", amp_gemm_tolerance(math), HARNESS_COUNTER_PLAIN);
        harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
        snprintf(label, sizeof label, "cuBLAS cublasGemmEx %s, %s; CUDA events around the GEMMs alone; "
                 "warm caches (the same operands every iteration); %s; %d sampled entries checked against "
                 "the exact product (tolerance %g of sum |a b|)", what, gemm_math_text(math), how,
                 GEMM_SAMPLES, amp_gemm_tolerance(math));
        harness_set_label(st, label);
        if (strict_like_tf32) {
            char msg[240];
            snprintf(msg, sizeof msg, "strict fp32 GEMM rounded like TF32: probe error %.3g, not below %g "
                     "(TF32's: %.3g)", probe_err, AMP_PROBE_STRICT_LIMIT, probe_tf32_err);
            harness_fail(st, msg);
        } else if (wrong) {
            char msg[200];
            snprintf(msg, sizeof msg, "GEMM result off: relative error %.3g > tolerance %g", worst,
                     amp_gemm_tolerance(math));
            harness_fail(st, msg);
        }
    }
    for (int i = 0; i < made; i++) amp_gemm_free(g[i]);
}

void amp_bench_gemm_square(HarnessState *st, void *user)
{
    AmpMath math = *(const AmpMath *)user;
    if (practice_skip_without_gpu(st)) return;
    int64_t n = harness_axis_int(st, "size");
    if (n < 1 || n > 65536) {
        harness_fail(st, "size out of range 1..65536");
        return;
    }
    int mnk[1][3] = {{(int)n, (int)n, (int)n}};
    char what[80];
    snprintf(what, sizeof what, "m = n = k = %d", (int)n);
    run_gemms(st, math, mnk, 1, what);
}

// The forward GEMMs of a preset's linear layers: m = out features, n = batch, k = in features.
void amp_bench_gemm_linear(HarnessState *st, void *user)
{
    AmpMath math = *(const AmpMath *)user;
    if (practice_skip_without_gpu(st)) return;
    CoreConfig cfg;
    ModelGraph *g = malloc(sizeof *g);
    if (!g || practice_config(st, CORE_BACKEND_CUDA, NULL, &cfg) != 0 || model_build(&cfg.model, g) != 0) {
        if (!g) error_set(ERROR_OUT_OF_MEMORY, "model graph: out of memory (host)");
        practice_fail_or_skip(st, "the preset");
        free(g);
        return;
    }
    int n = cfg.batch_size;
    int mnk[MAX_LINEAR][3], count = 0;
    char what[300] = "";
    size_t used = 0;
    for (int i = 0; i < g->n_ops && count < MAX_LINEAR; i++) {
        const ModelOp *op = &g->ops[i];
        if (op->kind != OP_LINEAR) continue;
        mnk[count][0] = op->cout;
        mnk[count][1] = n;
        mnk[count][2] = op->cin;
        count++;
        int w = snprintf(what + used, sizeof what - used, "%s%dx%dx%d", used ? " + " : "the forward GEMMs (m x n x k) ",
                         op->cout, n, op->cin);
        if (w > 0 && (size_t)w < sizeof what - used) used += (size_t)w;
    }
    free(g);
    if (count == 0) {
        harness_skip(st, "the preset has no linear layer");
        return;
    }
    run_gemms(st, math, (const int (*)[3])mnk, count, what);
}
