// augment.h: training-time image transforms, fused into one pass per sample:
// random-resized crop (torchvision's sampling), bilinear resize, horizontal flip,
// normalise by mean/std, and layout change (H, W, 3) uint8 -> (3, H, W) float32/fp16.
#ifndef LOADERS_AUGMENT_H
#define LOADERS_AUGMENT_H

#include "loaders/jpeg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { AUGMENT_FLOAT32, AUGMENT_FLOAT16 } AugmentDtype;

typedef struct {
    int out_height, out_width;     // output size, e.g. 224 x 224
    bool random_crop;              // false: resize the whole image (evaluation)
    double scale_min, scale_max;   // crop area fraction range, e.g. 0.08..1
    double ratio_min, ratio_max;   // crop aspect ratio range, e.g. 3/4..4/3
    bool flip;                     // horizontal flip with probability 1/2
    float mean[3], std[3];         // per-channel normalisation of values in [0, 1]
    AugmentDtype dtype;            // element type of the output
} AugmentConfig;

// A crop rectangle in source pixels, and whether it is mirrored.
typedef struct {
    int x, y, width, height;
    bool flip;
} AugmentCrop;

// The torchvision-style training defaults (ImageNet mean/std) for a square output.
AugmentConfig augment_default_config(int out_size);
// Checks a config; 0 or -1 with a message.
int augment_check_config(const AugmentConfig *cfg);
// Bytes one output sample takes: 3 * H * W * element size.
size_t augment_sample_bytes(const AugmentConfig *cfg);
// The crop and flip drawn for an image of this size from a per-sample seed.
AugmentCrop augment_choose_crop(const AugmentConfig *cfg, int width, int height, uint64_t seed);
// Applies the transform chosen by seed to src, writing (3, H, W) elements to out.
void augment_apply(const AugmentConfig *cfg, const Image *src, uint64_t seed, void *out);
// The part of a source image one sample is resampled from, in the source's pixels: a
// crop, or the crop mapped onto a region decoded at a reduced scale (then fractional).
typedef struct {
    double x, y, width, height;
} AugmentWindow;
// Resizes the window of src to the output size (bilinear, align_corners=False), mirrored
// when flip, normalised, into (3, H, W) elements at out. augment_apply is this with the
// window of the crop drawn from the seed.
void augment_resample(const AugmentConfig *cfg, const Image *src, const AugmentWindow *win,
                      bool flip, void *out);
// IEEE half-precision bits of f, rounded to nearest even.
uint16_t augment_float_to_half(float f);
// The float value of IEEE half-precision bits.
float augment_half_to_float(uint16_t h);
// n floats to half-precision bits, as augment_float_to_half rounds them (nearest even; a
// nan stays a nan, quieted, keeping its payload's top bits): with F16C where the CPU has
// it (checked at run time), else augment_floats_to_halves_scalar. Both give the same bits.
void augment_floats_to_halves(const float *in, uint16_t *out, size_t n);
void augment_floats_to_halves_scalar(const float *in, uint16_t *out, size_t n);
// Whether this CPU has F16C (and AVX), so augment_floats_to_halves uses it.
bool augment_have_f16c(void);
// Whether this CPU has AVX2, so the horizontal resize pass gathers 8 pixels at a time
// and the vertical pass blends 8 at a time (same arithmetic, same bits as the scalar passes).
bool augment_have_avx2(void);
// Tests only: false makes augment_resample take its scalar passes even where the CPU has
// AVX2 (the AVX2 passes give the same bits); true (the default) lets it use them.
void augment_set_simd(bool allowed);

#ifdef __cplusplus
}
#endif
#endif
