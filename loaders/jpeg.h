// jpeg.h: JPEG decode and encode through libjpeg-turbo's TurboJPEG API.
// Decoding is strict: a truncated or corrupt stream (a libjpeg warning included)
// is an error that names the file, so bad data never silently becomes a batch.
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

// A reusable decoder: one TurboJPEG handle plus a file buffer (one per thread/process).
typedef struct JpegDecoder JpegDecoder;

// Creates a decoder; NULL (with the error set) on failure.
JpegDecoder *jpeg_decoder_create(void);
// Frees a decoder (NULL is fine).
void jpeg_decoder_destroy(JpegDecoder *dec);
// Decodes JPEG bytes into img (RGB); `name` is used in error messages. 0 or -1.
int jpeg_decode_mem(JpegDecoder *dec, const uint8_t *data, size_t size, const char *name,
                    Image *img);
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
