// kernels_case.h: the host side of bench_kernels' micro benchmarks of our own CUDA kernels
// (kernels/layers_cuda.cuh), in the llm.c dev/cuda style: for each kernel, its inputs (one
// deterministic fill, identical for every storage type: multiples of 1/64 of magnitude at
// most 2, exact in fp32, fp16 and bf16), its CPU reference (kernels/layers_cpu.h, fp32),
// the fast CPU backend's version of the same layer (kernels/layers_cpu_fast.h) as a
// candidate where one exists, the validation of any candidate against the reference, and
// the bytes the kernel must move (for GB/s).
#ifndef KERNELS_CASE_H
#define KERNELS_CASE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    KB_BN_FWD_TRAIN,      // cuda_bn_fwd_train: y, batch mean, batch inverse std
    KB_BN_RELU_FWD_TRAIN, // cuda_bn_relu_fwd_train
    KB_BN_FWD_INFER,      // cuda_bn_fwd_infer (running statistics)
    KB_BN_BWD,            // cuda_bn_bwd: dx, dgamma, dbeta
    KB_BN_RELU_BWD,       // cuda_bn_relu_bwd
    KB_RELU_FWD,          // cuda_relu_fwd
    KB_RELU_BWD,          // cuda_relu_bwd (dx overwritten)
    KB_ADD,               // cuda_add_fwd
    KB_ADD_RELU,          // cuda_add_relu_fwd
    KB_COPY_GRAD_ACCUM,   // cuda_copy_grad with accum: dx += dy
    KB_CAST,              // cuda_cast: fp32 to the storage type
    KB_COUNT
} KbKernel;

#define KB_MAX_OUT 3

// One kernel on one shape (N, C, H*W): host inputs and the reference outputs, fp32 NCHW.
typedef struct KbCase {
    KbKernel kernel;
    int n, c, hw;
    size_t count;            // n * c * hw
    float *x, *x2;           // x: BN input, ReLU input/output, add's a, cast source; x2: add's b
    float *dy, *y, *dx_init; // upstream gradient; ReLU'd or forward output (relu_bwd); dx's start
    float *gamma, *beta, *mean, *invstd, *running_mean, *running_var;  // per channel
    int outputs;
    const char *out_name[KB_MAX_OUT];
    size_t out_count[KB_MAX_OUT];
    float *ref[KB_MAX_OUT];  // the reference's outputs
} KbCase;

const char *kb_kernel_name(KbKernel k);
// 0, or -1 for an unknown name.
int kb_kernel_parse(const char *name, KbKernel *out);
bool kb_kernel_is_bn(KbKernel k);
// The fast CPU backend has this layer (or its two halves: add then ReLU, mask then BN).
bool kb_kernel_has_cpu_fast(KbKernel k);
// cuDNN has this layer (legacy batch-norm API: training, inference, backward).
bool kb_kernel_has_cudnn(KbKernel k);

// Bytes the kernel must move over DRAM for `count` elements of elem_size bytes: every
// tensor read or written once per pass; batch-norm training reads x twice (statistics,
// then y) and its backward reads x and dy twice (the reduction, then dx), as every
// two-pass implementation (ours and cuDNN's non-persistent kernels) must once the tensor
// no longer fits the L2. Per-channel vectors are neglected.
double kb_bytes(KbKernel k, size_t count, size_t elem_size);
// What the bytes model counts, in words (for the label).
const char *kb_bytes_note(KbKernel k);

// Fills the inputs for (n, c, hw) and runs the CPU reference. 0, or -1 (out of memory) with
// the error set.
int kb_case_make(KbCase *kc, KbKernel k, int n, int c, int hw);
void kb_case_free(KbCase *kc);
// Output buffers shaped like kc's reference outputs (out[i] of out_count[i] floats); -1
// (out of memory) with the error set.
int kb_outputs_alloc(const KbCase *kc, float *out[KB_MAX_OUT]);
void kb_outputs_free(float *out[KB_MAX_OUT]);

// The fast CPU layer(s) on kc's inputs with `threads` threads into out. -1 when the kernel has
// no CPU counterpart or memory runs out (error set).
int kb_run_cpu_fast(const KbCase *kc, int threads, float *out[KB_MAX_OUT]);

// Largest error of the candidate's outputs: for each output, max |got - ref| (max_abs) and
// that divided by the output's largest reference magnitude (max_rel: 1e-3 means off by a
// thousandth of the output's scale); the worst over outputs. NaN in got: infinite error.
void kb_validate(const KbCase *kc, float *const got[KB_MAX_OUT], double *max_abs, double *max_rel);
// The max_rel a candidate may reach: storage 0 (fp32: summation order, 1e-4), 1 (fp16:
// inputs exact, outputs rounded to 11 bits, 2e-3), 2 (bf16: 8 bits, 1.6e-2).
double kb_tolerance(int storage);

#ifdef __cplusplus
}
#endif
#endif
