// test_jpeg.c: JPEG decode (including the bad-input cases) and the fused augmentation:
// crop geometry, flip, normalisation values, determinism per seed, and fp16 output.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loaders/augment.h"
#include "loaders/jpeg.h"
#include "tests/loader_support.h"

#include <math.h>

typedef struct {
    char *tmp;  // test_temp_dir's
    char good[128];
    DatasetGenConfig gen;
} JpegFixture;

static int setup(void **state)
{
    JpegFixture *f = calloc(1, sizeof *f);
    if (!f || !(f->tmp = test_temp_dir())) return -1;
    f->gen = (DatasetGenConfig){3, 1, 40, 32, 95, 5};
    uint8_t rgb[40 * 32 * 3];
    dataset_gen_render(&f->gen, 1, 0, rgb);
    snprintf(f->good, sizeof f->good, "%s/good.jpg", f->tmp);
    if (jpeg_write_file(f->good, rgb, 40, 32, 95) != 0) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    JpegFixture *f = *state;
    test_remove_tree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

static void test_roundtrip_keeps_size_and_pixels(void **state)
{
    JpegFixture *f = *state;
    uint8_t rgb[40 * 32 * 3];
    dataset_gen_render(&f->gen, 1, 0, rgb);
    JpegDecoder *dec = jpeg_decoder_create();
    assert_non_null(dec);
    Image img = {0};
    assert_int_equal(jpeg_decode_file(dec, f->good, &img), 0);
    assert_int_equal(img.width, 40);
    assert_int_equal(img.height, 32);
    double err = 0;
    for (int i = 0; i < 40 * 32 * 3; i++) err += fabs((double)img.pixels[i] - rgb[i]);
    err /= 40 * 32 * 3;
    assert_true(err < 14.0); // noisy synthetic pixels, quality 95, 4:2:0
    image_free(&img);
    jpeg_decoder_destroy(dec);
}

// Writes `data` as <tmp>/<name>, decodes it, and checks the error names the file and
// contains `what`.
static void expect_decode_error(JpegFixture *f, const char *name, const void *data, size_t size,
                                const char *what)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", f->tmp, name);
    assert_int_equal(testutil_write(path, data, size), 0);
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    error_clear();
    assert_int_equal(jpeg_decode_file(dec, path, &img), -1);
    const char *msg = error_message();
    if (!strstr(msg, path) || !strstr(msg, what))
        fail_msg("error '%s' should name '%s' and say '%s'", msg, path, what);
    image_free(&img);
    jpeg_decoder_destroy(dec);
}

static void test_non_jpeg_is_named(void **state)
{
    const char png[] = "\x89PNG\r\n\x1a\n this is not a jpeg";
    expect_decode_error(*state, "fake.jpg", png, sizeof png, "not a JPEG");
}

static void test_empty_file_is_named(void **state)
{
    expect_decode_error(*state, "empty.jpg", "", 0, "not a JPEG");
}

static void test_truncated_jpeg_is_named(void **state)
{
    JpegFixture *f = *state;
    size_t size = 0;
    unsigned char *buf = (unsigned char *)test_read_file(f->good, &size);
    assert_non_null(buf);
    expect_decode_error(f, "truncated.jpg", buf, size * 2 / 3, "truncated");
    expect_decode_error(f, "header_cut.jpg", buf, 100, "truncated"); // ends before the frame
    free(buf);
}

static void test_corrupt_header_is_named(void **state)
{
    JpegFixture *f = *state;
    size_t size = 0;
    unsigned char *buf = (unsigned char *)test_read_file(f->good, &size);
    assert_non_null(buf);
    memset(buf + 2, 0x5A, 60); // garbage where the markers should be
    expect_decode_error(f, "corrupt.jpg", buf, size, "corrupt");
    free(buf);
}

// One decoder sees each kind of bad file and then a good one: the good one must decode
// (TurboJPEG 2.1 misreads the next file after a failed header unless reset).
static void test_decoder_recovers_after_errors(void **state)
{
    JpegFixture *f = *state;
    size_t size = 0;
    unsigned char *good = (unsigned char *)test_read_file(f->good, &size);
    assert_non_null(good);
    unsigned char *bad = malloc(size);
    const size_t cuts[] = {20, 100, 400, size * 2 / 3, size - 2};
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        assert_int_equal(jpeg_decode_mem(dec, good, cuts[k], "cut.jpg", &img), -1);
        assert_int_equal(jpeg_decode_mem(dec, good, size, "good.jpg", &img), 0);
        assert_int_equal(img.width, 40);
        assert_int_equal(img.height, 32);
    }
    memcpy(bad, good, size);
    memset(bad + 2, 0x5A, 60);
    assert_int_equal(jpeg_decode_mem(dec, bad, size, "bad.jpg", &img), -1);
    assert_int_equal(jpeg_decode_mem(dec, good, size, "good.jpg", &img), 0);
    assert_int_equal(img.width, 40);
    image_free(&img);
    jpeg_decoder_destroy(dec);
    free(bad);
    free(good);
}

static void test_missing_file_is_named(void **state)
{
    JpegFixture *f = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/nope.jpg", f->tmp);
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    assert_int_equal(jpeg_decode_file(dec, path, &img), -1);
    assert_non_null(strstr(error_message(), path));
    jpeg_decoder_destroy(dec);
}

static Image solid_image(int w, int h, uint8_t r, uint8_t g, uint8_t b)
{
    Image img = {malloc((size_t)w * h * 3), w, h, (size_t)w * h * 3};
    for (int i = 0; i < w * h; i++) {
        img.pixels[3 * i] = r;
        img.pixels[3 * i + 1] = g;
        img.pixels[3 * i + 2] = b;
    }
    return img;
}

static void test_normalise_values(void **state)
{
    (void)state;
    Image img = solid_image(50, 30, 100, 150, 200);
    AugmentConfig c = augment_default_config(16);
    float out[3 * 16 * 16];
    const double v[3] = {100, 150, 200};
    for (uint64_t seed = 0; seed < 20; seed++) {
        augment_apply(&c, &img, seed, out);
        for (int ch = 0; ch < 3; ch++) {
            double want = (v[ch] / 255.0 - c.mean[ch]) / c.std[ch];
            for (int i = 0; i < 256; i++) assert_true(fabs(out[ch * 256 + i] - want) < 1e-4);
        }
    }
    free(img.pixels);
}

static void test_crop_is_inside_and_in_range(void **state)
{
    (void)state;
    AugmentConfig c = augment_default_config(32);
    int flips = 0;
    for (uint64_t seed = 0; seed < 2000; seed++) {
        int w = 20 + (int)(seed % 300), h = 15 + (int)((seed * 7) % 250);
        AugmentCrop k = augment_choose_crop(&c, w, h, seed);
        assert_true(k.x >= 0 && k.y >= 0 && k.width >= 1 && k.height >= 1);
        assert_true(k.x + k.width <= w && k.y + k.height <= h);
        double frac = (double)k.width * k.height / ((double)w * h);
        assert_true(frac > 0.05 && frac <= 1.0);
        flips += k.flip;
    }
    assert_in_range(flips, 850, 1150); // p = 1/2
}

static void test_flip_mirrors_output(void **state)
{
    (void)state;
    Image img = solid_image(24, 16, 0, 0, 0);
    for (int i = 0; i < 24 * 16 * 3; i++) img.pixels[i] = (uint8_t)(i * 37 % 251);
    AugmentConfig c = augment_default_config(12);
    c.random_crop = false;
    uint64_t seed = 0;
    while (!augment_choose_crop(&c, 24, 16, seed).flip) seed++;
    float flipped[3 * 12 * 12], plain[3 * 12 * 12];
    augment_apply(&c, &img, seed, flipped);
    c.flip = false;
    augment_apply(&c, &img, seed, plain);
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < 12; y++)
            for (int x = 0; x < 12; x++)
                assert_float_equal(flipped[(ch * 12 + y) * 12 + x],
                                   plain[(ch * 12 + y) * 12 + 11 - x], 1e-6);
    free(img.pixels);
}

static void test_same_seed_same_output(void **state)
{
    (void)state;
    Image img = solid_image(64, 48, 0, 0, 0);
    for (int i = 0; i < 64 * 48 * 3; i++) img.pixels[i] = (uint8_t)(i * 13 % 253);
    AugmentConfig c = augment_default_config(20);
    float a[3 * 400], b[3 * 400], d[3 * 400];
    augment_apply(&c, &img, 42, a);
    augment_apply(&c, &img, 42, b);
    augment_apply(&c, &img, 43, d);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, d, sizeof a);
    free(img.pixels);
}

// Plain per-pixel bilinear (align_corners=False) of the crop, then flip and normalise.
static double reference_value(const Image *img, const AugmentConfig *c, AugmentCrop k, int ch,
                              int oy, int ox)
{
    int sx_out = k.flip ? c->out_width - 1 - ox : ox;
    double sy = (oy + 0.5) * k.height / c->out_height - 0.5;
    double sx = (sx_out + 0.5) * k.width / c->out_width - 0.5;
    if (sy < 0) sy = 0;
    if (sx < 0) sx = 0;
    int y0 = (int)sy, x0 = (int)sx;
    if (y0 > k.height - 1) y0 = k.height - 1;
    if (x0 > k.width - 1) x0 = k.width - 1;
    int y1 = y0 + 1 < k.height ? y0 + 1 : k.height - 1;
    int x1 = x0 + 1 < k.width ? x0 + 1 : k.width - 1;
    double fy = sy - y0, fx = sx - x0;
#define PX(r_, c_) ((double)img->pixels[((size_t)(k.y + (r_)) * img->width + k.x + (c_)) * 3 + ch])
    double top = PX(y0, x0) + (PX(y0, x1) - PX(y0, x0)) * fx;
    double bot = PX(y1, x0) + (PX(y1, x1) - PX(y1, x0)) * fx;
#undef PX
    return ((top + (bot - top) * fy) / 255.0 - c->mean[ch]) / c->std[ch];
}

static void test_matches_reference_bilinear(void **state)
{
    (void)state;
    Image img = solid_image(61, 47, 0, 0, 0);
    for (int i = 0; i < 61 * 47 * 3; i++) img.pixels[i] = (uint8_t)((i * 7919) % 256);
    const int sizes[][2] = {{16, 16}, {37, 23}, {90, 120}}; // down- and up-scaling
    for (int s = 0; s < 3; s++)
        for (uint64_t seed = 0; seed < 12; seed++) {
            AugmentConfig c = augment_default_config(8);
            c.out_height = sizes[s][0];
            c.out_width = sizes[s][1];
            c.random_crop = seed % 3 != 0;
            size_t n = 3 * (size_t)c.out_height * c.out_width;
            float *out = malloc(n * sizeof *out);
            augment_apply(&c, &img, seed, out);
            AugmentCrop k = augment_choose_crop(&c, img.width, img.height, seed);
            for (int ch = 0; ch < 3; ch++)
                for (int y = 0; y < c.out_height; y++)
                    for (int x = 0; x < c.out_width; x++) {
                        double want = reference_value(&img, &c, k, ch, y, x);
                        double got = out[((size_t)ch * c.out_height + y) * c.out_width + x];
                        if (fabs(got - want) > 1e-3)
                            fail_msg("seed %d size %dx%d ch %d (%d,%d): %f vs %f", (int)seed,
                                     c.out_width, c.out_height, ch, y, x, got, want);
                    }
            free(out);
        }
    free(img.pixels);
}

static void test_fp16_conversion(void **state)
{
    (void)state;
    assert_int_equal(augment_float_to_half(1.0f), 0x3C00);
    assert_int_equal(augment_float_to_half(-2.0f), 0xC000);
    assert_int_equal(augment_float_to_half(65504.0f), 0x7BFF);
    assert_int_equal(augment_float_to_half(1e6f), 0x7C00);
    assert_int_equal(augment_float_to_half(0.0f), 0x0000);
    assert_int_equal(augment_float_to_half(5.9604645e-8f), 0x0001); // smallest subnormal
    for (float x = -8.0f; x < 8.0f; x += 0.0137f) {
        float y = augment_half_to_float(augment_float_to_half(x));
        assert_true(fabsf(y - x) <= fabsf(x) * (1.0f / 2048) + 1e-7f);
    }
}

static void test_fp16_output_matches_fp32(void **state)
{
    (void)state;
    Image img = solid_image(40, 40, 0, 0, 0);
    for (int i = 0; i < 40 * 40 * 3; i++) img.pixels[i] = (uint8_t)(i * 29 % 255);
    AugmentConfig c = augment_default_config(10);
    float f32[300];
    uint16_t f16[300];
    augment_apply(&c, &img, 9, f32);
    c.dtype = AUGMENT_FLOAT16;
    assert_int_equal(augment_sample_bytes(&c), 600);
    augment_apply(&c, &img, 9, f16);
    for (int i = 0; i < 300; i++) assert_int_equal(f16[i], augment_float_to_half(f32[i]));
    free(img.pixels);
}

// F16C (when the CPU has it) and the scalar conversion give the same bits on a sweep:
// every half value, the exact ties between neighbours and a float ulp either side, float
// subnormals, overflow to inf, infs and nans (quiet, signalling, with payloads), and a
// stride through all 2^32 float bit patterns.
static void test_fp16_vector_matches_scalar(void **state)
{
    (void)state;
    size_t cap = 65536 * 4 + 70000 + 64, n = 0;
    uint32_t *bits = malloc(cap * sizeof *bits);
    assert_non_null(bits);
    for (uint32_t h = 0; h < 65536; h++) {
        float lo = augment_half_to_float((uint16_t)h);
        uint32_t x;
        memcpy(&x, &lo, 4);
        bits[n++] = x;
        if ((h & 0x7C00u) == 0x7C00u) continue; // inf / nan: no neighbour above
        float hi = augment_half_to_float((uint16_t)(h + 1));
        float mid = lo + (hi - lo) * 0.5f; // exact: halves have 11 significant bits
        memcpy(&x, &mid, 4);
        bits[n++] = x;     // the tie
        bits[n++] = x + 1; // a float ulp away (magnitude up)
        bits[n++] = x - 1; // and down
    }
    for (uint64_t x = 0; x <= 0xFFFFFFFFull; x += 65537) bits[n++] = (uint32_t)x;
    const uint32_t specials[] = {0x00000001u, 0x007FFFFFu, 0x80000001u, 0x33000000u, 0x33000001u,
                                 0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x7F7FFFFFu, 0x7F800000u,
                                 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0x7FBFFFFFu, 0xFFFFFFFFu,
                                 0x7FC02000u, 0x80000000u};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) bits[n++] = specials[i];
    assert_true(n <= cap);
    float *in = malloc(n * sizeof *in);
    uint16_t *fast = malloc(n * sizeof *fast), *slow = malloc(n * sizeof *slow);
    assert_true(in && fast && slow);
    memcpy(in, bits, n * sizeof *in);
    augment_floats_to_halves(in, fast, n);
    augment_floats_to_halves_scalar(in, slow, n);
    for (size_t i = 0; i < n; i++)
        if (fast[i] != slow[i])
            fail_msg("float bits 0x%08x: vector path gives 0x%04x, scalar 0x%04x", bits[i], fast[i],
                     slow[i]);
    // a few known answers: ties go to even, 65520 rounds up to inf, nans stay nans
    float ties[] = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65520.0f, 65519.996f};
    uint16_t want[] = {0x3C00, 0x3C02, 0x7C00, 0x7BFF};
    for (int i = 0; i < 4; i++) assert_int_equal(augment_float_to_half(ties[i]), want[i]);
    float qnan;
    uint32_t qn = 0x7FC00000u;
    memcpy(&qnan, &qn, 4);
    assert_int_equal(augment_float_to_half(qnan), 0x7E00);
    print_message("fp16: %zu values, %s path against the scalar one\n", n,
                  augment_have_f16c() ? "F16C" : "no F16C on this CPU: the scalar");
    free(bits);
    free(in);
    free(fast);
    free(slow);
}

// The AVX2 horizontal pass gives the scalar pass's bits. The last row of an image always
// takes the scalar pass (the vector loads would read past the buffer); with one more row below,
// the same row takes the AVX2 pass: the outputs over the same window must be identical.
static void test_avx2_resize_matches_scalar(void **state)
{
    (void)state;
    const int sizes[][4] = {{61, 47, 16, 16}, {61, 47, 37, 90}, {200, 9, 128, 3}, {13, 5, 24, 24},
                            {1, 7, 9, 4}, {2, 3, 17, 5}};
    for (int k = 0; k < 6; k++) {
        int w = sizes[k][0], h = sizes[k][1];
        Image tall = solid_image(w, h + 1, 0, 0, 0), img = solid_image(w, h, 0, 0, 0);
        for (int i = 0; i < w * (h + 1) * 3; i++) tall.pixels[i] = (uint8_t)((i * 7919 + i / 7) % 256);
        memcpy(img.pixels, tall.pixels, (size_t)w * h * 3);
        AugmentConfig c = augment_default_config(8);
        c.out_width = sizes[k][2];
        c.out_height = sizes[k][3];
        size_t n = 3 * (size_t)c.out_width * c.out_height;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        assert_true(a && b);
        for (int flip = 0; flip < 2; flip++) {
            AugmentWindow win = {0, h / 3, w, h - h / 3};
            augment_resample(&c, &img, &win, flip, a);
            augment_resample(&c, &tall, &win, flip, b);
            assert_memory_equal(a, b, n * sizeof *a);
        }
        free(a);
        free(b);
        free(img.pixels);
        free(tall.pixels);
    }
    print_message("resize: %s horizontal pass against the scalar one\n",
                  augment_have_avx2() ? "AVX2" : "no AVX2 on this CPU: the scalar");
}

// The whole resize with its AVX2 passes (horizontal and vertical) gives the bits of the
// scalar passes, over windows that upscale, downscale, start between pixels and are mirrored.
static void test_simd_resize_matches_scalar(void **state)
{
    (void)state;
    const int sizes[][4] = {{160, 160, 128, 128}, {61, 47, 37, 90}, {200, 9, 128, 3}, {13, 5, 24, 24},
                            {90, 70, 33, 17}, {2, 3, 17, 5}};
    for (int k = 0; k < 6; k++) {
        int w = sizes[k][0], h = sizes[k][1];
        Image img = solid_image(w, h, 0, 0, 0);
        for (int i = 0; i < w * h * 3; i++) img.pixels[i] = (uint8_t)((i * 7919 + i / 5) % 256);
        AugmentConfig c = augment_default_config(8);
        c.out_width = sizes[k][2];
        c.out_height = sizes[k][3];
        size_t n = 3 * (size_t)c.out_width * c.out_height;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        assert_true(a && b);
        const AugmentWindow wins[] = {{0, 0, w, h}, {w / 4.0 + 0.375, h / 5.0 + 0.25, w / 2.0, h / 2.0},
                                      {1, h / 3, w - 1, h - h / 3}};
        for (int v = 0; v < 3; v++)
            for (int flip = 0; flip < 2; flip++) {
                augment_set_simd(false);
                augment_resample(&c, &img, &wins[v], flip, a);
                augment_set_simd(true);
                augment_resample(&c, &img, &wins[v], flip, b);
                assert_memory_equal(a, b, n * sizeof *a);
            }
        free(a);
        free(b);
        free(img.pixels);
    }
    print_message("resize: %s passes against the scalar ones\n",
                  augment_have_avx2() ? "AVX2" : "no AVX2 on this CPU: the scalar");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_keeps_size_and_pixels),
        cmocka_unit_test(test_non_jpeg_is_named),
        cmocka_unit_test(test_empty_file_is_named),
        cmocka_unit_test(test_truncated_jpeg_is_named),
        cmocka_unit_test(test_corrupt_header_is_named),
        cmocka_unit_test(test_missing_file_is_named),
        cmocka_unit_test(test_decoder_recovers_after_errors),
        cmocka_unit_test(test_normalise_values),
        cmocka_unit_test(test_crop_is_inside_and_in_range),
        cmocka_unit_test(test_flip_mirrors_output),
        cmocka_unit_test(test_same_seed_same_output),
        cmocka_unit_test(test_matches_reference_bilinear),
        cmocka_unit_test(test_fp16_conversion),
        cmocka_unit_test(test_fp16_output_matches_fp32),
        cmocka_unit_test(test_fp16_vector_matches_scalar),
        cmocka_unit_test(test_avx2_resize_matches_scalar),
        cmocka_unit_test(test_simd_resize_matches_scalar),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
