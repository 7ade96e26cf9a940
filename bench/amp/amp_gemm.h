// amp_gemm.h: one cuBLAS GEMM, C (m x n) = A (m x k) B (k x n), column-major, both
// operands non-transposed, in one math type (amp_peak.h's AmpMath): strict fp32
// (CUBLAS_COMPUTE_32F), TF32 (CUBLAS_COMPUTE_32F_FAST_TF32), fp16 or bf16 inputs and
// output with fp32 accumulation (CUBLAS_COMPUTE_32F), as the core's GEMMs and PyTorch's
// autocast run them. Operands are filled on the device with multiples of 1/64 in [-1, 1]
// from a hash of their index: exact in every input type, so the host computes the exact
// product of any entry (in integers) to check the GPU's against.
#ifndef AMP_GEMM_H
#define AMP_GEMM_H

#include "bench/amp/amp_peak.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AmpGemm AmpGemm;

// Allocates and fills the operands on the current device and creates a cuBLAS handle.
// 0 or -1 with the error set (ERROR_OUT_OF_MEMORY when they do not fit).
int amp_gemm_create(AmpMath math, int m, int n, int k, AmpGemm **out);
// Runs the GEMM once, timed by CUDA events around it alone: *seconds.
int amp_gemm_time(AmpGemm *g, double *seconds);
// Compares `samples` entries of C (the last GEMM's output) with the exact product:
// *max_err is the largest |C_ij - exact_ij| / sum_p |A_ip B_pj|.
int amp_gemm_check(AmpGemm *g, int samples, double *max_err);
// The largest error amp_gemm_check accepts for a math type (relative to sum |a b|):
// fp32 and tf32 1e-4 (fp32 accumulation over up to 16384 terms; the inputs are exact in
// tf32), fp16 1e-3 (output rounded to fp16: 2^-11), bf16 8e-3 (output rounded to bf16: 2^-8).
double amp_gemm_tolerance(AmpMath math);
// The strict-fp32 probe (bench/amp/amp_probe.h) in math type m (AMP_MATH_FP32 or AMP_MATH_TF32):
// a 256 x 256 x 256 GEMM of probe operands on the current device, `samples` entries of it
// against the exact product in double; *max_err as amp_gemm_check's. Strict fp32 stays
// below AMP_PROBE_STRICT_LIMIT, TF32 lands above it. 0 or -1 with the error set.
int amp_gemm_probe(AmpMath m, int samples, double *max_err);
// 2 m n k.
double amp_gemm_flops(const AmpGemm *g);
void amp_gemm_free(AmpGemm *g);

#ifdef __cplusplus
}
#endif
#endif
