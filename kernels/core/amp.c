// amp.c: host-side GradScaler state machine (the CPU backend and tests use it;
// the CUDA backend runs the same amp_scaler_rule in a one-thread kernel).
#include "kernels/amp.h"

AmpScalerConfig amp_scaler_config_default(void)
{
    AmpScalerConfig c = {.init_scale = 65536.0f, .growth_factor = 2.0f,
                         .backoff_factor = 0.5f, .growth_interval = 2000};
    return c;
}

void amp_scaler_init(AmpScaler *s, const AmpScalerConfig *cfg)
{
    s->scale = cfg->init_scale;
    s->growth_tracker = 0;
}

bool amp_scaler_update(AmpScaler *s, const AmpScalerConfig *cfg, bool found_inf)
{
    amp_scaler_rule(&s->scale, &s->growth_tracker, found_inf, cfg->growth_factor,
                    cfg->backoff_factor, cfg->growth_interval);
    return found_inf;
}

bool amp_unscale_check(float *g, size_t n, float scale)
{
    const float inv = amp_inv_scale(scale);
    bool found_inf = false;
    for (size_t i = 0; i < n; i++) g[i] = amp_unscale_value(g[i], inv, &found_inf);
    return found_inf;
}

float amp_clip_coef(double norm, float max_norm)
{
    double coef = max_norm / (norm + 1e-6);
    return coef > 1.0 ? 1.0f : (float)coef;
}
