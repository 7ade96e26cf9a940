// test_jpeg_fuzz.c: mutated JPEGs through the loader's per-sample path (jpeg_decode_file,
// then augment_apply, as loader_fill_slot does). A fixed-seed loop takes valid JPEGs
// (baseline 4:2:0 from our encoder; 4:4:4, 4:2:2, greyscale and progressive from
// TurboJPEG) and mutates them: bit flips, byte overwrites, truncation, removed and inserted
// bytes, and header field changes (frame size, component count, sampling factors, table
// values, segment lengths, marker codes). Every variant must be decoded (and augmented into
// finite, normalised values) or rejected with an error naming its file. Nothing may crash
// or trip a sanitizer (make test-sanitize runs this too), and nothing may allocate beyond
// a cap: the loop runs in a child process whose address space may grow by at most
// FUZZ_ADDRESS_SPACE_GROWTH, so an allocation sized from a lying header fails, and an
// out-of-memory rejection is reported as a failure, never counted as a clean rejection.
// Each variant also goes through sample_load (the loader's path: header, crop, region
// and DCT-scaled decode), which must accept and reject exactly the same files.
// JPEG_FUZZ_VARIANTS and JPEG_FUZZ_SEED in the environment change the count and the seed.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loaders/augment.h"
#include "loaders/jpeg.h"
#include "loaders/sample.h"
#include "kernels/rng.h"
#include "tests/loader_support.h"

#include <errno.h>
#include <math.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <turbojpeg.h>

#define FUZZ_DEFAULT_VARIANTS 3000
#define FUZZ_DEFAULT_SEED 20240614u
#define FUZZ_ADDRESS_SPACE_GROWTH (1024ull << 20)
#define FUZZ_MAX_SOURCES 8
#define FUZZ_MAX_SEGMENTS 32
#define FUZZ_CONTROL_EVERY 16 // decode an unmutated source this often: the decoder still works

// A valid JPEG to mutate, and its reference decode.
typedef struct {
    const char *kind;
    uint8_t *bytes;
    size_t size;
    Image ref;
} FuzzSource;

// One marker segment of a JPEG: its marker code, offset of the 0xFF and length field.
typedef struct {
    uint8_t marker;
    size_t at;
    size_t len; // the segment's length field (includes its own 2 bytes)
} Segment;

// Why variants were rejected, by the message's wording (jpeg.c's messages).
static const char *const reject_kinds[] = {
    "not a JPEG file", "corrupt JPEG header", "truncated JPEG (no frame header",
    "bad JPEG dimensions", "pixel limit", "truncated or corrupt JPEG data", "corrupt JPEG data",
};
#define REJECT_KINDS (sizeof reject_kinds / sizeof reject_kinds[0])

typedef struct {
    int64_t tried, decoded, rejected, controls;
    int64_t by_kind[REJECT_KINDS + 1]; // last: other wording
    int64_t inflated;                  // variants whose header claimed a huge frame
    int64_t max_pixel_bytes;           // largest pixel buffer the decoder grew to
    char failure[1024];                // empty when every variant behaved
} FuzzResult;

typedef struct {
    char *tmp;  // test_temp_dir's
    FuzzSource src[FUZZ_MAX_SOURCES];
    int nsrc;
} FuzzFixture;

static void fill_pixels(uint8_t *rgb, int w, int h, uint64_t seed)
{
    Rng r = rng_make(seed, 0xF022, 0);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) // smooth gradients plus noise: non-trivial DCT blocks
                rgb[((size_t)y * w + x) * 3 + c] =
                    (uint8_t)((x * 7 + y * 5 + c * 60) % 200 + rng_below(&r, 56));
}

// Encodes with TurboJPEG directly: the subsamplings and modes our encoder does not write.
static int add_tj_source(FuzzFixture *f, const char *kind, int w, int h, int subsamp, int flags,
                         int quality)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    tjhandle tj = tjInitCompress();
    unsigned char *out = NULL;
    unsigned long out_size = 0;
    int rc = rgb && tj ? 0 : -1;
    if (rc == 0) {
        fill_pixels(rgb, w, h, (uint64_t)f->nsrc);
        rc = tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &out, &out_size, subsamp, quality, flags);
    }
    if (rc == 0) {
        FuzzSource *s = &f->src[f->nsrc++];
        s->kind = kind;
        s->bytes = malloc(out_size);
        s->size = out_size;
        if (s->bytes) memcpy(s->bytes, out, out_size);
        else rc = -1;
    }
    tjFree(out);
    if (tj) tjDestroy(tj);
    free(rgb);
    return rc;
}

// Encodes through the project's encoder (what the dataset generator writes).
static int add_own_source(FuzzFixture *f, int w, int h, int quality)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    char path[128];
    snprintf(path, sizeof path, "%s/source.jpg", f->tmp);
    if (!rgb) return -1;
    fill_pixels(rgb, w, h, (uint64_t)f->nsrc);
    int rc = jpeg_write_file(path, rgb, w, h, quality);
    free(rgb);
    if (rc != 0) return -1;
    FuzzSource *s = &f->src[f->nsrc++];
    s->kind = "baseline 4:2:0 (jpeg_write_file)";
    s->bytes = (unsigned char *)test_read_file(path, &s->size);
    unlink(path);
    return s->bytes ? 0 : -1;
}

static int setup(void **state)
{
    FuzzFixture *f = calloc(1, sizeof *f);
    if (!f || !(f->tmp = test_temp_dir())) return -1;
    *state = f;
    if (add_own_source(f, 48, 40, 90) != 0 || add_own_source(f, 1, 1, 75) != 0 ||
        add_tj_source(f, "baseline 4:4:4", 17, 9, TJSAMP_444, 0, 80) != 0 ||
        add_tj_source(f, "baseline 4:2:2", 8, 70, TJSAMP_422, 0, 95) != 0 ||
        add_tj_source(f, "greyscale", 33, 20, TJSAMP_GRAY, 0, 85) != 0 ||
        add_tj_source(f, "progressive 4:2:0", 64, 48, TJSAMP_420, TJFLAG_PROGRESSIVE, 85) != 0)
        return -1;
    JpegDecoder *dec = jpeg_decoder_create();
    if (!dec) return -1;
    for (int i = 0; i < f->nsrc; i++)
        if (jpeg_decode_mem(dec, f->src[i].bytes, f->src[i].size, f->src[i].kind,
                            &f->src[i].ref) != 0) {
            fprintf(stderr, "fuzz source %s: %s\n", f->src[i].kind, error_message());
            jpeg_decoder_destroy(dec);
            return -1;
        }
    jpeg_decoder_destroy(dec);
    return 0;
}

static int teardown(void **state)
{
    FuzzFixture *f = *state;
    if (!f) return 0;
    for (int i = 0; i < f->nsrc; i++) {
        free(f->src[i].bytes);
        image_free(&f->src[i].ref);
    }
    test_remove_tree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

// The marker segments before the entropy-coded data (up to and including SOS).
static int find_segments(const uint8_t *d, size_t n, Segment *seg)
{
    int count = 0;
    size_t i = 2;
    while (i + 4 <= n && d[i] == 0xFF && count < FUZZ_MAX_SEGMENTS) {
        uint8_t m = d[i + 1];
        size_t len = ((size_t)d[i + 2] << 8) | d[i + 3];
        seg[count++] = (Segment){m, i, len};
        if (m == 0xDA) break;
        i += 2 + len;
    }
    return count;
}

static int pick_segment(const Segment *seg, int count, Rng *r, int (*want)(uint8_t))
{
    int idx[FUZZ_MAX_SEGMENTS], n = 0;
    for (int i = 0; i < count; i++)
        if (want(seg[i].marker)) idx[n++] = i;
    return n ? idx[rng_below(r, n)] : -1;
}

static int is_sof(uint8_t m) { return m == 0xC0 || m == 0xC1 || m == 0xC2; }
static int is_table(uint8_t m) { return m == 0xDB || m == 0xC4; }
static int is_sos(uint8_t m) { return m == 0xDA; }
static int is_any(uint8_t m) { return m != 0; }

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

// Applies one mutation to buf (size *n, capacity cap); returns a short name of what it did.
// Sets *inflated when it made the frame header claim a huge image.
static const char *mutate(uint8_t *buf, size_t *n, size_t cap, Rng *r, int *inflated)
{
    static const uint8_t interesting[] = {0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF};
    Segment seg[FUZZ_MAX_SEGMENTS];
    int nseg = find_segments(buf, *n, seg);
    switch (rng_below(r, 12)) {
    case 0: { // bit flips anywhere
        int flips = 1 + (int)rng_below(r, 8);
        for (int i = 0; i < flips; i++) buf[rng_below(r, (int64_t)*n)] ^= (uint8_t)(1u << rng_below(r, 8));
        return "bitflip";
    }
    case 1: { // bytes overwritten with boundary values
        int count = 1 + (int)rng_below(r, 4);
        for (int i = 0; i < count; i++)
            buf[rng_below(r, (int64_t)*n)] = interesting[rng_below(r, sizeof interesting)];
        return "overwrite";
    }
    case 2: // truncation, anywhere from the SOI marker on
        *n = 1 + (size_t)rng_below(r, (int64_t)*n - 1);
        return "truncate";
    case 3: { // a range removed
        size_t at = (size_t)rng_below(r, (int64_t)*n);
        size_t len = 1 + (size_t)rng_below(r, 32);
        if (at + len > *n) len = *n - at;
        memmove(buf + at, buf + at + len, *n - at - len);
        *n -= len;
        return "delete";
    }
    case 4: { // a range duplicated in place (repeated markers, tables, scan data)
        size_t at = (size_t)rng_below(r, (int64_t)*n);
        size_t len = 1 + (size_t)rng_below(r, 64);
        if (at + len > *n) len = *n - at;
        if (*n + len > cap) return "noop";
        memmove(buf + at + len, buf + at, *n - at);
        *n += len;
        return "duplicate";
    }
    case 5: { // frame size: small changes, zero, or one side up to 4096
        int s = pick_segment(seg, nseg, r, is_sof);
        if (s < 0 || seg[s].at + 9 > *n) return "noop";
        uint8_t *p = buf + seg[s].at + 5 + 2 * rng_below(r, 2); // height or width
        unsigned v = ((unsigned)p[0] << 8) | p[1];
        switch (rng_below(r, 3)) {
        case 0: v = (unsigned)((int)v + (int)rng_below(r, 33) - 16) & 0xFFFF; break;
        case 1: v = 0; break;
        default: v = 1 + (unsigned)rng_below(r, 4096); break;
        }
        put16(p, v);
        return "frame-size";
    }
    case 6: { // frame size inflated: a "decompression bomb" header over small data
        int s = pick_segment(seg, nseg, r, is_sof);
        if (s < 0 || seg[s].at + 9 > *n) return "noop";
        static const unsigned huge[] = {65500, 65535, 50000, 40000, 30000, 20000};
        put16(buf + seg[s].at + 5, huge[rng_below(r, 6)]);
        put16(buf + seg[s].at + 7, huge[rng_below(r, 6)]);
        *inflated = 1;
        return "frame-inflate";
    }
    case 7: { // frame components: count, sampling factors, table selectors, precision
        int s = pick_segment(seg, nseg, r, is_sof);
        if (s < 0) return "noop";
        size_t field = seg[s].at + 4 + (size_t)rng_below(r, seg[s].len > 2 ? (int64_t)seg[s].len - 2 : 1);
        if (field >= *n) return "noop";
        if (field == seg[s].at + 4) buf[field] = (uint8_t)(rng_below(r, 2) ? 12 : rng_below(r, 17));
        else buf[field] = rng_below(r, 2) ? interesting[rng_below(r, sizeof interesting)]
                                          : (uint8_t)rng_next(r);
        return "frame-fields";
    }
    case 8: { // quantisation or Huffman table contents
        int s = pick_segment(seg, nseg, r, is_table);
        if (s < 0 || seg[s].len < 3) return "noop";
        size_t field = seg[s].at + 4 + (size_t)rng_below(r, (int64_t)seg[s].len - 2);
        if (field >= *n) return "noop";
        buf[field] = rng_below(r, 2) ? interesting[rng_below(r, sizeof interesting)] : (uint8_t)rng_next(r);
        return "table";
    }
    case 9: { // scan header: components, selectors, spectral selection, approximation
        int s = pick_segment(seg, nseg, r, is_sos);
        if (s < 0 || seg[s].len < 3) return "noop";
        size_t field = seg[s].at + 4 + (size_t)rng_below(r, (int64_t)seg[s].len - 2);
        if (field >= *n) return "noop";
        buf[field] = rng_below(r, 2) ? interesting[rng_below(r, sizeof interesting)] : (uint8_t)rng_next(r);
        return "scan-header";
    }
    case 10: { // a segment length field lies
        int s = pick_segment(seg, nseg, r, is_any);
        if (s < 0 || seg[s].at + 4 > *n) return "noop";
        static const unsigned lens[] = {0, 1, 2, 3, 0xFFFF, 0x8000};
        unsigned v = rng_below(r, 2) ? lens[rng_below(r, 6)]
                                     : (unsigned)((int)seg[s].len + (int)rng_below(r, 9) - 4) & 0xFFFF;
        put16(buf + seg[s].at + 2, v);
        return "segment-length";
    }
    default: { // a marker turned into another (SOF2 <-> SOF0, DHT -> DAC, APP, EOI...)
        int s = pick_segment(seg, nseg, r, is_any);
        if (s < 0) return "noop";
        static const uint8_t markers[] = {0xC0, 0xC1, 0xC2, 0xC3, 0xC4, 0xC9, 0xCC, 0xD9,
                                          0xDA, 0xDB, 0xDD, 0xE0, 0xEE, 0xFE, 0x00, 0xFF};
        buf[seg[s].at + 1] = markers[rng_below(r, sizeof markers)];
        return "marker";
    }
    }
}

// Checks one augmented sample: every value finite and within the normalised range
// [(0 - mean) / std, (1 - mean) / std] (a little slack for fp16 rounding).
static int sample_ok(const AugmentConfig *cfg, const void *out)
{
    size_t plane = (size_t)cfg->out_height * cfg->out_width;
    for (int ch = 0; ch < 3; ch++) {
        float lo = (0.0f - cfg->mean[ch]) / cfg->std[ch] - 0.01f;
        float hi = (1.0f - cfg->mean[ch]) / cfg->std[ch] + 0.01f;
        for (size_t i = 0; i < plane; i++) {
            size_t k = ch * plane + i;
            float v = cfg->dtype == AUGMENT_FLOAT32 ? ((const float *)out)[k]
                                                   : augment_half_to_float(((const uint16_t *)out)[k]);
            if (!isfinite(v) || v < lo || v > hi) return 0;
        }
    }
    return 1;
}

static void record_rejection(FuzzResult *res, const char *msg)
{
    for (size_t k = 0; k < REJECT_KINDS; k++)
        if (strstr(msg, reject_kinds[k])) {
            res->by_kind[k]++;
            return;
        }
    res->by_kind[REJECT_KINDS]++;
}

// The fuzz loop; fills res (res->failure names the first misbehaving variant).
static void fuzz_run(const FuzzFixture *f, int64_t variants, uint64_t seed, FuzzResult *res)
{
    memset(res, 0, sizeof *res);
    size_t cap = 0;
    for (int i = 0; i < f->nsrc; i++) cap = f->src[i].size > cap ? f->src[i].size : cap;
    cap = cap * 2 + 1024;
    uint8_t *buf = malloc(cap);
    void *out = malloc(augment_sample_bytes(&(AugmentConfig){.out_height = 24, .out_width = 24,
                                                             .dtype = AUGMENT_FLOAT32}));
    JpegDecoder *dec = jpeg_decoder_create(); // one decoder for all, as a loader worker has
    Image img = {0}, sample_img = {0};
    char path[128], ops[128];
    if (!buf || !out || !dec) {
        snprintf(res->failure, sizeof res->failure, "setup: out of memory or no decoder: %s",
                 error_message());
        goto done;
    }
    for (int64_t v = 0; v < variants; v++) {
        if (v % FUZZ_CONTROL_EVERY == 0) { // bad input must not poison the next good file
            const FuzzSource *ctl = &f->src[v / FUZZ_CONTROL_EVERY % f->nsrc];
            res->controls++;
            if (jpeg_decode_mem(dec, ctl->bytes, ctl->size, ctl->kind, &img) != 0 ||
                img.width != ctl->ref.width || img.height != ctl->ref.height ||
                memcmp(img.pixels, ctl->ref.pixels, (size_t)img.width * img.height * 3) != 0) {
                snprintf(res->failure, sizeof res->failure, "before variant %lld the unmutated "
                         "%s no longer decodes to the same pixels: %s", (long long)v, ctl->kind,
                         error_message());
                goto done;
            }
        }
        Rng r = rng_make(seed, 0xF0220, (uint64_t)v);
        const FuzzSource *src = &f->src[rng_below(&r, f->nsrc)];
        memcpy(buf, src->bytes, src->size);
        size_t n = src->size;
        int inflated = 0, nops = 1 + (rng_below(&r, 4) == 0) + (rng_below(&r, 8) == 0);
        ops[0] = '\0';
        for (int k = 0; k < nops && n > 2; k++) {
            size_t used = strlen(ops);
            snprintf(ops + used, sizeof ops - used, "%s%s", k ? "+" : "",
                     mutate(buf, &n, cap, &r, &inflated));
        }
        snprintf(path, sizeof path, "%s/variant_%06lld.jpg", f->tmp, (long long)v);
        if (testutil_write(path, buf, n) != 0) {
            snprintf(res->failure, sizeof res->failure, "cannot write %s", path);
            goto done;
        }
        res->tried++;
        res->inflated += inflated;
        error_clear();
        int rc = jpeg_decode_file(dec, path, &img); // a whole decode
        // The loader's own path (sample_load: header, crop, region decode, DCT-scaled
        // for the small output) must accept and reject exactly the same files.
        ErrorKind whole_kind = error_kind();
        char whole_msg[1024];
        snprintf(whole_msg, sizeof whole_msg, "%s", error_message());
        Rng sr = rng_make(seed, 0x5A3F1E, (uint64_t)v);
        AugmentConfig scfg = augment_default_config(rng_below(&sr, 2) ? 24 : 4);
        error_clear();
        int sample_rc = sample_load(dec, path, &scfg, rng_next(&sr), &sample_img, out);
        if (sample_rc != rc || (sample_rc != 0 && !strstr(error_message(), path)) ||
            (sample_rc == 0 && !sample_ok(&scfg, out))) {
            snprintf(res->failure, sizeof res->failure, "variant %lld (%s of %s): a whole decode "
                     "says '%.300s' (rc %d), sample_load says '%.300s' (rc %d)", (long long)v, ops,
                     src->kind, rc ? whole_msg : "ok", rc, sample_rc ? error_message() : "ok",
                     sample_rc);
            unlink(path);
            goto done;
        }
        error_restore(whole_kind, whole_msg);
        unlink(path);
        if ((int64_t)img.capacity > res->max_pixel_bytes) res->max_pixel_bytes = (int64_t)img.capacity;
        const char *msg = error_message();
        if (rc != 0) {
            res->rejected++;
            record_rejection(res, msg);
            if (!strstr(msg, path))
                snprintf(res->failure, sizeof res->failure,
                         "variant %lld (%s of %s) rejected without naming its file: '%s'",
                         (long long)v, ops, src->kind, msg);
            else if (strstr(msg, "out of memory") || strstr(msg, "Insufficient memory"))
                snprintf(res->failure, sizeof res->failure,
                         "variant %lld (%s of %s, %zu bytes) made the decoder allocate more "
                         "than the %llu MiB this loop may grow by: %s",
                         (long long)v, ops, src->kind, n, FUZZ_ADDRESS_SPACE_GROWTH >> 20, msg);
            if (res->failure[0]) goto done;
            continue;
        }
        res->decoded++;
        if (img.width <= 0 || img.height <= 0 || img.capacity < (size_t)img.width * img.height * 3) {
            snprintf(res->failure, sizeof res->failure, "variant %lld (%s of %s) decoded to a "
                     "%dx%d image in a %zu-byte buffer", (long long)v, ops, src->kind,
                     img.width, img.height, img.capacity);
            goto done;
        }
        // then the loader's augmentation, in training and in evaluation form, fp32 and fp16
        AugmentConfig cfg = augment_default_config(rng_below(&r, 2) ? 24 : 7);
        cfg.random_crop = rng_below(&r, 4) != 0;
        cfg.dtype = rng_below(&r, 2) ? AUGMENT_FLOAT32 : AUGMENT_FLOAT16;
        augment_apply(&cfg, &img, rng_next(&r), out);
        if (!sample_ok(&cfg, out)) {
            snprintf(res->failure, sizeof res->failure, "variant %lld (%s of %s, %dx%d) "
                     "augmented into values that are not finite or not normalised",
                     (long long)v, ops, src->kind, img.width, img.height);
            goto done;
        }
    }
done:
    image_free(&img);
    image_free(&sample_img);
    jpeg_decoder_destroy(dec);
    free(out);
    free(buf);
}

// Caps this process's address space at its current size plus `growth` bytes. 0 or -1.
static int limit_address_space_growth(unsigned long long growth)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    int ok = f && fscanf(f, "%llu", &pages) == 1;
    if (f) fclose(f);
    if (!ok) return -1;
    unsigned long long now = pages * (unsigned long long)sysconf(_SC_PAGESIZE);
    struct rlimit rl = {(rlim_t)(now + growth), (rlim_t)(now + growth)};
    return setrlimit(RLIMIT_AS, &rl);
}

static int64_t env_count(const char *name, int64_t fallback)
{
    const char *s = getenv(name);
    char *end;
    long long v = s && *s ? strtoll(s, &end, 10) : -1;
    return s && *s && !*end && v > 0 ? (int64_t)v : fallback;
}

static void test_mutated_jpegs_are_decoded_or_rejected(void **state)
{
    FuzzFixture *f = *state;
    int64_t variants = env_count("JPEG_FUZZ_VARIANTS", FUZZ_DEFAULT_VARIANTS);
    uint64_t seed = (uint64_t)env_count("JPEG_FUZZ_SEED", FUZZ_DEFAULT_SEED);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { // the loop, with its address space capped
        close(fds[0]);
        FuzzResult res;
        if (limit_address_space_growth(FUZZ_ADDRESS_SPACE_GROWTH) != 0) {
            memset(&res, 0, sizeof res);
            snprintf(res.failure, sizeof res.failure, "cannot cap the address space: %s",
                     strerror(errno));
        } else {
            fuzz_run(f, variants, seed, &res);
        }
        ssize_t w = write(fds[1], &res, sizeof res);
        close(fds[1]);
        exit(w == (ssize_t)sizeof res && !res.failure[0] ? 0 : 1); // exit: LeakSanitizer checks the child
    }
    close(fds[1]);
    FuzzResult res;
    ssize_t got = read(fds[0], &res, sizeof res);
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("the fuzz loop died of signal %d (seed %llu): a crash in decode or augment",
                 WTERMSIG(status), (unsigned long long)seed);
    if (got != (ssize_t)sizeof res) fail_msg("the fuzz loop exited (status %d) without a result",
                                             WEXITSTATUS(status));
    printf("fuzz: %lld variants tried, %lld decoded, %lld rejected (seed %llu; %lld with an "
           "inflated frame header; %lld control decodes; largest pixel buffer %lld bytes)\n",
           (long long)res.tried, (long long)res.decoded, (long long)res.rejected,
           (unsigned long long)seed, (long long)res.inflated, (long long)res.controls,
           (long long)res.max_pixel_bytes);
    for (size_t k = 0; k <= REJECT_KINDS; k++)
        if (res.by_kind[k])
            printf("fuzz:   rejected as '%s': %lld\n", k < REJECT_KINDS ? reject_kinds[k] : "(other)",
                   (long long)res.by_kind[k]);
    if (res.failure[0]) fail_msg("%s (seed %llu)", res.failure, (unsigned long long)seed);
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(res.tried, variants);
    assert_int_equal(res.decoded + res.rejected, res.tried);
    assert_true(res.decoded > 0 && res.rejected > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutated_jpegs_are_decoded_or_rejected),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
