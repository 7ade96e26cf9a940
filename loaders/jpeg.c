// jpeg.c: libjpeg-API decode (strict about warnings; whole image, or only a region,
// optionally DCT-scaled) and TurboJPEG encode for the generator.
#include "loaders/jpeg.h"

#include "kernels/error.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>
// jpeglib.h needs stdio.h's FILE and size_t first.
#include <jpeglib.h>
#include <jerror.h>

// Extra pixels decoded around a region on each side (scaled pixels): fancy upsampling
// treats the edge of a decoded region as an image edge, so the region is widened and the
// pixels next to its edges are never used.
#define REGION_MARGIN 4

// libjpeg's error manager with a way back: error_exit longjmps instead of exiting, and a
// warning (truncated or corrupt data that libjpeg would paper over) is an error too.
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    bool warning;
    char message[JMSG_LENGTH_MAX];
} StrictError;

struct JpegDecoder {
    struct jpeg_decompress_struct cinfo;
    StrictError err;
    uint8_t *file_buf;
    size_t file_cap;
    int64_t max_pixels;
    const char *name;   // the file being decoded, for messages
    bool header_read;   // jpeg_decode_header succeeded; a region may be decoded
    bool cmyk;          // 4-channel source decoded as CMYK, converted to RGB here
    uint8_t *row;       // one CMYK row, or a row to throw away
    size_t row_cap;
};

static void strict_error_exit(j_common_ptr c)
{
    StrictError *e = (StrictError *)c->err;
    (*c->err->format_message)(c, e->message);
    e->warning = false;
    longjmp(e->jump, 1);
}

static void strict_emit_message(j_common_ptr c, int level)
{
    if (level >= 0) return; // trace messages
    StrictError *e = (StrictError *)c->err;
    (*c->err->format_message)(c, e->message);
    e->warning = true;
    longjmp(e->jump, 1);
}

static void quiet_output_message(j_common_ptr c) { (void)c; }

static int create_decompress(JpegDecoder *dec)
{
    if (setjmp(dec->err.jump)) return -1;
    jpeg_create_decompress(&dec->cinfo);
    return 0;
}

JpegDecoder *jpeg_decoder_create(void)
{
    JpegDecoder *dec = calloc(1, sizeof *dec);
    if (!dec) {
        error_set(ERROR_OUT_OF_MEMORY, "jpeg: out of memory");
        return NULL;
    }
    dec->cinfo.err = jpeg_std_error(&dec->err.pub);
    dec->err.pub.error_exit = strict_error_exit;
    dec->err.pub.emit_message = strict_emit_message;
    dec->err.pub.output_message = quiet_output_message;
    if (create_decompress(dec) != 0) {
        error_set(ERROR_LIBRARY, "jpeg: cannot create a decoder: %s", dec->err.message);
        free(dec);
        return NULL;
    }
    dec->max_pixels = JPEG_DEFAULT_MAX_PIXELS;
    return dec;
}

void jpeg_decoder_set_max_pixels(JpegDecoder *dec, int64_t max_pixels)
{
    dec->max_pixels = max_pixels > 0 ? max_pixels : JPEG_DEFAULT_MAX_PIXELS;
}

void jpeg_decoder_destroy(JpegDecoder *dec)
{
    if (!dec) return;
    jpeg_destroy_decompress(&dec->cinfo);
    free(dec->file_buf);
    free(dec->row);
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

// Reports the libjpeg error or warning that brought us back through longjmp, and leaves
// the decompressor ready for the next file.
static int decode_failed(JpegDecoder *dec, bool in_header)
{
    const char *what = dec->err.warning ? "truncated or corrupt JPEG data"
                       : in_header      ? "corrupt JPEG header"
                                        : "corrupt JPEG data";
    ErrorKind kind = ERROR_BAD_DATA;
    if (dec->err.pub.msg_code == JERR_OUT_OF_MEMORY) kind = ERROR_OUT_OF_MEMORY;
    error_set(kind, "%s: %s: %s", dec->name, what, dec->err.message);
    jpeg_abort_decompress(&dec->cinfo);
    dec->header_read = false;
    return -1;
}

int jpeg_decode_header(JpegDecoder *dec, const uint8_t *data, size_t size, const char *name,
                       int *width, int *height)
{
    struct jpeg_decompress_struct *ci = &dec->cinfo;
    dec->name = name;
    dec->header_read = false;
    jpeg_abort_decompress(ci); // whatever state the last file left
    if (size < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return error_set(ERROR_BAD_DATA, "%s: not a JPEG file (%zu bytes, no JPEG start-of-image marker)",
                            name, size);
    if (setjmp(dec->err.jump)) return decode_failed(dec, true);
    jpeg_mem_src(ci, data, (unsigned long)size);
    jpeg_read_header(ci, TRUE); // libjpeg rejects 0 and over-65500 sides itself
    int w = (int)ci->image_width, h = (int)ci->image_height;
    // The header is only a claim: without a limit, a few hundred bytes saying 65500x65500
    // would have us allocate 12 GiB before reading any data (PIL's decompression-bomb
    // threshold by default). Nothing proportional to the image is allocated before this.
    if ((int64_t)w * h > dec->max_pixels) {
        error_set(ERROR_BAD_DATA, "%s: JPEG of %dx%d pixels is over the pixel limit of %lld (a corrupt "
                     "or malicious header?)", name, w, h, (long long)dec->max_pixels);
        jpeg_abort_decompress(ci);
        return -1;
    }
    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE:
    case JCS_YCbCr:
    case JCS_RGB:
        ci->out_color_space = JCS_RGB;
        dec->cmyk = false;
        break;
    case JCS_CMYK:
    case JCS_YCCK: // libjpeg turns YCCK into CMYK; CMYK into RGB is ours
        ci->out_color_space = JCS_CMYK;
        dec->cmyk = true;
        break;
    default:
        error_set(ERROR_BAD_DATA, "%s: JPEG colour space %d with %d components is not supported",
                     name, (int)ci->jpeg_color_space, ci->num_components);
        jpeg_abort_decompress(ci);
        return -1;
    }
    ci->dct_method = JDCT_IFAST; // what TurboJPEG's TJFLAG_FASTDCT chose before
    ci->do_fancy_upsampling = TRUE;
    dec->header_read = true;
    *width = w;
    *height = h;
    return 0;
}

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    uint8_t *p = realloc(*buf, need);
    if (!p) return -1;
    *buf = p;
    *cap = need;
    return 0;
}

// CMYK (as stored) to RGB. Adobe applications write CMYK inverted (0 = full ink) and mark
// the file with an Adobe APP14 segment; PIL reads such files as inverted too.
static void cmyk_to_rgb(const uint8_t *cmyk, int n, bool inverted, uint8_t *rgb)
{
    for (int i = 0; i < n; i++, cmyk += 4, rgb += 3) {
        unsigned k = inverted ? cmyk[3] : 255u - cmyk[3];
        for (int c = 0; c < 3; c++) {
            unsigned v = inverted ? cmyk[c] : 255u - cmyk[c];
            rgb[c] = (uint8_t)((v * k + 127) / 255);
        }
    }
}

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

int jpeg_decode_region(JpegDecoder *dec, const JpegRect *want, int scale, Image *img,
                       JpegRegion *got)
{
    struct jpeg_decompress_struct *ci = &dec->cinfo;
    if (!dec->header_read)
        return error_set(ERROR_BAD_USAGE, "jpeg: jpeg_decode_region without a header read");
    if (scale != 1 && scale != 2 && scale != 4 && scale != 8)
        return error_set(ERROR_BAD_USAGE, "jpeg: scale 1/%d is not 1, 1/2, 1/4 or 1/8", scale);
    dec->header_read = false;
    if (setjmp(dec->err.jump)) return decode_failed(dec, false);
    ci->scale_num = 1;
    ci->scale_denom = (unsigned)scale;
    jpeg_start_decompress(ci);
    int sw = (int)ci->output_width, sh = (int)ci->output_height;
    // The wanted rectangle in scaled pixels, widened by the margin, inside the image.
    int x0 = 0, x1 = sw, y0 = 0, y1 = sh;
    if (want) {
        x0 = clamp_int(want->x / scale - REGION_MARGIN, 0, sw - 1);
        x1 = clamp_int((want->x + want->width + scale - 1) / scale + REGION_MARGIN, x0 + 1, sw);
        y0 = clamp_int(want->y / scale - REGION_MARGIN, 0, sh - 1);
        y1 = clamp_int((want->y + want->height + scale - 1) / scale + REGION_MARGIN, y0 + 1, sh);
    }
    if (x0 > 0 || x1 < sw) {
        JDIMENSION xoff = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
        jpeg_crop_scanline(ci, &xoff, &cw); // may start further left (iMCU boundary) and be wider
        x0 = (int)xoff;
        x1 = x0 + (int)cw;
    }
    int rw = (int)ci->output_width; // the cropped width
    size_t need = (size_t)rw * (size_t)(y1 - y0) * 3;
    size_t row_need = (size_t)rw * (size_t)ci->output_components;
    if (grow(&img->pixels, &img->capacity, need) != 0 || grow(&dec->row, &dec->row_cap, row_need) != 0) {
        error_set(ERROR_OUT_OF_MEMORY, "%s: out of memory for a %dx%d region", dec->name, rw, y1 - y0);
        jpeg_abort_decompress(ci);
        return -1;
    }
    if (y0 > 0) jpeg_skip_scanlines(ci, (JDIMENSION)y0);
    while ((int)ci->output_scanline < y1) {
        uint8_t *dst = img->pixels + (size_t)((int)ci->output_scanline - y0) * rw * 3;
        JSAMPROW row = dec->cmyk ? dec->row : dst;
        if (jpeg_read_scanlines(ci, &row, 1) != 1) break; // (a suspending source only)
        if (dec->cmyk) cmyk_to_rgb(dec->row, rw, ci->saw_Adobe_marker, dst);
    }
    // The rest of the stream is still entropy-decoded (skipping the last line would stop
    // without reading it), so a file truncated below the region is an error, as in a full
    // decode.
    if ((int)ci->output_scanline < sh) {
        if (sh - (int)ci->output_scanline > 1)
            jpeg_skip_scanlines(ci, (JDIMENSION)(sh - 1 - (int)ci->output_scanline));
        JSAMPROW row = dec->row;
        jpeg_read_scanlines(ci, &row, 1);
    }
    jpeg_finish_decompress(ci);
    img->width = rw;
    img->height = y1 - y0;
    if (got) *got = (JpegRegion){x0, y0, sw, sh};
    return 0;
}

int jpeg_decode_mem(JpegDecoder *dec, const uint8_t *data, size_t size, const char *name,
                    Image *img)
{
    int w, h;
    if (jpeg_decode_header(dec, data, size, name, &w, &h) != 0) return -1;
    return jpeg_decode_region(dec, NULL, 1, img, NULL);
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
