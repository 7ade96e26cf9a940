// conv_select.h: choosing a cuDNN convolution algorithm from a ranked candidate list
// (cuDNN's heuristics or its Find results, best first), as PyTorch does: candidates the
// rules exclude are passed over, and each remaining one is tried with one real call in
// order until one works. Plain C with cuDNN's types only, so the selection logic runs
// (and is tested) without a GPU; conv_cudnn.cu supplies the real trial calls.
#ifndef CONV_SELECT_H
#define CONV_SELECT_H

#include <cudnn.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CONV_PASS_FWD, CONV_PASS_BWD_DATA, CONV_PASS_BWD_FILTER } ConvPass;

// One candidate as cuDNN reports it (the fields of cudnnConvolution*AlgoPerf_t).
typedef struct ConvCandidate {
    int algo;                     // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t of the pass
    cudnnStatus_t status;         // cuDNN's own verdict (Find: from its timing run)
    size_t memory;                // workspace bytes
    cudnnMathType_t math;         // math type the result was obtained with
    cudnnDeterminism_t determinism;
} ConvCandidate;

typedef struct ConvSelectRules {
    size_t workspace_limit;       // bytes
    bool strict_fp32;             // no tensor-op (TF32) math: FMA only
    bool deterministic_only;      // reject CUDNN_NON_DETERMINISTIC algorithms
} ConvSelectRules;

// One real call of the pass with candidate c (math type and workspace set up by the
// callee); returns the status of that call (CUDNN_STATUS_SUCCESS when it worked).
typedef cudnnStatus_t (*ConvTrialFn)(void *ctx, const ConvCandidate *c);

// The math type a chosen candidate runs with under the rules (FMA when strict_fp32).
cudnnMathType_t conv_select_run_math(const ConvSelectRules *rules, cudnnMathType_t reported);
// Index of the first candidate, in order, that cuDNN reported usable, that the rules
// allow and whose trial succeeds. -1 when none does: the error names `what` and every
// candidate with the reason it was passed over (cuDNN's real status for a failed trial);
// its kind is out of memory when a candidate failed only for its workspace.
int conv_select(ConvPass pass, const ConvCandidate *cands, int count, const ConvSelectRules *rules,
                ConvTrialFn trial, void *ctx, const char *what);

// cuDNN's name of an algorithm of a pass without the common prefix ("IMPLICIT_PRECOMP_GEMM").
const char *conv_algo_name(ConvPass pass, int algo);
// "default", "tensor_op", "tensor_op_allow_conversion", "fma".
const char *conv_math_name(cudnnMathType_t math);
// "forward", "backward-data", "backward-filter".
const char *conv_pass_name(ConvPass pass);

#ifdef __cplusplus
}
#endif
#endif
