// amp_micro_conv.c: the convolution micro of the amp practice (amp_conv/*, amp_conv_tf32/*):
// cuDNN forward, backward-data and backward-filter (bench/amp/amp_conv.cu) of every
// ResNet-18 convolution shape, per layout and precision, timed by CUDA events around the
// call alone, warm caches; forward rows checked against the exact result, and those stored
// in fp32 also run the strict-fp32 probe (a strict row at or above the limit fails).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/amp/amp_conv.h"
#include "bench/amp/amp_practice.h"
#include "bench/amp/amp_probe.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/error.h"
#include "kernels/model.h"

#define CONV_SAMPLES 16         // forward outputs checked against the exact result

// "c64h56k128r3s2": C x H x H input, K filters of R x R, stride S (padding R / 2, as the models').
static char conv_shapes[1024];

static int conv_shape_parse(const char *name, int n, ConvShape *s)
{
    int c, h, k, r, stride, used = 0;
    if (sscanf(name, "c%dh%dk%dr%ds%d%n", &c, &h, &k, &r, &stride, &used) != 5 || name[used] ||
        c < 1 || h < 1 || k < 1 || r < 1 || stride < 1 || c > 65536 || k > 65536 || h > 65536 || r > h + 2 * (r / 2))
        return error_set(ERROR_BAD_USAGE, "shape '%s': want cChHkKrRsS, e.g. c64h56k64r3s1", name);
    int pad = r / 2;
    int p = conv_out_size(h, r, stride, pad);
    *s = (ConvShape){n, c, h, h, k, r, stride, pad, p, p};
    return 0;
}

// The distinct convolution shapes of the resnet18 preset, in the order of the model.
static void conv_shapes_of_resnet18(void)
{
    CoreConfig cfg;
    ModelGraph *g = malloc(sizeof *g);
    size_t used = 0;
    if (g && core_config_preset(&cfg, "resnet18") == 0 && model_build(&cfg.model, g) == 0) {
        for (int i = 0; i < g->n_ops; i++) {
            if (g->ops[i].kind != OP_CONV) continue;
            ConvShape s = model_conv_shape(g, &g->ops[i], 1);
            char name[64];
            snprintf(name, sizeof name, "c%dh%dk%dr%ds%d", s.c, s.h, s.k, s.r, s.stride);
            bool seen = false;
            for (const char *p = conv_shapes; *p && !seen; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
                size_t len = strcspn(p, ",");
                seen = len == strlen(name) && strncmp(p, name, len) == 0;
            }
            int w = seen ? 0 : snprintf(conv_shapes + used, sizeof conv_shapes - used, "%s%s", used ? "," : "", name);
            if (w > 0 && (size_t)w < sizeof conv_shapes - used) used += (size_t)w;
        }
    }
    free(g);
    if (!used) snprintf(conv_shapes, sizeof conv_shapes, "c64h56k64r3s1");
}

const char *amp_bench_resnet18_conv_shapes(void)
{
    conv_shapes_of_resnet18();
    return conv_shapes;
}

void amp_bench_conv(HarnessState *st, void *user)
{
    const ConvVariant *cv = user;
    if (practice_skip_without_gpu(st)) return;
    const char *pass_name = harness_axis_str(st, "pass"), *layout_name = harness_axis_str(st, "layout");
    ConvPass pass = strcmp(pass_name, "fwd") == 0 ? CONV_PASS_FWD
                    : strcmp(pass_name, "bwd_data") == 0 ? CONV_PASS_BWD_DATA : CONV_PASS_BWD_FILTER;
    CoreLayout layout;
    CoreConfig cfg;
    core_config_preset(&cfg, "resnet18");
    int64_t batch = harness_axis_int(st, "batch");
    ConvShape s;
    if ((strcmp(pass_name, "fwd") && strcmp(pass_name, "bwd_data") && strcmp(pass_name, "bwd_filter")) ||
        core_layout_parse(layout_name, &layout) != 0) {
        harness_fail(st, "pass must be fwd, bwd_data or bwd_filter; layout nchw or nhwc");
        return;
    }
    if (batch < 0 || batch > 65536 ||
        conv_shape_parse(harness_axis_str(st, "shape"), batch > 0 ? (int)batch : cfg.batch_size, &s) != 0) {
        if (batch < 0 || batch > 65536) error_set(ERROR_BAD_USAGE, "batch %lld out of range 0..65536", (long long)batch);
        practice_fail_or_skip(st, "the shape");
        return;
    }
    if (amp_bench_skip_without_math(st, cv->precision == CORE_PRECISION_TF32, cv->precision == CORE_PRECISION_BF16)) return;
    AmpConv *c = NULL;
    double seconds = 0.0, total = 0.0;
    int64_t iterations = 0;
    double err = 0.0;
    int rc = amp_conv_create(&s, cv->precision, layout, &c);
    if (rc == 0) rc = amp_conv_time(c, pass, &seconds);  // untimed warm-up
    if (rc == 0 && pass == CONV_PASS_FWD) rc = amp_conv_check_forward(c, CONV_SAMPLES, &err);
    // The strict-fp32 probe on the forward rows stored in fp32 (strict, PyTorch's fp32, TF32):
    // a strict row must stay below what TF32 rounding gives (amp_conv_tf32's two rows show both).
    bool probed = pass == CONV_PASS_FWD && cv->precision != CORE_PRECISION_FP16 && cv->precision != CORE_PRECISION_BF16;
    double probe_err = 0.0;
    if (rc == 0 && probed) rc = amp_conv_probe_forward(c, CONV_SAMPLES, &probe_err);
    while (rc == 0 && harness_keep_running(st)) {
        rc = amp_conv_time(c, pass, &seconds);
        harness_set_iteration_time(st, seconds);
        total += seconds;
        iterations++;
    }
    if (rc != 0) {
        practice_fail_or_skip(st, "the convolution");
    } else {
        char algo[128], label[640], checked[160];
        amp_conv_algo(c, pass, algo, sizeof algo);
        double tol = amp_conv_tolerance(cv->precision);
        bool strict_like_tf32 = probed && cv->precision == CORE_PRECISION_FP32_STRICT &&
                                !(probe_err < AMP_PROBE_STRICT_LIMIT);
        bool wrong = (pass == CONV_PASS_FWD && !(err <= tol)) || strict_like_tf32;
        harness_counter(st, "tflops", total > 0 ? amp_conv_flops(&s) * iterations / total / 1e12 : 0.0,
                        HARNESS_COUNTER_PLAIN);
        if (pass == CONV_PASS_FWD) {
            harness_counter(st, "max_rel_err", err, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "tolerance", tol, HARNESS_COUNTER_PLAIN);
            harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
            if (probed) harness_counter(st, "probe_err", probe_err, HARNESS_COUNTER_PLAIN);
            snprintf(checked, sizeof checked, "%d sampled outputs checked against the exact result (tolerance %g "
                     "of sum |x w|)", CONV_SAMPLES, tol);
        } else {
            snprintf(checked, sizeof checked, "not checked here (tests/test_layers_gpu.c checks every pass "
                     "against the CPU reference)");
        }
        snprintf(label, sizeof label, "cuDNN %s %s, %s, (%d, %d, %d, %d) > %d k%d s%d: %s (the core's plan: "
                 "heuristics, first candidate that runs); CUDA events around the call alone; warm caches "
                 "(the same operands every iteration); %s", conv_pass_name(pass), core_precision_name(cv->precision),
                 layout_name, s.n, s.c, s.h, s.w, s.k, s.r, s.stride, algo, checked);
        harness_set_label(st, label);
        if (strict_like_tf32) {
            char msg[200];
            snprintf(msg, sizeof msg, "strict fp32 convolution rounded like TF32: probe error %.3g, not "
                     "below %g", probe_err, AMP_PROBE_STRICT_LIMIT);
            harness_fail(st, msg);
        } else if (wrong) {
            char msg[200];
            snprintf(msg, sizeof msg, "convolution result off: relative error %.3g > tolerance %g", err, tol);
            harness_fail(st, msg);
        }
    }
    amp_conv_free(c);
}
