// dataset.h: ImageFolder datasets (root/<class>/*.jpg), what users have, scanned once.
// Classes are the sub-folders of root in byte-wise sorted order; label = class index.
// Files are picked by extension (.jpg/.jpeg, any case), like torchvision's ImageFolder.
// A name that matches but is not a regular file (a FIFO, a socket, a device, a dangling
// symbolic link) is kept, marked in `kinds` and counted, never opened: the loader treats
// it as bad input (an error naming it, or skipped and counted with skip_bad_files).
// dataset_split makes a deterministic, stratified train / held-out split of a scan.
#ifndef LOADERS_DATASET_H
#define LOADERS_DATASET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// What a file named .jpg/.jpeg is, as the scan found it (stat, links followed).
typedef enum {
    DATASET_FILE_REGULAR = 0,
    DATASET_FILE_FIFO,
    DATASET_FILE_SOCKET,
    DATASET_FILE_DEVICE,          // a character or block device
    DATASET_FILE_DANGLING_LINK,   // a symbolic link whose target does not exist (or loops)
    DATASET_FILE_UNREADABLE,      // stat failed for another reason (permissions...)
} DatasetFileKind;

typedef struct {
    char *root;
    int num_classes;
    char **class_names;  // [num_classes], sorted
    int64_t num_samples;
    char **paths;        // [num_samples], full paths, class by class, sorted within class
    int32_t *labels;     // [num_samples]
    uint8_t *kinds;      // [num_samples] DatasetFileKind; NULL: every file is regular
    int64_t num_irregular; // files whose kind is not DATASET_FILE_REGULAR
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
// "a FIFO", "a socket", ... for messages.
const char *dataset_file_kind_name(DatasetFileKind kind);
// The kind of file i (DATASET_FILE_REGULAR when ds->kinds is NULL).
static inline DatasetFileKind dataset_file_kind(const Dataset *ds, int64_t i)
{
    return ds->kinds ? (DatasetFileKind)ds->kinds[i] : DATASET_FILE_REGULAR;
}
// One line for a scan summary: "ROOT: C classes, N files", and when some are not regular
// files, how many and which (the first few, as class/name (what it is)). Truncated to size.
void dataset_summary(const Dataset *ds, char *buf, size_t size);
// Frees everything dataset_scan (or dataset_split) allocated.
void dataset_free(Dataset *ds);

#ifdef __cplusplus
}
#endif
#endif
