// amp.h: dynamic loss scaling with the exact rules of torch.amp.GradScaler.
// The rule is one inline function usable from host C and CUDA device code, so the
// CPU backend, the GPU kernel and the tests all run the same arithmetic.
#ifndef AMP_H
#define AMP_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __CUDACC__
#define AMP_HD __host__ __device__
#else
#define AMP_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

// GradScaler's constructor arguments (defaults: 65536, 2, 0.5, 2000).
typedef struct AmpScalerConfig {
    float init_scale;
    float growth_factor;
    float backoff_factor;
    int growth_interval;
} AmpScalerConfig;

// The scaler's state: what GradScaler keeps in _scale and _growth_tracker.
typedef struct AmpScaler {
    float scale;
    int growth_tracker;
} AmpScaler;

// PyTorch's defaults.
AmpScalerConfig amp_scaler_config_default(void);
// Starts a scaler at init_scale with a zero growth tracker.
void amp_scaler_init(AmpScaler *s, const AmpScalerConfig *cfg);
// One GradScaler.update(): returns true when the step was skipped (found_inf).
bool amp_scaler_update(AmpScaler *s, const AmpScalerConfig *cfg, bool found_inf);
// clip_grad_norm_'s coefficient, on the host: min(1, max_norm / (norm + 1e-6)), in double (a
// norm of still-scaled gradients may exceed FLT_MAX); NaN stays NaN.
float amp_clip_coef(double norm, float max_norm);

// GradScaler.unscale_'s inverse scale: self._scale.double().reciprocal().float().
static inline AMP_HD float amp_inv_scale(float scale) { return (float)(1.0 / (double)scale); }

// One gradient through torch._amp_foreach_non_finite_check_and_unscale_: the *scaled*
// value is checked for inf/nan first (so a finite scaled value that overflows when
// unscaled is not flagged, as in PyTorch), then multiplied by inv_scale unless it is 1.
static inline AMP_HD float amp_unscale_value(float v, float inv_scale, bool *found_inf)
{
    if (!isfinite(v)) *found_inf = true;
    return inv_scale == 1.0f ? v : v * inv_scale;
}

// Unscales g[0..n) in place by 1/scale (amp_unscale_value); true when any was inf/nan.
bool amp_unscale_check(float *g, size_t n, float scale);

// The rule itself (torch._amp_update_scale_): on inf/nan scale *= backoff and the
// tracker resets; else the tracker counts up and at growth_interval the scale grows
// (only if the grown scale is finite) and the tracker resets.
static inline AMP_HD void amp_scaler_rule(float *scale, int *tracker, bool found_inf,
                                          float growth_factor, float backoff_factor,
                                          int growth_interval)
{
    if (found_inf) {
        *scale = *scale * backoff_factor;
        *tracker = 0;
    } else {
        int successful = *tracker + 1;
        if (successful == growth_interval) {
            float grown = *scale * growth_factor;
            if (isfinite(grown)) *scale = grown;
            *tracker = 0;
        } else {
            *tracker = successful;
        }
    }
}

#ifdef __cplusplus
}
#endif
#endif
