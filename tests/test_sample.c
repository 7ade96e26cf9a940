// test_sample.c: the loader's per-sample path (sample_load): JPEGs the libjpeg API must
// decode that TurboJPEG would not (CMYK and YCCK, Adobe-inverted or not), decompression
// bombs rejected from the header alone, and region (and DCT-scaled) decode matching a
// full decode + crop + resize.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/clock.h"
#include "loaders/augment.h"
#include "loaders/jpeg.h"
#include "loaders/sample.h"
#include "tests/loader_support.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>
#include <turbojpeg.h>
// jpeglib.h needs stdio.h first.
#include <jpeglib.h>

typedef struct {
    char *tmp;  // test_temp_dir's
} SampleFixture;

static int setup(void **state)
{
    SampleFixture *f = calloc(1, sizeof *f);
    if (!f || !(f->tmp = test_temp_dir())) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    SampleFixture *f = *state;
    test_remove_tree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

// How a test JPEG is written with the libjpeg API.
typedef struct {
    J_COLOR_SPACE input;  // JCS_RGB or JCS_CMYK pixels
    J_COLOR_SPACE stored; // colour space in the file (JCS_YCbCr, JCS_GRAYSCALE, JCS_CMYK, JCS_YCCK)
    bool adobe;           // write the Adobe APP14 marker
    bool progressive;
    int h_samp, v_samp;   // sampling factors of the first component (1 or 2)
    int quality;
} Encoding;

// Compresses w x h pixels (3 or 4 bytes each, per enc->input) into a file at path.
static void write_libjpeg(const char *path, const uint8_t *px, int w, int h, const Encoding *enc)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &out, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = enc->input == JCS_CMYK ? 4 : 3;
    c.in_color_space = enc->input;
    jpeg_set_defaults(&c);
    jpeg_set_colorspace(&c, enc->stored);
    c.write_Adobe_marker = enc->adobe;
    c.comp_info[0].h_samp_factor = enc->h_samp;
    c.comp_info[0].v_samp_factor = enc->v_samp;
    jpeg_set_quality(&c, enc->quality, TRUE);
    if (enc->progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    int stride = w * c.input_components;
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * stride);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    assert_int_equal(testutil_write(path, out, size), 0);
    free(out);
}

// ---- CMYK and YCCK ----

// Four 16x16 patches of known ink (C, M, Y, K) and the RGB they make:
// R = (255 - C)(255 - K) / 255, likewise G from M and B from Y.
static const uint8_t patch_cmyk[4][4] = {{0, 0, 0, 0}, {255, 0, 0, 0}, {40, 200, 90, 60}, {0, 0, 0, 200}};

static void expected_rgb(const uint8_t cmyk[4], double rgb[3])
{
    for (int c = 0; c < 3; c++) rgb[c] = (255.0 - cmyk[c]) * (255.0 - cmyk[3]) / 255.0;
}

#define CMYK_TOLERANCE 6.0 // levels per channel at a patch centre (quality 95, flat patches)

static void check_cmyk_file(SampleFixture *f, const char *name, J_COLOR_SPACE stored, bool adobe)
{
    enum { W = 32, H = 32 };
    uint8_t px[W * H * 4];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 4; c++) {
                uint8_t v = patch_cmyk[(y / 16) * 2 + x / 16][c];
                px[(y * W + x) * 4 + c] = adobe ? (uint8_t)(255 - v) : v; // Adobe: inverted ink
            }
    char path[160];
    snprintf(path, sizeof path, "%s/%s", f->tmp, name);
    write_libjpeg(path, px, W, H, &(Encoding){JCS_CMYK, stored, adobe, false, 1, 1, 95});
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    if (jpeg_decode_file(dec, path, &img) != 0) fail_msg("%s: %s", name, error_message());
    assert_int_equal(img.width, W);
    assert_int_equal(img.height, H);
    for (int p = 0; p < 4; p++) {
        double want[3];
        expected_rgb(patch_cmyk[p], want);
        int cy = (p / 2) * 16 + 8, cx = (p % 2) * 16 + 8;
        for (int c = 0; c < 3; c++) {
            double got = img.pixels[(cy * W + cx) * 3 + c];
            if (fabs(got - want[c]) > CMYK_TOLERANCE)
                fail_msg("%s patch %d channel %d: %g, want %g +- %g", name, p, c, got, want[c],
                         CMYK_TOLERANCE);
        }
    }
    image_free(&img);
    jpeg_decoder_destroy(dec);
}

static void test_cmyk_plain(void **state) { check_cmyk_file(*state, "cmyk.jpg", JCS_CMYK, false); }
static void test_cmyk_adobe_inverted(void **state) { check_cmyk_file(*state, "cmyk_adobe.jpg", JCS_CMYK, true); }
// YCCK is only recognised through the Adobe marker's transform code, so always inverted.
static void test_ycck_adobe_inverted(void **state) { check_cmyk_file(*state, "ycck.jpg", JCS_YCCK, true); }

// TurboJPEG 2.1 rejects CMYK into RGB; the whole point of the libjpeg path.
static void test_cmyk_through_sample_load(void **state)
{
    SampleFixture *f = *state;
    enum { W = 64, H = 48 };
    uint8_t px[W * H * 4];
    for (int i = 0; i < W * H; i++)
        for (int c = 0; c < 4; c++) px[i * 4 + c] = (uint8_t)((i * (c + 3) + c * 50) % 256);
    char path[160];
    snprintf(path, sizeof path, "%s/cmyk_sample.jpg", f->tmp);
    write_libjpeg(path, px, W, H, &(Encoding){JCS_CMYK, JCS_CMYK, true, false, 1, 1, 90});
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    AugmentConfig cfg = augment_default_config(16);
    float out[3 * 16 * 16];
    if (sample_load(dec, path, &cfg, 3, &img, out) != 0) fail_msg("%s", error_message());
    image_free(&img);
    jpeg_decoder_destroy(dec);
}

// ---- decompression bombs ----

// A valid small JPEG whose frame header then claims w x h.
static void write_bomb(const char *path, bool progressive, int w, int h)
{
    uint8_t px[16 * 16 * 3];
    for (int i = 0; i < (int)sizeof px; i++) px[i] = (uint8_t)(i * 13);
    write_libjpeg(path, px, 16, 16, &(Encoding){JCS_RGB, JCS_YCbCr, false, progressive, 2, 2, 90});
    size_t size;
    uint8_t *b = (unsigned char *)test_read_file(path, &size);
    assert_non_null(b);
    bool patched = false;
    for (size_t i = 2; i + 9 < size && !patched; i++)
        if (b[i] == 0xFF && (b[i + 1] == 0xC0 || b[i + 1] == 0xC2)) { // SOF0 / SOF2
            b[i + 5] = (uint8_t)(h >> 8);
            b[i + 6] = (uint8_t)h;
            b[i + 7] = (uint8_t)(w >> 8);
            b[i + 8] = (uint8_t)w;
            patched = true;
        }
    assert_true(patched);
    assert_int_equal(testutil_write(path, b, size), 0);
    free(b);
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

#define BOMB_MAX_SECONDS 1.0
#define BOMB_MAX_RSS_GROWTH_KIB (64L << 10) // a 65500x65500 RGB image would be 12 GiB

static void test_bomb_rejected_from_header(void **state)
{
    SampleFixture *f = *state;
    for (int progressive = 0; progressive < 2; progressive++) {
        char path[160];
        snprintf(path, sizeof path, "%s/bomb_%d.jpg", f->tmp, progressive);
        write_bomb(path, progressive, 65500, 65500);
        JpegDecoder *dec = jpeg_decoder_create();
        Image img = {0};
        AugmentConfig cfg = augment_default_config(32);
        float out[3 * 32 * 32];
        long rss0 = peak_rss_kib();
        double t0 = clock_seconds();
        for (int way = 0; way < 2; way++) { // whole-image decode and the loader's sample path
            error_clear();
            int rc = way == 0 ? jpeg_decode_file(dec, path, &img)
                              : sample_load(dec, path, &cfg, 1, &img, out);
            assert_int_equal(rc, -1);
            const char *msg = error_message();
            if (!strstr(msg, path) || !strstr(msg, "65500x65500") || !strstr(msg, "pixel limit"))
                fail_msg("the error should name %s, 65500x65500 and the pixel limit: '%s'", path, msg);
        }
        double seconds = clock_seconds() - t0;
        long grew = peak_rss_kib() - rss0;
        if (seconds > BOMB_MAX_SECONDS) fail_msg("rejecting the bomb took %.2f s", seconds);
        if (grew > BOMB_MAX_RSS_GROWTH_KIB) fail_msg("peak RSS grew by %ld KiB", grew);
        assert_true(img.capacity < (1u << 20));
        image_free(&img);
        jpeg_decoder_destroy(dec);
    }
}

// Smooth gradients, blocky edges and (unless smooth) pixel noise: every DCT block is
// non-trivial. Smooth sources are for comparing scaled decode, where the IDCT averages
// pixel noise away that bilinear point sampling keeps.
static void render_content(uint8_t *px, int w, int h, int channels, uint64_t seed, bool smooth)
{
    uint64_t r = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < channels; c++) {
                r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                if (smooth) {
                    double v = 120 + 100 * sin(x * (0.011 + 0.004 * c) + y * 0.017) * cos(y * 0.013 - c);
                    px[((size_t)y * w + x) * channels + c] = (uint8_t)lround(v);
                    continue;
                }
                int v = (x * (3 + c) + y * (5 - c) + c * 40) % 200 + ((x / 23 + y / 17) % 2) * 40;
                px[((size_t)y * w + x) * channels + c] = (uint8_t)(v + (int)(r % 16));
            }
}

static void render(uint8_t *px, int w, int h, int channels, uint64_t seed)
{
    render_content(px, w, h, channels, seed, false);
}

static void test_pixel_limit_is_settable(void **state)
{
    SampleFixture *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/small.jpg", f->tmp);
    uint8_t px[40 * 30 * 3];
    render(px, 40, 30, 3, 1);
    write_libjpeg(path, px, 40, 30, &(Encoding){JCS_RGB, JCS_YCbCr, false, false, 2, 2, 90});
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    jpeg_decoder_set_max_pixels(dec, 40 * 30 - 1);
    assert_int_equal(jpeg_decode_file(dec, path, &img), -1);
    assert_non_null(strstr(error_message(), "40x30"));
    jpeg_decoder_set_max_pixels(dec, 40 * 30);
    assert_int_equal(jpeg_decode_file(dec, path, &img), 0);
    image_free(&img);
    jpeg_decoder_destroy(dec);
}

// ---- region and scaled decode ----

typedef struct {
    const char *name;
    int width, height;
    Encoding enc;
    bool smooth;
} Source;

static void write_source(SampleFixture *f, const Source *s, char *path, size_t path_size)
{
    int ch = s->enc.input == JCS_CMYK ? 4 : 3;
    uint8_t *px = malloc((size_t)s->width * s->height * ch);
    assert_non_null(px);
    render_content(px, s->width, s->height, ch, (uint64_t)s->width * 31 + s->height, s->smooth);
    snprintf(path, path_size, "%s/%s.jpg", f->tmp, s->name);
    write_libjpeg(path, px, s->width, s->height, &s->enc);
    free(px);
}

// sample_load versus jpeg_decode_file + augment_apply over many seeds; returns the mean
// absolute difference (normalised units) and sets *max_diff and *scaled (samples that
// were decoded at a reduced scale).
static double compare_with_full_decode(const char *path, const AugmentConfig *cfg, int seeds,
                                       double *max_diff, int *scaled)
{
    JpegDecoder *dec = jpeg_decoder_create();
    Image full = {0}, region = {0};
    size_t n = augment_sample_bytes(cfg) / sizeof(float);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    assert_true(dec && want && got);
    if (jpeg_decode_file(dec, path, &full) != 0) fail_msg("%s", error_message());
    double sum = 0;
    *max_diff = 0;
    *scaled = 0;
    for (int seed = 0; seed < seeds; seed++) {
        augment_apply(cfg, &full, (uint64_t)seed, want);
        if (sample_load(dec, path, cfg, (uint64_t)seed, &region, got) != 0)
            fail_msg("%s seed %d: %s", path, seed, error_message());
        AugmentCrop k = augment_choose_crop(cfg, full.width, full.height, (uint64_t)seed);
        *scaled += sample_decode_scale(cfg, k.width, k.height) > 1;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)want[i] - got[i]);
            sum += d;
            if (d > *max_diff) *max_diff = d;
        }
    }
    free(want);
    free(got);
    image_free(&full);
    image_free(&region);
    jpeg_decoder_destroy(dec);
    return sum / ((double)n * seeds);
}

// At full scale the region decode gives the very pixels of a full decode (the region is
// widened so that no upsampling edge lands in the crop): the same output, bit for bit.
static void test_region_decode_matches_full_decode(void **state)
{
    SampleFixture *f = *state;
    const Source sources[] = {
        {"s420", 160, 120, {JCS_RGB, JCS_YCbCr, false, false, 2, 2, 90}, false},
        {"s420_odd", 157, 93, {JCS_RGB, JCS_YCbCr, false, false, 2, 2, 75}, false},
        {"s422", 150, 110, {JCS_RGB, JCS_YCbCr, false, false, 2, 1, 90}, false},
        {"s444", 131, 140, {JCS_RGB, JCS_YCbCr, false, false, 1, 1, 90}, false},
        {"s411", 170, 100, {JCS_RGB, JCS_YCbCr, false, false, 4, 1, 85}, false},
        {"grey", 120, 160, {JCS_RGB, JCS_GRAYSCALE, false, false, 1, 1, 90}, false},
        {"progressive", 160, 120, {JCS_RGB, JCS_YCbCr, false, true, 2, 2, 85}, false},
        {"cmyk", 144, 112, {JCS_CMYK, JCS_CMYK, true, false, 1, 1, 90}, false},
    };
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        char path[160];
        write_source(f, &sources[i], path, sizeof path);
        AugmentConfig cfg = augment_default_config(80); // no source is twice this: never scaled
        for (int eval = 0; eval < 2; eval++) {
            cfg.random_crop = eval == 0;
            double max_diff;
            int scaled;
            compare_with_full_decode(path, &cfg, 40, &max_diff, &scaled);
            assert_int_equal(scaled, 0);
            if (max_diff != 0)
                fail_msg("%s (random_crop %d): region decode differs from full decode by up to %g",
                         sources[i].name, cfg.random_crop, max_diff);
        }
    }
}

// At 1/2, 1/4, 1/8 scale the IDCT averages instead of bilinear sampling the full image:
// close, not equal. Mean absolute difference over all outputs at most SCALED_MEAN_TOL
// (normalised units: 1/255 of the range is about 0.017) and no value off by more than
// SCALED_MAX_TOL.
#define SCALED_MEAN_TOL 0.04
#define SCALED_MAX_TOL 0.25
static void test_scaled_decode_is_close_to_full_decode(void **state)
{
    SampleFixture *f = *state;
    const Source sources[] = {
        {"big420", 480, 360, {JCS_RGB, JCS_YCbCr, false, false, 2, 2, 90}, true},
        {"big444", 400, 300, {JCS_RGB, JCS_YCbCr, false, false, 1, 1, 90}, true},
        {"bigprog", 480, 360, {JCS_RGB, JCS_YCbCr, false, true, 2, 2, 90}, true},
    };
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        char path[160];
        write_source(f, &sources[i], path, sizeof path);
        AugmentConfig cfg = augment_default_config(32);
        double max_diff;
        int scaled;
        double mean = compare_with_full_decode(path, &cfg, 40, &max_diff, &scaled);
        print_message("%s: %d of 40 samples scaled, mean |diff| %.4f, max %.4f\n", sources[i].name,
                      scaled, mean, max_diff);
        assert_true(scaled >= 10);
        if (mean > SCALED_MEAN_TOL || max_diff > SCALED_MAX_TOL)
            fail_msg("%s: scaled decode is off by %.4f on average (max %.4f)", sources[i].name, mean,
                     max_diff);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cmyk_plain),
        cmocka_unit_test(test_cmyk_adobe_inverted),
        cmocka_unit_test(test_ycck_adobe_inverted),
        cmocka_unit_test(test_cmyk_through_sample_load),
        cmocka_unit_test(test_bomb_rejected_from_header),
        cmocka_unit_test(test_pixel_limit_is_settable),
        cmocka_unit_test(test_region_decode_matches_full_decode),
        cmocka_unit_test(test_scaled_decode_is_close_to_full_decode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
