// tc_gemm.h: one square fp16 GEMM on cuBLAS, C (n x n) = A (n x n) B (n x n), column-major,
// fp16 inputs and output with fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F), as
// PyTorch's autocast runs a Linear layer's matmul. The operands are multiples of 1/8 in
// [-1, 1] from a hash of their index (exact in fp16), so the host computes any entry of the
// exact product to check the GPU's against.
#ifndef TC_GEMM_H
#define TC_GEMM_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TcGemm TcGemm;

// Allocates and fills the operands (m = n = k = size) on the current device, creates a
// cuBLAS handle on a stream of its own. 0 or -1 with the error set (ERROR_OUT_OF_MEMORY
// when they do not fit).
int tc_gemm_create(int size, TcGemm **out);
// Runs the GEMM once, timed by CUDA events around the call alone: *seconds.
int tc_gemm_time(TcGemm *g, double *seconds);
// The largest |C_ij - exact_ij| / sum_p |A_ip B_pj| over `samples` entries of the last
// GEMM's output (the four corners first): *max_err.
int tc_gemm_check(TcGemm *g, int samples, double *max_err);
// What tc_gemm_check accepts: 1e-3 (the output is rounded to fp16, 2^-11 relative; fp32
// accumulation over up to 16384 terms adds far less).
double tc_gemm_tolerance(void);
// 2 n^3.
double tc_gemm_flops(const TcGemm *g);
void tc_gemm_free(TcGemm *g);

#ifdef __cplusplus
}
#endif
#endif
