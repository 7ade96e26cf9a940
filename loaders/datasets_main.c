// datasets_main.c: build/datasets, a small command-line tool for the loaders module.
//   datasets generate PRESET DIR     writes a synthetic ImageFolder dataset to DIR
//   datasets check DIR [WORKERS]     scans DIR and decodes every file through the
//                                    loader, listing each bad file and why
// Exit status: 0 when everything is fine, 1 on bad files or errors, 2 on bad usage.
#include "loaders/dataset.h"
#include "loaders/dataset_gen.h"
#include "kernels/error.h"
#include "loaders/jpeg.h"
#include "loaders/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: datasets generate tiny|small|bench|large|imagenet DIR\n"
               "       datasets check DIR [WORKERS]\n"
               "  generate  writes a synthetic ImageFolder dataset (DIR/<class>/*.jpg) of the\n"
               "            preset's size; DIR must not exist yet\n"
               "  check     scans DIR, lists every undecodable file and why (and every\n"
               "            .jpg/.jpeg name that is not a regular file: a FIFO, a socket, a\n"
               "            dangling link; never opened), then reads one epoch through the\n"
               "            loader with WORKERS worker processes (0..256, default 2; 0 decodes\n"
               "            in this process), skipping and counting the bad files\n"
               "Exit status: 0 when everything is fine, 1 on bad files or errors, 2 on bad usage.\n");
}

static int generate(const char *preset, const char *dir)
{
    DatasetGenConfig cfg;
    if (dataset_gen_preset(preset, &cfg) != 0 || dataset_generate(&cfg, dir) != 0) {
        fprintf(stderr, "datasets: %s\n", error_message());
        return 1;
    }
    printf("datasets: wrote %d classes x %d images of %dx%d to %s\n", cfg.num_classes,
           cfg.images_per_class, cfg.width, cfg.height, dir);
    return 0;
}

// Lists every undecodable file (one decoder, in this process), then runs one epoch
// through the loader with the given workers as a smoke test of the whole path.
static int check(const char *dir, int workers)
{
    Dataset ds;
    if (dataset_scan(dir, &ds) != 0) {
        fprintf(stderr, "datasets: %s\n", error_message());
        return 1;
    }
    char summary[4096];
    dataset_summary(&ds, summary, sizeof summary);
    printf("datasets: %s\n", summary);
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    int64_t bad = 0;
    for (int64_t i = 0; dec && i < ds.num_samples; i++) {
        DatasetFileKind kind = dataset_file_kind(&ds, i);
        if (kind != DATASET_FILE_REGULAR) { // never opened: a FIFO would block
            printf("bad: %s: %s, not a regular file\n", ds.paths[i], dataset_file_kind_name(kind));
            bad++;
        } else if (jpeg_decode_file(dec, ds.paths[i], &img) != 0) {
            printf("bad: %s\n", error_message());
            bad++;
        }
    }
    image_free(&img);
    jpeg_decoder_destroy(dec);
    LoaderConfig c = loader_default_config(&ds, 32);
    c.num_workers = workers;
    c.skip_bad_files = true;
    Loader *l = NULL;
    int rc = loader_create(&c, &l);
    LoaderBatch b;
    int64_t images = 0;
    if (rc == 0)
        while ((rc = loader_next_batch(l, &b)) == 1) images += b.count;
    if (rc < 0) fprintf(stderr, "datasets: loader: %s\n", error_message());
    else {
        LoaderStats st;
        loader_get_stats(l, &st);
        printf("datasets: loader with %d workers delivered %lld images, skipped %lld bad files\n",
               workers, (long long)images, (long long)st.bad_files);
    }
    loader_destroy(l);
    dataset_free(&ds);
    return bad || rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "generate") == 0) return generate(argv[2], argv[3]);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "check") == 0) {
        long workers = 2;
        if (argc == 4) {
            char *end;
            workers = strtol(argv[3], &end, 10);
            if (end == argv[3] || *end || workers < 0 || workers > 256) {
                fprintf(stderr, "datasets: bad WORKERS '%s': need an integer 0..256\n", argv[3]);
                return 2;
            }
        }
        return check(argv[2], (int)workers);
    }
    usage(stderr);
    return 2;
}
