// sample.h: one training sample from one file: read, decode and augment into the
// batch's (3, H, W) slot. The loader's workers (and its 0-worker path) call this and
// nothing else of the decoder, so how a file is decoded (whole, cropped, scaled) is
// decided here: only the region under the crop, DCT-scaled when the crop is large.
#ifndef LOADERS_SAMPLE_H
#define LOADERS_SAMPLE_H

#include "loaders/augment.h"
#include "loaders/jpeg.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Loads the file at path into out (augment_sample_bytes(cfg) bytes) with the crop and
// flip drawn from seed; img is scratch space reused between calls. 0, or -1 with the
// error set (naming the file).
int sample_load(JpegDecoder *dec, const char *path, const AugmentConfig *cfg, uint64_t seed,
                Image *img, void *out);
// The DCT scale denominator (1, 2, 4 or 8) sample_load decodes a crop of this size at:
// the largest power-of-two reduction that keeps the crop at least the output size.
int sample_decode_scale(const AugmentConfig *cfg, int crop_width, int crop_height);

#ifdef __cplusplus
}
#endif
#endif
