// amp.h: dynamic loss scaling with the exact rules of torch.amp.GradScaler.
// The rule is one inline function usable from host C and CUDA device code, so the
// CPU backend, the GPU kernel and the tests all run the same arithmetic.
#ifndef AMP_H
#define AMP_H

#include <math.h>
#include <stdbool.h>

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
