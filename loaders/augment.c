// augment.c: random-resized crop + flip + normalise + HWC->CHW in one pass per sample.
#include "loaders/augment.h"

#include "kernels/error.h"
#include "kernels/rng.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

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
    // inf; nan quieted with its payload's top bits kept, as x86's F16C does
    if (exp == 0xFF) return (uint16_t)(sign | 0x7C00u | (man ? 0x200u | (man >> 13) : 0));
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

void augment_floats_to_halves_scalar(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = augment_float_to_half(in[i]);
}

#if defined(__x86_64__)
// Eight at a time with F16C's vcvtps2ph, round to nearest even (the scalar code's rounding).
__attribute__((target("avx,f16c"))) static void floats_to_halves_f16c(const float *in, uint16_t *out,
                                                                     size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(out + i), h);
    }
    augment_floats_to_halves_scalar(in + i, out + i, n - i);
}
#endif

bool augment_have_f16c(void)
{
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
#else
    return false;
#endif
}

void augment_floats_to_halves(const float *in, uint16_t *out, size_t n)
{
#if defined(__x86_64__)
    if (augment_have_f16c()) { // a flag libgcc reads from cpuid once: cheap
        floats_to_halves_f16c(in, out, n);
        return;
    }
#endif
    augment_floats_to_halves_scalar(in, out, n);
}

// Bilinear sampling positions for one axis (align_corners=False, like torch) of a window
// starting at `start` (whole plus fractional pixels: a source decoded at a reduced scale
// puts the crop's edge between pixels) and `len` pixels long, in a source `limit` long.
static void axis_table(int out, double start, double len, int limit, int *i0, int *i1, float *w1)
{
    int base = (int)floor(start);
    double frac = start - base; // 0 for a crop of a full-size source: the exact old path
    double scale = len / out;
    for (int o = 0; o < out; o++) {
        double s = (o + 0.5) * scale - 0.5;
        if (s < 0) s = 0;
        if (s > len - 1) s = len - 1 > 0 ? len - 1 : 0;
        s += frac;
        int a = (int)s;
        int b = a + 1 < len + frac ? a + 1 : a;
        double w = s - a;
        a += base;
        b += base;
        if (a > limit - 1) a = limit - 1;
        if (b > limit - 1) b = limit - 1;
        if (a < 0) a = 0;
        if (b < 0) b = 0;
        i0[o] = a;
        i1[o] = b;
        w1[o] = (float)w;
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

#if defined(__x86_64__)
static inline long long load_u64(const uint8_t *p)
{
    long long v;
    memcpy(&v, p, 8);
    return v;
}

// resample_row with AVX2, eight output pixels at a time. x1 is always x0 or x0 + 1, so one
// 8-byte load at a left neighbour brings the three channels of both neighbours (scalar
// loads: measured faster than AVX2 gathers, and than two 4-byte loads, on this suite's
// AMD EPYC host); wxe is wx with 0 where x1 == x0 (there the scalar loop's right
// neighbour is the left one: a + (a - a) * w = a + (b - a) * 0 = a). Then the same
// arithmetic in the same order (no FMA) as the scalar loop: the same bits. A load reads
// up to 5 bytes past the row's last pixel: the caller passes only rows another row follows.
__attribute__((target("avx2"))) static void resample_row_avx2(const uint8_t *src, int ow,
                                                              const int *x0, const float *wxe,
                                                              float *dst)
{
    const __m256i low_byte = _mm256_set1_epi32(0xFF);
    int ox = 0;
    for (; ox + 8 <= ow; ox += 8) {
        const int *a = x0 + ox;
        __m256i q0 = _mm256_setr_epi64x(load_u64(src + 3 * a[0]), load_u64(src + 3 * a[1]),
                                        load_u64(src + 3 * a[4]), load_u64(src + 3 * a[5]));
        __m256i q1 = _mm256_setr_epi64x(load_u64(src + 3 * a[2]), load_u64(src + 3 * a[3]),
                                        load_u64(src + 3 * a[6]), load_u64(src + 3 * a[7]));
        __m256i g0 = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(q0), _mm256_castsi256_ps(q1),
                                                           _MM_SHUFFLE(2, 0, 2, 0)));
        __m256i g1 = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(_mm256_srli_epi64(q0, 24)),
                                                           _mm256_castsi256_ps(_mm256_srli_epi64(q1, 24)),
                                                           _MM_SHUFFLE(2, 0, 2, 0)));
        __m256 f = _mm256_loadu_ps(wxe + ox);
        for (int ch = 0; ch < 3; ch++) {
            __m256 va = _mm256_cvtepi32_ps(_mm256_and_si256(g0, low_byte));
            __m256 vb = _mm256_cvtepi32_ps(_mm256_and_si256(g1, low_byte));
            _mm256_storeu_ps(dst + ch * ow + ox, _mm256_add_ps(va, _mm256_mul_ps(_mm256_sub_ps(vb, va), f)));
            g0 = _mm256_srli_epi32(g0, 8);
            g1 = _mm256_srli_epi32(g1, 8);
        }
    }
    for (; ox < ow; ox++) {
        const uint8_t *pa = src + x0[ox] * 3, *pb = pa + 3;
        float f = wxe[ox];
        dst[ox] = pa[0] + (pb[0] - pa[0]) * f;
        dst[ow + ox] = pa[1] + (pb[1] - pa[1]) * f;
        dst[2 * ow + ox] = pa[2] + (pb[2] - pa[2]) * f;
    }
}
#endif

bool augment_have_avx2(void)
{
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

static bool simd_allowed = true; // augment_set_simd: tests compare both paths

void augment_set_simd(bool allowed) { simd_allowed = allowed; }

// Whether augment_resample's AVX2 passes run: the CPU has AVX2 and no test turned them off.
static bool use_avx2(void) { return simd_allowed && augment_have_avx2(); }

// Source row y of src resampled horizontally: AVX2 where the CPU has it (and at least 5
// bytes of the buffer follow the row, see resample_row_avx2), else the scalar loop.
static void resample_source_row(const Image *src, int y, int ow, const int *x0, const int *x1,
                                const float *wx, const float *wxe, float *dst)
{
    size_t stride = (size_t)src->width * 3;
    const uint8_t *row = src->pixels + (size_t)y * stride;
#if defined(__x86_64__)
    if (use_avx2() && (size_t)(src->height - 1 - y) * stride >= 5) { // room for the overrun
        resample_row_avx2(row, ow, x0, wxe, dst);
        return;
    }
#endif
    resample_row(row, ow, x0, x1, wx, dst);
}

typedef float Float4 __attribute__((vector_size(16)));

// o = (t + (b - t) * fy) * scale + bias, four lanes at a time (GCC vector extension:
// -O2 does not vectorise this loop by itself, and it is a third of the augment time).
// (Non-temporal stores were tried here: measured slower on this suite's host.)
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

#if defined(__x86_64__)
// blend_rows eight lanes at a time: the same operations in the same order (no FMA), so
// the same bits.
__attribute__((target("avx2"))) static void blend_rows_avx2(const float *t, const float *b, float fy,
                                                            float scale, float bias, int n, float *o)
{
    __m256 vfy = _mm256_set1_ps(fy), vs = _mm256_set1_ps(scale), vb = _mm256_set1_ps(bias);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 vt = _mm256_loadu_ps(t + i), vbot = _mm256_loadu_ps(b + i);
        __m256 r = _mm256_add_ps(vt, _mm256_mul_ps(_mm256_sub_ps(vbot, vt), vfy));
        _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_mul_ps(r, vs), vb));
    }
    for (; i < n; i++) o[i] = (t[i] + (b[i] - t[i]) * fy) * scale + bias;
}
#endif

void augment_apply(const AugmentConfig *c, const Image *src, uint64_t seed, void *out)
{
    AugmentCrop crop = augment_choose_crop(c, src->width, src->height, seed);
    AugmentWindow win = {crop.x, crop.y, crop.width, crop.height};
    augment_resample(c, src, &win, crop.flip, out);
}

// Separable bilinear: each needed source row is resampled horizontally once (rows are
// shared by neighbouring output rows when upscaling), then rows are blended vertically
// and normalised in contiguous, vectorisable loops.
void augment_resample(const AugmentConfig *c, const Image *src, const AugmentWindow *win, bool flip,
                      void *out)
{
    static _Thread_local int x0[AUGMENT_MAX_SIDE], x1[AUGMENT_MAX_SIDE];
    static _Thread_local int y0[AUGMENT_MAX_SIDE], y1[AUGMENT_MAX_SIDE];
    static _Thread_local float wx[AUGMENT_MAX_SIDE], wy[AUGMENT_MAX_SIDE], wxe[AUGMENT_MAX_SIDE];
    static _Thread_local float rows[2][3 * AUGMENT_MAX_SIDE], blend[AUGMENT_MAX_SIDE];

    int ow = c->out_width, oh = c->out_height;
    axis_table(ow, win->x, win->width, src->width, x0, x1, wx);
    axis_table(oh, win->y, win->height, src->height, y0, y1, wy);
    if (flip)
        for (int a = 0, b = ow - 1; a < b; a++, b--) {
            int t = x0[a]; x0[a] = x0[b]; x0[b] = t;
            t = x1[a]; x1[a] = x1[b]; x1[b] = t;
            float w = wx[a]; wx[a] = wx[b]; wx[b] = w;
        }
    for (int o = 0; o < ow; o++) wxe[o] = x1[o] == x0[o] ? 0.0f : wx[o];
    float scale[3], bias[3];
    for (int ch = 0; ch < 3; ch++) {
        scale[ch] = 1.0f / (255.0f * c->std[ch]);
        bias[ch] = -c->mean[ch] / c->std[ch];
    }
    size_t plane = (size_t)oh * ow;
    bool avx2 = use_avx2();
    (void)avx2; // (used on x86-64 only)
    int cached[2] = {-1, -1}; // source row held in rows[0] / rows[1]
    for (int oy = 0; oy < oh; oy++) {
        int want0 = y0[oy], want1 = y1[oy];
        int i0 = cached[0] == want0 ? 0 : cached[1] == want0 ? 1 : -1;
        if (i0 < 0) {
            i0 = cached[0] == want1 ? 1 : 0; // keep the row needed next
            resample_source_row(src, want0, ow, x0, x1, wx, wxe, rows[i0]);
            cached[i0] = want0;
        }
        int i1 = cached[i0] == want1 ? i0 : cached[1 - i0] == want1 ? 1 - i0 : -1;
        if (i1 < 0) {
            i1 = 1 - i0;
            resample_source_row(src, want1, ow, x0, x1, wx, wxe, rows[i1]);
            cached[i1] = want1;
        }
        const float *r[2] = {rows[i0], rows[i1]};
        float fy = wy[oy];
        for (int ch = 0; ch < 3; ch++) {
            const float *t = r[0] + ch * ow, *b = r[1] + ch * ow;
            float sc = scale[ch], bi = bias[ch];
            size_t off = ch * plane + (size_t)oy * ow;
            float *o = c->dtype == AUGMENT_FLOAT32 ? (float *)out + off : blend;
#if defined(__x86_64__)
            if (avx2)
                blend_rows_avx2(t, b, fy, sc, bi, ow, o);
            else
#endif
                blend_rows(t, b, fy, sc, bi, ow, o);
            if (c->dtype == AUGMENT_FLOAT16) augment_floats_to_halves(blend, (uint16_t *)out + off, ow);
        }
    }
}
