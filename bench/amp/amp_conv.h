// amp_conv.h: one convolution shape's three passes (forward, backward-data,
// backward-filter) with the core's own cuDNN plans (kernels/conv_cudnn.cuh: cuDNN's
// heuristics, each candidate tried in order, as the core and PyTorch choose), in one
// precision and layout, on device operands filled once; each pass timed alone by CUDA
// events. Nothing here is new cuDNN plumbing: only buffers, a stream and the clock.
#ifndef AMP_CONV_H
#define AMP_CONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/conv_select.h"
#include "kernels/core.h"
#include "kernels/layers_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AmpConv AmpConv;

// Plans convolution s (batch s->n) in precision p and layout l on the current device and
// fills its operands. 0 or -1 with the error set (ERROR_OUT_OF_MEMORY when it does not fit).
int amp_conv_create(const ConvShape *s, CorePrecision p, CoreLayout l, AmpConv **out);
// Runs one pass once, timed by CUDA events around it alone: *seconds.
int amp_conv_time(AmpConv *c, ConvPass pass, double *seconds);
// Checks `samples` entries of the forward output (the last forward's) against the exact
// result: the operands are multiples of 1/64 (bench/amp/amp_fill.cuh), so the host sums each
// entry in integers, following the layout. *max_err is the largest |y - exact| / sum |x w|.
int amp_conv_check_forward(AmpConv *c, int samples, double *max_err);
// The strict-fp32 probe (bench/amp/amp_probe.h) on this convolution (fp32 storage only: strict
// fp32, PyTorch's fp32 and TF32): the input and filter refilled with probe operands, one
// forward, `samples` outputs against the exact result in double (*max_err relative to
// sum |x w|), then the usual operands back. Strict fp32 stays below AMP_PROBE_STRICT_LIMIT;
// TF32 math lands above it. 0 or -1 with the error set (bad usage for fp16/bf16 storage).
int amp_conv_probe_forward(AmpConv *c, int samples, double *max_err);
// Host side of that check (also for tests): the value of input element (n, c, h, w) and
// filter element (k, c, r, t) as amp_conv fills them in layout nhwc, and the exact forward
// output (n, k, p, q) and sum |x w| over its terms, both in units of 1/4096.
double amp_conv_input_value(const ConvShape *s, bool nhwc, int n, int c, int h, int w);
double amp_conv_filter_value(const ConvShape *s, bool nhwc, int k, int c, int r, int t);
void amp_conv_exact(const ConvShape *s, bool nhwc, int n, int k, int p, int q, int64_t *exact,
                    int64_t *magnitude);
// What amp_conv_check_forward accepts for a precision (relative to sum |x w|): 5e-3 for
// fp32 and tf32 (Winograd and FFT algorithms round their transforms, in TF32 where it is
// allowed), 1e-2 for fp16, 3e-2 for bf16: a wrong convolution is off by O(1), far beyond.
double amp_conv_tolerance(CorePrecision p);
// "ALGO/MATH" of the pass's chosen algorithm (for labels).
void amp_conv_algo(const AmpConv *c, ConvPass pass, char *buf, size_t size);
// 2 x N x K x P x Q x C x R x R: the multiply-adds of each pass, counted as 2 FLOPs.
double amp_conv_flops(const ConvShape *s);
void amp_conv_free(AmpConv *c);

#ifdef __cplusplus
}
#endif
#endif
