// dataset.h: ImageFolder datasets (root/<class>/*.jpg), what users have, scanned once.
// Classes are the sub-folders of root in byte-wise sorted order; label = class index.
// Files are picked by extension (.jpg/.jpeg, any case), like torchvision's ImageFolder.
// dataset_split makes a deterministic, stratified train / held-out split of a scan.
#ifndef LOADERS_DATASET_H
#define LOADERS_DATASET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char *root;
    int num_classes;
    char **class_names;  // [num_classes], sorted
    int64_t num_samples;
    char **paths;        // [num_samples], full paths, class by class, sorted within class
    int32_t *labels;     // [num_samples]
} Dataset;

// Scans root into ds. Errors (missing root, no class folders, a class folder without
// JPEG files) name the folder at fault. 0 or -1; on -1 ds is left empty.
int dataset_scan(const char *root, Dataset *ds);
// Splits ds class by class into train and heldout (each a full copy that dataset_free
// releases): round(heldout_fraction * n) files of each class with n >= 2 files, at
// least 1 and at most n - 1, picked by a shuffle seeded from (seed, class); both keep
// ds's order. Fails when the fraction is not in (0, 1) or no file can be held out.
int dataset_split(const Dataset *ds, double heldout_fraction, uint64_t seed, Dataset *train,
                  Dataset *heldout);
// Frees everything dataset_scan (or dataset_split) allocated.
void dataset_free(Dataset *ds);

#ifdef __cplusplus
}
#endif
#endif
