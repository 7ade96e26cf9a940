// jpeg.h: JPEG decode through libjpeg-turbo's libjpeg API, and encode through TurboJPEG.
// Decoding is strict: a truncated or corrupt stream (a libjpeg warning included)
// is an error that names the file, so bad data never silently becomes a batch.
// Greyscale, YCbCr, RGB, CMYK and YCCK files (Adobe-inverted CMYK too) all come out RGB.
// A file can be decoded whole, or header first and then only a region, optionally at
// 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling), for a sample that needs only a crop.
#ifndef LOADERS_JPEG_H
#define LOADERS_JPEG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// An 8-bit RGB image, interleaved (H, W, 3); buffers grow and are reused.
typedef struct {
    uint8_t *pixels;
    int width;
    int height;
    size_t capacity; // bytes allocated in pixels
} Image;

// A reusable decoder: one libjpeg decompressor plus a file buffer (one per thread/process).
typedef struct JpegDecoder JpegDecoder;

// Creates a decoder; NULL (with the error set) on failure.
JpegDecoder *jpeg_decoder_create(void);
// The largest image (width x height) this decoder will decode; a file whose header claims
// more is rejected before anything is allocated. 0: the default, JPEG_DEFAULT_MAX_PIXELS.
#define JPEG_DEFAULT_MAX_PIXELS 178956970LL // PIL's Image.MAX_IMAGE_PIXELS
void jpeg_decoder_set_max_pixels(JpegDecoder *dec, int64_t max_pixels);
// Frees a decoder (NULL is fine).
void jpeg_decoder_destroy(JpegDecoder *dec);
// Decodes JPEG bytes into img (RGB); `name` is used in error messages. 0 or -1.
int jpeg_decode_mem(JpegDecoder *dec, const uint8_t *data, size_t size, const char *name,
                    Image *img);
// Decoding part of an image, in two steps: jpeg_decode_header reads the header (the
// dimensions, checked against the pixel limit before anything sized by them is
// allocated); then jpeg_decode_region decodes the pixels covering `want`. The data (and
// name) passed to jpeg_decode_header must stay valid until jpeg_decode_region returns.
typedef struct {
    int x, y, width, height;
} JpegRect;
// Where a decoded region lies: its top-left pixel in the (scaled) image, and the size of
// the whole scaled image (width, height: ceil(full / scale)).
typedef struct {
    int x, y, width, height;
} JpegRegion;
// Reads the header of JPEG bytes; sets the full image's size. 0 or -1 (naming `name`).
int jpeg_decode_header(JpegDecoder *dec, const uint8_t *data, size_t size, const char *name,
                       int *width, int *height);
// After jpeg_decode_header: decodes at 1/scale (1, 2, 4 or 8) a region of the image that
// covers `want` (full-size pixels; NULL: the whole image) with a few pixels to spare,
// into img (RGB, img->width x img->height pixels); *got (may be NULL) says where the
// region lies. The rest of the stream is still read and checked, as in a full decode,
// so a file is accepted or rejected whatever its region. 0 or -1.
int jpeg_decode_region(JpegDecoder *dec, const JpegRect *want, int scale, Image *img,
                       JpegRegion *got);
// Reads the file at path and decodes it into img; errors name the file. 0 or -1.
int jpeg_decode_file(JpegDecoder *dec, const char *path, Image *img);
// Reads the whole file at path into the decoder's buffer; sets *data/*size. 0 or -1.
int jpeg_read_file(JpegDecoder *dec, const char *path, const uint8_t **data, size_t *size);
// Frees an image's pixels.
void image_free(Image *img);

// Encodes RGB pixels (H, W, 3) as a baseline 4:2:0 JPEG file at path. 0 or -1.
int jpeg_write_file(const char *path, const uint8_t *rgb, int width, int height, int quality);

#ifdef __cplusplus
}
#endif
#endif
