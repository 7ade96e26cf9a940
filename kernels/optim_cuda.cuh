// optim_cuda.cuh: the optimizer side on the GPU, all without host synchronisation:
// GradScaler's unscale + inf/nan check, the global gradient norm for clipping, SGD or AdamW
// that read the found-inf flag and the clip coefficient from device memory, and the
// scaler update (the same amp_scaler_rule as the CPU).
#ifndef OPTIM_CUDA_CUH
#define OPTIM_CUDA_CUH

#include <stddef.h>

#include "kernels/adamw.h"
#include "kernels/amp.h"
#include "kernels/core.h"
#include "kernels/cuda_common.cuh"

// Device-resident scalars of one core (one allocation, copied back in one transfer).
typedef struct DevScalars {
    double sumsq;        // squared global gradient norm (clipping)
    float scale;         // GradScaler scale
    int growth_tracker;
    int found_inf;       // set by the unscale check, cleared by the scaler update
    int skipped;         // steps skipped for inf/nan
    float loss_sum;      // mean losses summed over the current read-back window
    int train_correct;   // correct training predictions over the same window
    float eval_loss;     // core_eval's loss
    int eval_correct;
    int probe_inf;       // found-inf flag for core_loss_grad (never skips anything)
    float lr;            // the step's learning rate where SGD reads it from the device (a
                         // captured CUDA graph step: written before each replay)
    int adamw_t;         // AdamW updates applied (a skipped step is none): on the device,
                         // as only the device knows found_inf without a synchronisation
    AdamwCoeffs adamw;   // this update's AdamW scalars (adamw_coeffs at adamw_t)
} DevScalars;

// g *= 1 / *scale; *found_inf = 1 if any result is inf or nan.
int cuda_unscale_check(float *g, size_t n, const float *scale, int *found_inf, cudaStream_t s);
// *sumsq = sum of g^2 (zeroes *sumsq first).
int cuda_sumsq(const float *g, size_t n, double *sumsq, cudaStream_t s);
// SGD with momentum and weight decay. Skipped entirely when found_inf && *found_inf.
// With sumsq != NULL, gradients are first multiplied by min(1, clip / (norm + 1e-6)).
// The learning rate is lr, or *lr_dev when lr_dev != NULL: read on the device when the
// kernel runs, so that a captured CUDA graph replays with each step's own rate.
int cuda_sgd(float *w, const float *g, float *mom, size_t n, float lr, const float *lr_dev,
             float momentum, float weight_decay, const double *sumsq, float clip,
             const int *found_inf, cudaStream_t s);
// AdamW (kernels/adamw.h) with exp_avg m and exp_avg_sq v, skipped, clipped and at lr or
// *lr_dev as cuda_sgd. A one-thread kernel first advances d->adamw_t and computes
// d->adamw from it (unless skipped), so t counts the updates applied, graphs included.
int cuda_adamw(float *w, const float *g, float *m, float *v, size_t n, float lr,
               const float *lr_dev, const CoreOptimConfig *o, const double *sumsq,
               const int *found_inf, DevScalars *d, cudaStream_t s);
// GradScaler.update on the device; also counts skipped steps and clears found_inf.
int cuda_scaler_update(DevScalars *d, AmpScalerConfig cfg, cudaStream_t s);
// *p = v, ordered on s (v travels as a kernel argument, so the caller's copy of it can
// change at once): the fault injection's inf/nan, a graph step's learning rate.
int cuda_set_value(float *p, float v, cudaStream_t s);

#endif
