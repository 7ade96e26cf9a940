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
    char **items;
    int64_t count, cap;
} NameList;

static int list_push(NameList *l, const char *s)
{
    if (l->count == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        char **p = realloc(l->items, (size_t)cap * sizeof *p);
        if (!p) return error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
        l->items = p;
        l->cap = cap;
    }
    l->items[l->count] = strdup(s);
    if (!l->items[l->count]) return error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
    l->count++;
    return 0;
}

static void list_free(NameList *l)
{
    for (int64_t i = 0; i < l->count; i++) free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
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

// Lists entries of dir (skipping dot-files) that are directories (want_dirs) or
// regular JPEG files, sorted.
static int list_dir(const char *dir, int want_dirs, NameList *out)
{
    DIR *d = opendir(dir);
    if (!d) return error_set(ERROR_IO, "dataset: cannot open folder '%s': %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char *full = join_path(dir, e->d_name);
        if (!full) {
            closedir(d);
            return error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
        }
        struct stat sb;
        int ok = stat(full, &sb) == 0;
        int keep = ok && (want_dirs ? S_ISDIR(sb.st_mode)
                                    : S_ISREG(sb.st_mode) && is_jpeg_name(e->d_name));
        free(full);
        if (keep && list_push(out, e->d_name) != 0) {
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    // An empty folder leaves items NULL, and qsort's array must not be NULL even for 0 items.
    if (out->count > 1) qsort(out->items, (size_t)out->count, sizeof *out->items, cmp_str);
    return 0;
}

void dataset_free(Dataset *ds)
{
    for (int i = 0; i < ds->num_classes; i++) free(ds->class_names[i]);
    for (int64_t i = 0; i < ds->num_samples; i++) free(ds->paths[i]);
    free(ds->class_names);
    free(ds->paths);
    free(ds->labels);
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
        ds->class_names[c] = strdup(classes.items[c]);
        ds->num_classes++;
        char *dir = join_path(root, classes.items[c]);
        if (!ds->class_names[c] || !dir) {
            free(dir);
            error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
            goto fail;
        }
        files.count = 0;
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
            if (!p || !l) {
                free(dir);
                error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
                goto fail;
            }
            cap = ncap;
        }
        for (int64_t i = 0; i < files.count; i++) {
            ds->paths[total] = join_path(dir, files.items[i]);
            if (!ds->paths[total]) {
                free(dir);
                error_set(ERROR_OUT_OF_MEMORY, "dataset: out of memory");
                goto fail;
            }
            ds->labels[total] = (int32_t)c;
            total++;
            ds->num_samples = total;
        }
        for (int64_t i = 0; i < files.count; i++) free(files.items[i]);
        files.count = 0;
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
    if (!out->root || !out->class_names || !out->paths || !out->labels) goto fail;
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
