// amp_scaler.h: the GradScaler pieces bench_amp varies or times, on the CPU (host memory,
// stream NULL) or on the GPU (device memory, on the given CUDA stream):
// the global gradient L2 norm that clip_grad_norm_ compares with max_norm, scaling the
// gradients by clip_grad_norm_'s coefficient, and the cost of one GradScaler pass
// (unscale + inf/nan check over the gradients, then the scale update) with the core's
// own code for it (kernels/amp.h on the CPU, kernels/optim_cuda.cuh on the GPU).
#ifndef AMP_SCALER_H
#define AMP_SCALER_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// *norm = sqrt(sum g^2) over n gradients; with a stream, reads it back (synchronises
// that stream). 0 or -1 with the error set.
int amp_grad_norm(const float *g, size_t n, void *stream, double *norm);
// g *= coef over n gradients (queued on the stream on the GPU). 0 or -1.
int amp_grad_scale(float *g, size_t n, float coef, void *stream);
// Seconds of one GradScaler pass over n fp32 gradients (median of reps passes over the
// same buffer, so caches are warm): on the CPU amp_unscale_check + amp_scaler_update
// (wall clock), on the GPU cuda_unscale_check + cuda_scaler_update (CUDA events).
// 0 or -1 with the error set (ERROR_OUT_OF_MEMORY when the buffer does not fit).
int amp_scaler_pass_seconds(size_t n, bool gpu, int reps, double *seconds);

#ifdef __cplusplus
}
#endif
#endif
