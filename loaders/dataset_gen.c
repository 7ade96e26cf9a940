// dataset_gen.c: rendering and writing the synthetic ImageFolder dataset.
#include "loaders/dataset_gen.h"

#include "kernels/error.h"
#include "loaders/jpeg.h"
#include "kernels/rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SHAPE_DISC, SHAPE_SQUARE, SHAPE_TRIANGLE, SHAPE_RING, SHAPE_CROSS, SHAPE_COUNT };
enum { PALETTE_SIZE = 8, MAX_CLASSES = SHAPE_COUNT * PALETTE_SIZE * 3 };

static const uint8_t palette[PALETTE_SIZE][3] = {
    {220, 40, 40}, {40, 200, 60}, {50, 80, 230}, {230, 220, 40},
    {210, 50, 210}, {40, 210, 220}, {240, 140, 30}, {235, 235, 235},
};

int dataset_gen_preset(const char *name, DatasetGenConfig *cfg)
{
    static const struct {
        const char *name;
        DatasetGenConfig cfg;
    } presets[] = {
        {"tiny", {4, 6, 48, 40, 90, 1234}},
        {"small", {10, 30, 64, 64, 90, 1234}},
        {"bench", {10, 200, 160, 160, 90, 1234}},
        {"large", {100, 300, 256, 256, 90, 1234}},
        {"imagenet", {10, 100, 500, 375, 90, 1234}}, // ImageNet's typical source size
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) {
            *cfg = presets[i].cfg;
            return 0;
        }
    return error_set(ERROR_BAD_USAGE, "dataset_gen: unknown preset '%s' (tiny, small, bench, large, imagenet)", name);
}

static int inside(int shape, double dx, double dy, double r)
{
    double d = sqrt(dx * dx + dy * dy);
    switch (shape) {
    case SHAPE_DISC: return d < r;
    case SHAPE_SQUARE: return fabs(dx) < 0.8 * r && fabs(dy) < 0.8 * r;
    case SHAPE_TRIANGLE: return dy < 0.7 * r && dy > -r && fabs(dx) < (dy + r) * 0.6;
    case SHAPE_RING: return d < r && d > 0.55 * r;
    default: return (fabs(dx) < 0.3 * r && fabs(dy) < r) || (fabs(dy) < 0.3 * r && fabs(dx) < r);
    }
}

void dataset_gen_render(const DatasetGenConfig *cfg, int label, int index, uint8_t *rgb)
{
    Rng r = rng_make(cfg->seed, (uint64_t)label, (uint64_t)index);
    int w = cfg->width, h = cfg->height;
    int shape = label % SHAPE_COUNT;
    int colour = (3 * label) % PALETTE_SIZE;
    int texture = (label / (SHAPE_COUNT * PALETTE_SIZE)) % 3; // 0 plain, 1/2 stripes
    uint8_t bg[3], fg[3];
    for (int c = 0; c < 3; c++) {
        bg[c] = (uint8_t)(20 + rng_below(&r, 100));
        int v = palette[colour][c] + (int)rng_below(&r, 51) - 25;
        fg[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    double side = w < h ? w : h;
    double rad = side * (0.18 + 0.2 * rng_uniform(&r));
    double cx = rad * 0.6 + (w - 1.2 * rad) * rng_uniform(&r);
    double cy = rad * 0.6 + (h - 1.2 * rad) * rng_uniform(&r);
    int period = 3 + (int)rng_below(&r, 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int in = inside(shape, x - cx, y - cy, rad);
            if (in && texture == 1 && (y / period) % 2) in = 0;
            if (in && texture == 2 && (x / period) % 2) in = 0;
            const uint8_t *base = in ? fg : bg;
            for (int c = 0; c < 3; c++) {
                int v = base[c] + (int)rng_below(&r, 41) - 20;
                rgb[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

static int check_config(const DatasetGenConfig *cfg)
{
    if (cfg->num_classes < 1 || cfg->num_classes > MAX_CLASSES)
        return error_set(ERROR_BAD_USAGE, "dataset_gen: num_classes %d out of range 1..%d", cfg->num_classes,
                            MAX_CLASSES);
    if (cfg->images_per_class < 1 || cfg->width < 8 || cfg->height < 8 || cfg->width > 4096 ||
        cfg->height > 4096 || cfg->quality < 1 || cfg->quality > 100)
        return error_set(ERROR_BAD_USAGE, "dataset_gen: bad config (%d images/class, %dx%d, quality %d)",
                            cfg->images_per_class, cfg->width, cfg->height, cfg->quality);
    return 0;
}

static int remove_tree(const char *dir, int num_classes)
{
    char path[4096];
    for (int c = 0; c < num_classes; c++) {
        snprintf(path, sizeof path, "%s/class_%03d", dir, c);
        char cmd_path[4200];
        for (int i = 0;; i++) {
            snprintf(cmd_path, sizeof cmd_path, "%s/img_%05d.jpg", path, i);
            if (unlink(cmd_path) != 0) break;
        }
        rmdir(path);
    }
    return rmdir(dir);
}

int dataset_generate(const DatasetGenConfig *cfg, const char *root)
{
    if (check_config(cfg) != 0) return -1;
    struct stat sb;
    if (stat(root, &sb) == 0) return error_set(ERROR_IO, "dataset_gen: '%s' already exists", root);
    char tmp[4096], path[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", root, (int)getpid());
    if (mkdir(tmp, 0755) != 0)
        return error_set(ERROR_IO, "dataset_gen: cannot create '%s': %s", tmp, strerror(errno));
    uint8_t *rgb = malloc((size_t)cfg->width * cfg->height * 3);
    if (!rgb) {
        rmdir(tmp);
        return error_set(ERROR_OUT_OF_MEMORY, "dataset_gen: out of memory");
    }
    for (int c = 0; c < cfg->num_classes; c++) {
        snprintf(path, sizeof path, "%s/class_%03d", tmp, c);
        if (mkdir(path, 0755) != 0) {
            error_set(ERROR_IO, "dataset_gen: cannot create '%s': %s", path, strerror(errno));
            goto fail;
        }
        for (int i = 0; i < cfg->images_per_class; i++) {
            dataset_gen_render(cfg, c, i, rgb);
            snprintf(path, sizeof path, "%s/class_%03d/img_%05d.jpg", tmp, c, i);
            if (jpeg_write_file(path, rgb, cfg->width, cfg->height, cfg->quality) != 0)
                goto fail;
        }
    }
    free(rgb);
    if (rename(tmp, root) != 0) {
        int e = errno;
        remove_tree(tmp, cfg->num_classes);
        // Someone else finished the same dataset first: theirs is identical.
        if ((e == ENOTEMPTY || e == EEXIST) && stat(root, &sb) == 0) return 0;
        return error_set(ERROR_IO, "dataset_gen: cannot rename '%s' to '%s': %s", tmp, root,
                            strerror(e));
    }
    return 0;
fail:
    free(rgb);
    remove_tree(tmp, cfg->num_classes);
    return -1;
}

static int mkdir_p(const char *dir)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return error_set(ERROR_IO, "dataset_gen: cannot create '%s': %s", buf, strerror(errno));
            *p = '/';
        }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return error_set(ERROR_IO, "dataset_gen: cannot create '%s': %s", buf, strerror(errno));
    return 0;
}

int dataset_gen_ensure(const DatasetGenConfig *cfg, const char *cache_dir, char *root_out,
                       size_t root_size)
{
    if (check_config(cfg) != 0) return -1;
    int n = snprintf(root_out, root_size, "%s/synth-c%d-n%d-%dx%d-q%d-s%llu", cache_dir,
                     cfg->num_classes, cfg->images_per_class, cfg->width, cfg->height,
                     cfg->quality, (unsigned long long)cfg->seed);
    if (n < 0 || (size_t)n >= root_size) return error_set(ERROR_IO, "dataset_gen: path too long");
    struct stat sb;
    if (stat(root_out, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
    if (mkdir_p(cache_dir) != 0) return -1;
    return dataset_generate(cfg, root_out);
}
