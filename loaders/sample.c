// sample.c: read + decode + augment of one sample (see sample.h). Only what the crop
// needs is decoded: the header gives the size, the crop is drawn from the seed exactly as
// augment_apply draws it, and then only the rows and columns under the crop are decoded,
// at a reduced DCT scale when the crop is at least twice the output size.
#include "loaders/sample.h"

int sample_decode_scale(const AugmentConfig *cfg, int crop_width, int crop_height)
{
    int scale = 1;
    while (scale < 8 && crop_width >= 2 * scale * cfg->out_width &&
           crop_height >= 2 * scale * cfg->out_height)
        scale *= 2;
    return scale;
}

int sample_load(JpegDecoder *dec, const char *path, const AugmentConfig *cfg, uint64_t seed,
                Image *img, void *out)
{
    const uint8_t *data;
    size_t size;
    int width, height;
    if (jpeg_read_file(dec, path, &data, &size) != 0 ||
        jpeg_decode_header(dec, data, size, path, &width, &height) != 0)
        return -1;
    AugmentCrop crop = augment_choose_crop(cfg, width, height, seed);
    int scale = sample_decode_scale(cfg, crop.width, crop.height);
    JpegRect want = {crop.x, crop.y, crop.width, crop.height};
    JpegRegion got;
    if (jpeg_decode_region(dec, &want, scale, img, &got) != 0) return -1;
    // The crop in the decoded region's pixels (at 1/scale: fractional edges).
    AugmentWindow win = {(double)crop.x / scale - got.x, (double)crop.y / scale - got.y,
                         (double)crop.width / scale, (double)crop.height / scale};
    augment_resample(cfg, img, &win, crop.flip, out);
    return 0;
}
