// dataset.c: scanning an ImageFolder directory tree into a file list with labels, and
// splitting such a list into train and held-out parts.
#include "loaders/dataset.h"

#include "kernels/error.h"
#include "kernels/rng.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct {
    char *name;
    uint8_t kind; // DatasetFileKind (files only)
} NameEntry;

typedef struct {
    NameEntry *items;
    int64_t count, cap;
} NameList;

static int list_push(NameList *l, const char *s, DatasetFileKind kind)
{
    if (l->count == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        NameEntry *p = realloc(l->items, (size_t)cap * sizeof *p);
        if (!p) return error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
        l->items = p;
        l->cap = cap;
    }
    l->items[l->count].name = strdup(s);
    l->items[l->count].kind = (uint8_t)kind;
    if (!l->items[l->count].name) return error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
    l->count++;
    return 0;
}

static void list_clear(NameList *l)
{
    for (int64_t i = 0; i < l->count; i++) free(l->items[i].name);
    l->count = 0;
}

static void list_free(NameList *l)
{
    list_clear(l);
    free(l->items);
    memset(l, 0, sizeof *l);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const NameEntry *)a)->name, ((const NameEntry *)b)->name);
}

static int is_jpeg_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

static char *join_path(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

const char *dataset_file_kind_name(DatasetFileKind kind)
{
    switch (kind) {
    case DATASET_FILE_REGULAR: return "a regular file";
    case DATASET_FILE_FIFO: return "a FIFO";
    case DATASET_FILE_SOCKET: return "a socket";
    case DATASET_FILE_DEVICE: return "a device";
    case DATASET_FILE_DANGLING_LINK: return "a dangling symbolic link";
    case DATASET_FILE_UNREADABLE: return "a file that cannot be examined";
    }
    return "an unknown kind of file";
}

// What a directory entry named .jpg/.jpeg is; -1 when it is to be left out (a folder,
// or an entry that vanished since readdir). stat only: nothing is opened (a FIFO blocks).
static int file_kind(const char *full)
{
    struct stat sb;
    if (stat(full, &sb) == 0) {
        if (S_ISREG(sb.st_mode)) return DATASET_FILE_REGULAR;
        if (S_ISDIR(sb.st_mode)) return -1;
        if (S_ISFIFO(sb.st_mode)) return DATASET_FILE_FIFO;
        if (S_ISSOCK(sb.st_mode)) return DATASET_FILE_SOCKET;
        return DATASET_FILE_DEVICE;
    }
    int e = errno;
    if (lstat(full, &sb) != 0) return -1; // gone since readdir
    if (S_ISLNK(sb.st_mode) && (e == ENOENT || e == ELOOP || e == ENOTDIR))
        return DATASET_FILE_DANGLING_LINK;
    return DATASET_FILE_UNREADABLE;
}

// Lists entries of dir (skipping dot-files), sorted: folders (want_dirs), or everything
// else named .jpg/.jpeg with its kind (regular files and the rest, see file_kind).
static int list_dir(const char *dir, int want_dirs, NameList *out)
{
    DIR *d = opendir(dir);
    if (!d) return error_set(ERROR_IO, "dataset: cannot open folder '%s': %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (!want_dirs && !is_jpeg_name(e->d_name)) continue;
        char *full = join_path(dir, e->d_name);
        if (!full) {
            closedir(d);
            return error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
        }
        int kind;
        if (want_dirs) {
            struct stat sb;
            kind = stat(full, &sb) == 0 && S_ISDIR(sb.st_mode) ? DATASET_FILE_REGULAR : -1;
        } else {
            kind = file_kind(full);
        }
        free(full);
        if (kind >= 0 && list_push(out, e->d_name, (DatasetFileKind)kind) != 0) {
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    // An empty folder leaves items NULL, and qsort's array must not be NULL even for 0 items.
    if (out->count > 1) qsort(out->items, (size_t)out->count, sizeof *out->items, cmp_entry);
    return 0;
}

void dataset_free(Dataset *ds)
{
    for (int i = 0; i < ds->num_classes; i++) free(ds->class_names[i]);
    for (int64_t i = 0; i < ds->num_samples; i++) free(ds->paths[i]);
    free(ds->class_names);
    free(ds->paths);
    free(ds->labels);
    free(ds->kinds);
    free(ds->root);
    memset(ds, 0, sizeof *ds);
}

int dataset_scan(const char *root, Dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    struct stat sb;
    if (stat(root, &sb) != 0)
        return error_set(ERROR_IO, "dataset: root '%s' does not exist: %s", root, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return error_set(ERROR_IO, "dataset: root '%s' is not a folder", root);

    NameList classes = {0}, files = {0};
    int64_t total = 0, cap = 0;
    if (list_dir(root, 1, &classes) != 0) goto fail;
    if (classes.count == 0) {
        error_set(ERROR_BAD_DATA, "dataset: root '%s' has no class folders (expected root/<class>/*.jpg)",
                     root);
        goto fail;
    }
    ds->root = strdup(root);
    ds->class_names = calloc((size_t)classes.count, sizeof *ds->class_names);
    if (!ds->root || !ds->class_names) {
        error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
        goto fail;
    }
    for (int64_t c = 0; c < classes.count; c++) {
        ds->class_names[c] = strdup(classes.items[c].name);
        ds->num_classes++;
        char *dir = join_path(root, classes.items[c].name);
        if (!ds->class_names[c] || !dir) {
            free(dir);
            error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
            goto fail;
        }
        list_clear(&files);
        if (list_dir(dir, 0, &files) != 0) {
            free(dir);
            goto fail;
        }
        if (files.count == 0) {
            error_set(ERROR_BAD_DATA, "dataset: class folder '%s' has no .jpg/.jpeg files", dir);
            free(dir);
            goto fail;
        }
        if (total + files.count > cap) {
            int64_t ncap = (total + files.count) * 2;
            char **p = realloc(ds->paths, (size_t)ncap * sizeof *p);
            if (p) ds->paths = p;
            int32_t *l = realloc(ds->labels, (size_t)ncap * sizeof *l);
            if (l) ds->labels = l;
            uint8_t *k = realloc(ds->kinds, (size_t)ncap * sizeof *k);
            if (k) ds->kinds = k;
            if (!p || !l || !k) {
                free(dir);
                error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
                goto fail;
            }
            cap = ncap;
        }
        for (int64_t i = 0; i < files.count; i++) {
            ds->paths[total] = join_path(dir, files.items[i].name);
            if (!ds->paths[total]) {
                free(dir);
                error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
                goto fail;
            }
            ds->labels[total] = (int32_t)c;
            ds->kinds[total] = files.items[i].kind;
            ds->num_irregular += files.items[i].kind != DATASET_FILE_REGULAR;
            total++;
            ds->num_samples = total;
        }
        list_clear(&files);
        free(dir);
    }
    list_free(&classes);
    list_free(&files);
    return 0;
fail:
    list_free(&classes);
    list_free(&files);
    dataset_free(ds);
    return -1;
}

// Starts out as an empty dataset with ds's root and classes and room for `capacity` files.
static int copy_header(const Dataset *ds, int64_t capacity, Dataset *out)
{
    memset(out, 0, sizeof *out);
    size_t cap = capacity > 0 ? (size_t)capacity : 1;
    out->root = strdup(ds->root ? ds->root : "");
    out->class_names = calloc((size_t)ds->num_classes, sizeof *out->class_names);
    out->paths = calloc(cap, sizeof *out->paths);
    out->labels = calloc(cap, sizeof *out->labels);
    out->kinds = calloc(cap, sizeof *out->kinds);
    if (!out->root || !out->class_names || !out->paths || !out->labels || !out->kinds) goto fail;
    for (int c = 0; c < ds->num_classes; c++) {
        out->class_names[c] = strdup(ds->class_names[c]);
        if (!out->class_names[c]) goto fail;
        out->num_classes++;
    }
    return 0;
fail:
    dataset_free(out);
    return error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
}

int dataset_split(const Dataset *ds, double heldout_fraction, uint64_t seed, Dataset *train,
                  Dataset *heldout)
{
    memset(train, 0, sizeof *train);
    memset(heldout, 0, sizeof *heldout);
    if (!(heldout_fraction > 0.0 && heldout_fraction < 1.0))
        return error_set(ERROR_BAD_USAGE, "dataset: held-out fraction %g is not in (0, 1)", heldout_fraction);
    size_t n_all = ds->num_samples > 0 ? (size_t)ds->num_samples : 1;
    bool *held = calloc(n_all, sizeof *held);
    int64_t *idx = malloc(n_all * sizeof *idx);
    if (!held || !idx) {
        free(held);
        free(idx);
        return error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
    }
    int64_t nheld = 0;
    for (int c = 0; c < ds->num_classes; c++) {
        int64_t n = 0;
        for (int64_t i = 0; i < ds->num_samples; i++)
            if (ds->labels[i] == c) idx[n++] = i;
        if (n < 2) continue; // a lone file stays in train, so every class is trained on
        int64_t k = (int64_t)(heldout_fraction * (double)n + 0.5);
        k = k < 1 ? 1 : k > n - 1 ? n - 1 : k;
        Rng r = rng_make(seed, 0x5B11D0ull, (uint64_t)c);
        for (int64_t j = 0; j < k; j++) { // the first k of a Fisher-Yates shuffle
            int64_t t = j + rng_below(&r, n - j);
            int64_t s = idx[j];
            idx[j] = idx[t];
            idx[t] = s;
            held[idx[j]] = true;
        }
        nheld += k;
    }
    free(idx);
    int rc = -1;
    if (nheld == 0) {
        error_set(ERROR_BAD_DATA, "dataset: '%s' has no class with 2 or more files, so none can be held out",
                     ds->root ? ds->root : "?");
        goto out;
    }
    if (copy_header(ds, ds->num_samples - nheld, train) != 0 ||
        copy_header(ds, nheld, heldout) != 0)
        goto out;
    for (int64_t i = 0; i < ds->num_samples; i++) {
        Dataset *d = held[i] ? heldout : train;
        d->paths[d->num_samples] = strdup(ds->paths[i]);
        if (!d->paths[d->num_samples]) {
            error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
            goto out;
        }
        d->kinds[d->num_samples] = (uint8_t)dataset_file_kind(ds, i);
        d->num_irregular += d->kinds[d->num_samples] != DATASET_FILE_REGULAR;
        d->labels[d->num_samples++] = ds->labels[i];
    }
    rc = 0;
out:
    free(held);
    if (rc != 0) {
        dataset_free(train);
        dataset_free(heldout);
    }
    return rc;
}

void dataset_summary(const Dataset *ds, char *buf, size_t size)
{
    if (!size) return;
    size_t root_len = ds->root ? strlen(ds->root) : 0;
    int n = snprintf(buf, size, "%s: %d classes, %lld files", ds->root ? ds->root : "?",
                     ds->num_classes, (long long)ds->num_samples);
    if (ds->num_irregular > 0 && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n,
                      "; %lld of them not regular files, never opened and treated as bad "
                      "input (like a corrupt JPEG):",
                      (long long)ds->num_irregular);
    enum { NAMED = 5 };
    int64_t named = 0;
    for (int64_t i = 0; i < ds->num_samples && named < NAMED && n >= 0 && (size_t)n < size; i++) {
        DatasetFileKind k = dataset_file_kind(ds, i);
        if (k == DATASET_FILE_REGULAR) continue;
        const char *p = ds->paths[i];
        if (root_len && strncmp(p, ds->root, root_len) == 0 && p[root_len] == '/') p += root_len + 1;
        n += snprintf(buf + n, size - (size_t)n, "%s %s (%s)", named ? "," : "", p,
                      dataset_file_kind_name(k));
        named++;
    }
    if (ds->num_irregular > named && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " and %lld more", (long long)(ds->num_irregular - named));
}
