// cudnn_regret.h: the heuristic regret of cuDNN's convolution algorithm choice. For one
// convolution shape and pass, every algorithm cuDNN offers is timed with CUDA events and
// set against the one its heuristics pick (cudnnGetConvolution*Algorithm_v7, walked as the
// core walks it: conv_select.h) and the one its Find picks (cudnnFindConvolution*Algorithm,
// what cudnn.benchmark = True and the core's autotune policy use). fp32 data in NCHW with
// cuDNN's default math (TF32 allowed: PyTorch's fp32 default) or FMA only (strict fp32).
#ifndef CUDNN_REGRET_H
#define CUDNN_REGRET_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/conv_select.h"
#include "kernels/core.h"
#include "kernels/layers_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REGRET_MAX_ALGOS 16

typedef struct RegretAlgo {
    int algo;              // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t of the pass
    cudnnMathType_t math;  // the math type it ran with
    size_t workspace;      // bytes
    double ms;             // mean time of one call
} RegretAlgo;

typedef struct RegretResult {
    int offered;                         // entries cuDNN's heuristics listed
    int count;                           // algorithms that ran and were timed
    RegretAlgo algos[REGRET_MAX_ALGOS];
    int heuristic, find, fastest;        // indexes into algos
    double find_search_ms;               // wall time of the Find call (its own timing runs)
    // The engine-configuration search (cuDNN's backend/graph API, what PyTorch's
    // cudnn.benchmark searches): every engine configuration the backend heuristics offer
    // (modes A and FALLBACK) that finalizes into a plan within the workspace limit, timed;
    // as PyTorch's filter, never an engine that down-converts fp32 inputs, and no tensor-core
    // (TF32) engine for strict fp32. A configuration that does not finalize or run is skipped.
    int engine_offered;                  // configurations the two heuristic modes listed
    int engine_timed;                    // of which ran and were timed (at most engine_limit plans)
    double engine_ms;                    // the fastest one's mean time of one call
    long long engine_index;              // its engine's global index (-1: unknown)
    double engine_search_ms;             // wall time of the whole search (plans + timing)
    char engine_error[256];              // why the search found nothing ("" when it did)
} RegretResult;

// Times every usable algorithm of `pass` for shape s (reps calls each, after one untimed
// call) on the current device; with `engines`, also searches the backend API's engine
// configurations the same way, timing the first engine_limit that make plans (PyTorch's
// torch.backends.cudnn.benchmark_limit, 10 by default; 0: every one); a failure there is
// recorded in engine_error, not returned. precision: CORE_PRECISION_FP32 or _FP32_STRICT
// (else ERROR_BAD_USAGE). 0, or -1 with the error set (out of memory and no device are the
// machine's; an algorithm that fails is left out, not an error).
int regret_measure(const ConvShape *s, ConvPass pass, CorePrecision precision,
                   size_t workspace_limit, int reps, bool engines, int engine_limit,
                   RegretResult *out);

#ifdef __cplusplus
}
#endif
#endif
