// adamw.h: torch.optim.AdamW's per-update scalars (foreach=False, amsgrad=False,
// maximize=False), one inline function for host C and CUDA device code, so that the CPU
// backends, the GPU kernel and the tests compute them alike: in double, as PyTorch's Python
// floats, then rounded to float. The per-element update each backend runs with them:
//   p *= decay; m = lerp(m, g, 1 - beta1) (= beta1 m + (1 - beta1) g);
//   v = beta2 v + (1 - beta2) g^2; p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
// (bench/fused_optimizer/optim_update.c runs the same arithmetic for its own practice).
#ifndef ADAMW_H
#define ADAMW_H

#include <math.h>

#include "kernels/amp.h"  // AMP_HD

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AdamwCoeffs {
    float decay;      // 1 - lr * weight_decay: param.mul_ (decoupled weight decay)
    float beta1, beta2, eps;
    float step_size;  // lr / (1 - beta1^t)
    float bc2_sqrt;   // sqrt(1 - beta2^t)
} AdamwCoeffs;

// The scalars of update t (t >= 1 counts the updates applied, this one included).
static inline AMP_HD AdamwCoeffs adamw_coeffs(float lr, float weight_decay, float beta1,
                                              float beta2, float eps, int t)
{
    AdamwCoeffs k;
    k.decay = (float)(1.0 - (double)lr * (double)weight_decay);
    k.beta1 = beta1;
    k.beta2 = beta2;
    k.eps = eps;
    k.step_size = (float)((double)lr / (1.0 - pow((double)beta1, (double)t)));
    k.bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, (double)t));
    return k;
}

#ifdef __cplusplus
}
#endif
#endif
