// dataset_gen.h: a deterministic, learnable synthetic image-classification dataset,
// written as real JPEGs in ImageFolder layout so `make bench` needs no download.
// Each class is a (shape, colour, stripe texture) combination drawn at a random place
// and size over a random background with pixel noise; unique for up to 120 classes.
#ifndef LOADERS_DATASET_GEN_H
#define LOADERS_DATASET_GEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int num_classes;       // 1..120
    int images_per_class;
    int width, height;     // pixels of every generated JPEG
    int quality;           // JPEG quality 1..100
    uint64_t seed;
} DatasetGenConfig;

// Named presets: "tiny" (tests), "small", "bench" (make bench default: 160x160 sources),
// "large", "imagenet" (1000 sources of 500x375, ImageNet's typical size, for 224 output:
// where cropped and DCT-scaled decode matter most). 0 or -1.
int dataset_gen_preset(const char *name, DatasetGenConfig *cfg);
// Renders image `index` of class `label` as RGB (H, W, 3) into rgb.
void dataset_gen_render(const DatasetGenConfig *cfg, int label, int index, uint8_t *rgb);
// Writes the dataset to root/class_XXX/img_XXXXX.jpg; root must not exist yet. The tree
// is built in a temporary sibling and renamed into place, so a crash leaves no half
// dataset at root. 0 or -1.
int dataset_generate(const DatasetGenConfig *cfg, const char *root);
// Makes sure the dataset for cfg exists under cache_dir (generating it on first use,
// named by its config) and writes its root path to root_out. 0 or -1.
int dataset_gen_ensure(const DatasetGenConfig *cfg, const char *cache_dir, char *root_out,
                       size_t root_size);

#ifdef __cplusplus
}
#endif
#endif
