// core_effect.c: whether a core runs what its config asks for. A practice toggles one config
// field (layout, precision, algorithm policy); a backend that silently ignored it would run
// the baseline's work under the tuned variant's name, pass every numerical check with a
// difference of 0 and report ~1.0x. The core reports what it ran (CoreStats' *_in_effect,
// activation_type, tf32_allowed, conv_shapes_tuned); these compare the two.
#include <stdio.h>

#include "kernels/check.h"
#include "kernels/core.h"

// The activation type a precision stores on CUDA.
static CoreDType precision_dtype(CorePrecision p)
{
    return p == CORE_PRECISION_FP16 ? CORE_DTYPE_FP16 : p == CORE_PRECISION_BF16 ? CORE_DTYPE_BF16 : CORE_DTYPE_FP32;
}

int core_config_in_effect(const CoreConfig *cfg, const CoreStats *st, char *why, size_t size)
{
    if (st->backend != CORE_BACKEND_CUDA) return 0;  // the CPU backends run fp32 NCHW by design
    const bool resnet = cfg->model.kind == CORE_MODEL_RESNET;
    CoreLayout layout = resnet ? cfg->layout : CORE_LAYOUT_NCHW;  // an MLP has no layout
    if (st->layout_in_effect != layout) {
        snprintf(why, size, "layout %s asked, %s ran", core_layout_name(layout),
                 core_layout_name(st->layout_in_effect));
        return 1;
    }
    CoreDType dtype = precision_dtype(cfg->precision);
    if (st->activation_type != dtype) {
        snprintf(why, size, "precision %s asked (%s activations), %s activations ran",
                 core_precision_name(cfg->precision), core_dtype_name(dtype),
                 core_dtype_name(st->activation_type));
        return 1;
    }
    if (cfg->precision == CORE_PRECISION_FP32_STRICT && st->tf32_allowed) {
        snprintf(why, size, "precision fp32_strict asked, but some convolution or GEMM allowed TF32");
        return 1;
    }
    if (cfg->precision == CORE_PRECISION_TF32 && !st->tf32_allowed) {
        snprintf(why, size, "precision tf32 asked, but no convolution or GEMM allowed TF32");
        return 1;
    }
    int want = cfg->conv_algo == CORE_CONV_ALGO_AUTOTUNE ? st->conv_shapes : 0;
    if (st->conv_shapes_tuned != want) {
        snprintf(why, size, "conv_algo %s asked, %d of %d convolutions' algorithms were timed",
                 core_conv_algo_name(cfg->conv_algo), st->conv_shapes_tuned, st->conv_shapes);
        return 1;
    }
    return 0;
}

int core_assert_in_effect(Core *core, const CoreConfig *cfg)
{
    CoreStats st;
    TRY(core_stats(core, &st));
    char why[256];
    if (core_config_in_effect(cfg, &st, why, sizeof why) == 0) return 0;
    return error_set(ERROR_LIBRARY, "the practice was not in effect: %s", why);
}
