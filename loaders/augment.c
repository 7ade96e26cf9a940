// augment.c: random-resized crop + flip + normalise + HWC->CHW in one pass per sample.
#include "loaders/augment.h"

#include "kernels/error.h"
#include "kernels/rng.h"

#include <math.h>
#include <string.h>

#define AUGMENT_MAX_SIDE 4096

AugmentConfig augment_default_config(int out_size)
{
    AugmentConfig c = {
        .out_height = out_size, .out_width = out_size, .random_crop = true,
        .scale_min = 0.08, .scale_max = 1.0, .ratio_min = 3.0 / 4.0, .ratio_max = 4.0 / 3.0,
        .flip = true, .mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f},
        .dtype = AUGMENT_FLOAT32,
    };
    return c;
}

int augment_check_config(const AugmentConfig *c)
{
    if (c->out_height < 1 || c->out_width < 1 || c->out_height > AUGMENT_MAX_SIDE ||
        c->out_width > AUGMENT_MAX_SIDE)
        return error_set(ERROR_BAD_USAGE, "augment: output size %dx%d out of range 1..%d", c->out_width,
                            c->out_height, AUGMENT_MAX_SIDE);
    if (c->random_crop && !(c->scale_min > 0 && c->scale_min <= c->scale_max &&
                            c->scale_max <= 1 && c->ratio_min > 0 &&
                            c->ratio_min <= c->ratio_max))
        return error_set(ERROR_BAD_USAGE, "augment: bad crop ranges scale [%g, %g] ratio [%g, %g]",
                            c->scale_min, c->scale_max, c->ratio_min, c->ratio_max);
    for (int i = 0; i < 3; i++)
        if (!(c->std[i] > 0)) return error_set(ERROR_BAD_USAGE, "augment: std[%d] must be > 0", i);
    if (c->dtype != AUGMENT_FLOAT32 && c->dtype != AUGMENT_FLOAT16)
        return error_set(ERROR_BAD_USAGE, "augment: unknown dtype %d", (int)c->dtype);
    return 0;
}

size_t augment_sample_bytes(const AugmentConfig *c)
{
    size_t elem = c->dtype == AUGMENT_FLOAT16 ? 2 : 4;
    return 3 * (size_t)c->out_height * (size_t)c->out_width * elem;
}

AugmentCrop augment_choose_crop(const AugmentConfig *c, int width, int height, uint64_t seed)
{
    Rng r = rng_make(seed, 0xC0FFEE, 0);
    AugmentCrop crop = {0, 0, width, height, false};
    if (c->random_crop) {
        // torchvision RandomResizedCrop: 10 tries at a random area and log-uniform
        // aspect ratio, then fall back to a centre crop with the ratio clamped.
        double area = (double)width * height;
        double log_lo = log(c->ratio_min), log_hi = log(c->ratio_max);
        bool found = false;
        for (int attempt = 0; attempt < 10 && !found; attempt++) {
            double target = area * (c->scale_min + (c->scale_max - c->scale_min) * rng_uniform(&r));
            double ratio = exp(log_lo + (log_hi - log_lo) * rng_uniform(&r));
            int w = (int)lround(sqrt(target * ratio));
            int h = (int)lround(sqrt(target / ratio));
            if (w > 0 && h > 0 && w <= width && h <= height) {
                crop.width = w;
                crop.height = h;
                crop.y = (int)rng_below(&r, height - h + 1);
                crop.x = (int)rng_below(&r, width - w + 1);
                found = true;
            }
        }
        if (!found) {
            double in_ratio = (double)width / height;
            if (in_ratio < c->ratio_min) {
                crop.width = width;
                crop.height = (int)lround(width / c->ratio_min);
            } else if (in_ratio > c->ratio_max) {
                crop.height = height;
                crop.width = (int)lround(height * c->ratio_max);
            }
            if (crop.width > width) crop.width = width;
            if (crop.height > height) crop.height = height;
            crop.x = (width - crop.width) / 2;
            crop.y = (height - crop.height) / 2;
        }
    }
    if (c->flip) crop.flip = (rng_next(&r) >> 63) != 0;
    return crop;
}

uint16_t augment_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xFFu;
    uint32_t man = x & 0x7FFFFFu;
    if (exp == 0xFF) return (uint16_t)(sign | 0x7C00u | (man ? 0x200u : 0)); // inf / nan
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7C00u); // overflow -> inf
    if (e <= 0) { // subnormal half or zero
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) half++; // may carry into exp: ok
    return (uint16_t)(sign | half);
}

float augment_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    int exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FFu;
    uint32_t x;
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    } else if (exp == 31) {
        x = sign | 0x7F800000u | (man << 13);
    } else {
        x = sign | ((uint32_t)(exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

// Bilinear sampling positions for one axis (align_corners=False, like torch).
static void axis_table(int out, int start, int len, int limit, int *i0, int *i1, float *w1)
{
    double scale = (double)len / out;
    for (int o = 0; o < out; o++) {
        double s = (o + 0.5) * scale - 0.5;
        if (s < 0) s = 0;
        int a = (int)s;
        if (a > len - 1) a = len - 1;
        int b = a + 1 < len ? a + 1 : len - 1;
        i0[o] = start + a;
        i1[o] = start + b;
        w1[o] = (float)(s - a);
        if (i1[o] >= limit) i1[o] = limit - 1;
    }
}

// One source row resampled horizontally into planar (3, ow) floats, already mirrored.
static void resample_row(const uint8_t *src, int ow, const int *x0, const int *x1,
                         const float *wx, float *dst)
{
    for (int ox = 0; ox < ow; ox++) {
        const uint8_t *a = src + x0[ox] * 3, *b = src + x1[ox] * 3;
        float f = wx[ox];
        dst[ox] = a[0] + (b[0] - a[0]) * f;
        dst[ow + ox] = a[1] + (b[1] - a[1]) * f;
        dst[2 * ow + ox] = a[2] + (b[2] - a[2]) * f;
    }
}

typedef float Float4 __attribute__((vector_size(16)));

// o = (t + (b - t) * fy) * scale + bias, four lanes at a time (GCC vector extension:
// -O2 does not vectorise this loop by itself, and it is a third of the augment time).
static void blend_rows(const float *t, const float *b, float fy, float scale, float bias, int n,
                       float *o)
{
    int i = 0;
    Float4 vfy = {fy, fy, fy, fy}, vs = {scale, scale, scale, scale}, vb = {bias, bias, bias, bias};
    for (; i + 4 <= n; i += 4) {
        Float4 vt, vbot;
        memcpy(&vt, t + i, sizeof vt);
        memcpy(&vbot, b + i, sizeof vbot);
        Float4 r = (vt + (vbot - vt) * vfy) * vs + vb;
        memcpy(o + i, &r, sizeof r);
    }
    for (; i < n; i++) o[i] = (t[i] + (b[i] - t[i]) * fy) * scale + bias;
}

// Separable bilinear: each needed source row is resampled horizontally once (rows are
// shared by neighbouring output rows when upscaling), then rows are blended vertically
// and normalised in contiguous, vectorisable loops.
void augment_apply(const AugmentConfig *c, const Image *src, uint64_t seed, void *out)
{
    static _Thread_local int x0[AUGMENT_MAX_SIDE], x1[AUGMENT_MAX_SIDE];
    static _Thread_local int y0[AUGMENT_MAX_SIDE], y1[AUGMENT_MAX_SIDE];
    static _Thread_local float wx[AUGMENT_MAX_SIDE], wy[AUGMENT_MAX_SIDE];
    static _Thread_local float rows[2][3 * AUGMENT_MAX_SIDE], blend[AUGMENT_MAX_SIDE];

    AugmentCrop crop = augment_choose_crop(c, src->width, src->height, seed);
    int ow = c->out_width, oh = c->out_height;
    axis_table(ow, crop.x, crop.width, src->width, x0, x1, wx);
    axis_table(oh, crop.y, crop.height, src->height, y0, y1, wy);
    if (crop.flip)
        for (int a = 0, b = ow - 1; a < b; a++, b--) {
            int t = x0[a]; x0[a] = x0[b]; x0[b] = t;
            t = x1[a]; x1[a] = x1[b]; x1[b] = t;
            float w = wx[a]; wx[a] = wx[b]; wx[b] = w;
        }
    float scale[3], bias[3];
    for (int ch = 0; ch < 3; ch++) {
        scale[ch] = 1.0f / (255.0f * c->std[ch]);
        bias[ch] = -c->mean[ch] / c->std[ch];
    }
    size_t plane = (size_t)oh * ow;
    const size_t stride = (size_t)src->width * 3;
    int cached[2] = {-1, -1}; // source row held in rows[0] / rows[1]
    for (int oy = 0; oy < oh; oy++) {
        int want0 = y0[oy], want1 = y1[oy];
        int i0 = cached[0] == want0 ? 0 : cached[1] == want0 ? 1 : -1;
        if (i0 < 0) {
            i0 = cached[0] == want1 ? 1 : 0; // keep the row needed next
            resample_row(src->pixels + (size_t)want0 * stride, ow, x0, x1, wx, rows[i0]);
            cached[i0] = want0;
        }
        int i1 = cached[i0] == want1 ? i0 : cached[1 - i0] == want1 ? 1 - i0 : -1;
        if (i1 < 0) {
            i1 = 1 - i0;
            resample_row(src->pixels + (size_t)want1 * stride, ow, x0, x1, wx, rows[i1]);
            cached[i1] = want1;
        }
        const float *r[2] = {rows[i0], rows[i1]};
        float fy = wy[oy];
        for (int ch = 0; ch < 3; ch++) {
            const float *t = r[0] + ch * ow, *b = r[1] + ch * ow;
            float sc = scale[ch], bi = bias[ch];
            size_t off = ch * plane + (size_t)oy * ow;
            float *o = c->dtype == AUGMENT_FLOAT32 ? (float *)out + off : blend;
            blend_rows(t, b, fy, sc, bi, ow, o);
            if (c->dtype == AUGMENT_FLOAT16) {
                uint16_t *h = (uint16_t *)out + off;
                for (int ox = 0; ox < ow; ox++) h[ox] = augment_float_to_half(blend[ox]);
            }
        }
    }
}
