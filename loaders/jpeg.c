// jpeg.c: TurboJPEG-based decode (strict about warnings) and encode for the generator.
#include "loaders/jpeg.h"

#include "kernels/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

// Largest image decoded, in pixels (about 512 MiB as RGB).
#define JPEG_MAX_PIXELS 178956970LL

struct JpegDecoder {
    tjhandle tj;
    uint8_t *file_buf;
    size_t file_cap;
};

JpegDecoder *jpeg_decoder_create(void)
{
    JpegDecoder *dec = calloc(1, sizeof *dec);
    if (!dec) {
        error_set(ERROR_OUT_OF_MEMORY, "jpeg: out of memory");
        return NULL;
    }
    dec->tj = tjInitDecompress();
    if (!dec->tj) {
        error_set(ERROR_LIBRARY, "jpeg: tjInitDecompress failed: %s", tjGetErrorStr2(NULL));
        free(dec);
        return NULL;
    }
    return dec;
}

void jpeg_decoder_destroy(JpegDecoder *dec)
{
    if (!dec) return;
    tjDestroy(dec->tj);
    free(dec->file_buf);
    free(dec);
}

void image_free(Image *img)
{
    free(img->pixels);
    memset(img, 0, sizeof *img);
}

int jpeg_read_file(JpegDecoder *dec, const char *path, const uint8_t **data, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error_set(ERROR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return error_set(ERROR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    size_t want = (size_t)sb.st_size;
    if (want > dec->file_cap) {
        uint8_t *p = realloc(dec->file_buf, want);
        if (!p) {
            close(fd);
            return error_set(ERROR_OUT_OF_MEMORY, "%s: out of memory reading %zu bytes", path, want);
        }
        dec->file_buf = p;
        dec->file_cap = want;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, dec->file_buf + got, want - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            return error_set(ERROR_IO, "%s: read failed: %s", path, strerror(e));
        }
        got += (size_t)n;
    }
    close(fd);
    *data = dec->file_buf;
    *size = got;
    return 0;
}

// After a failed call TurboJPEG 2.1 can leave its decompressor mid-header, so that the
// next, valid file is misread; a fresh handle is the reliable reset (errors are rare).
static int decoder_reset(JpegDecoder *dec)
{
    tjDestroy(dec->tj);
    dec->tj = tjInitDecompress();
    return dec->tj ? 0 : -1;
}

int jpeg_decode_mem(JpegDecoder *dec, const uint8_t *data, size_t size, const char *name,
                    Image *img)
{
    if (!dec->tj && decoder_reset(dec) != 0)
        return error_set(ERROR_IO, "%s: cannot create a TurboJPEG decoder: %s", name,
                            tjGetErrorStr2(NULL));
    if (size < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return error_set(ERROR_BAD_DATA, "%s: not a JPEG file (%zu bytes, no JPEG start-of-image marker)",
                            name, size);
    // TurboJPEG 2.1 returns 0 without setting the size for a stream that ends before
    // its frame header (it reads as "tables only"), hence the zeros and the check below.
    int w = 0, h = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(dec->tj, data, (unsigned long)size, &w, &h, &subsamp,
                            &colorspace) != 0) {
        error_set(ERROR_BAD_DATA, "%s: corrupt JPEG header: %s", name, tjGetErrorStr2(dec->tj));
        decoder_reset(dec);
        return -1;
    }
    if (w <= 0 || h <= 0 || w > 65535 || h > 65535) {
        if (w == 0 && h == 0)
            error_set(ERROR_BAD_DATA, "%s: truncated JPEG (no frame header in %zu bytes)", name, size);
        else
            error_set(ERROR_BAD_DATA, "%s: bad JPEG dimensions %dx%d", name, w, h);
        decoder_reset(dec);
        return -1;
    }
    // The header is only a claim: without a limit, a few hundred bytes saying 65500x65500
    // would have us allocate 12 GiB before reading any data. PIL's decompression-bomb error
    // threshold; a refined, configurable limit may replace this one.
    if ((int64_t)w * h > JPEG_MAX_PIXELS) {
        error_set(ERROR_BAD_DATA, "%s: JPEG of %dx%d pixels is over the pixel limit of %lld (a corrupt "
                     "or malicious header?)", name, w, h, (long long)JPEG_MAX_PIXELS);
        decoder_reset(dec);
        return -1;
    }
    size_t need = (size_t)w * (size_t)h * 3;
    if (need > img->capacity) {
        uint8_t *p = realloc(img->pixels, need);
        if (!p) return error_set(ERROR_OUT_OF_MEMORY, "%s: out of memory for a %dx%d image", name, w, h);
        img->pixels = p;
        img->capacity = need;
    }
    // A warning (e.g. "Premature end of JPEG file") also makes tjDecompress2 return -1;
    // we treat it as an error so truncated files are reported, never half-grey images.
    if (tjDecompress2(dec->tj, data, (unsigned long)size, img->pixels, w, 0, h, TJPF_RGB,
                      TJFLAG_FASTDCT) != 0) {
        const char *kind = tjGetErrorCode(dec->tj) == TJERR_WARNING ? "truncated or corrupt"
                                                                     : "corrupt";
        error_set(ERROR_BAD_DATA, "%s: %s JPEG data: %s", name, kind, tjGetErrorStr2(dec->tj));
        decoder_reset(dec);
        return -1;
    }
    img->width = w;
    img->height = h;
    return 0;
}

int jpeg_decode_file(JpegDecoder *dec, const char *path, Image *img)
{
    const uint8_t *data;
    size_t size;
    if (jpeg_read_file(dec, path, &data, &size) != 0) return -1;
    return jpeg_decode_mem(dec, data, size, path, img);
}

int jpeg_write_file(const char *path, const uint8_t *rgb, int width, int height, int quality)
{
    tjhandle tj = tjInitCompress();
    if (!tj) return error_set(ERROR_LIBRARY, "jpeg: tjInitCompress failed: %s", tjGetErrorStr2(NULL));
    unsigned char *out = NULL;
    unsigned long out_size = 0;
    int rc = tjCompress2(tj, rgb, width, 0, height, TJPF_RGB, &out, &out_size, TJSAMP_420,
                         quality, 0);
    if (rc != 0) {
        error_set(ERROR_LIBRARY, "%s: JPEG encode failed: %s", path, tjGetErrorStr2(tj));
        tjDestroy(tj);
        return -1;
    }
    tjDestroy(tj);
    FILE *f = fopen(path, "wb");
    if (!f) {
        int e = errno;
        tjFree(out);
        return error_set(ERROR_IO, "%s: cannot create: %s", path, strerror(e));
    }
    size_t n = fwrite(out, 1, out_size, f);
    int close_rc = fclose(f);
    tjFree(out);
    if (n != out_size || close_rc != 0) return error_set(ERROR_IO, "%s: write failed", path);
    return 0;
}
