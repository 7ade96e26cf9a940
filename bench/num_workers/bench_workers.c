// bench_workers.c: the num_workers practice. How many images/s the loader delivers
// with num_workers = 0 (decode + augment in the caller, the baseline) versus N worker
// processes, alone and feeding training steps of the shared core through the practice
// driver (CUDA with a GPU, the CPU backend without), with the time the training loop
// waits for each batch, the CPU cores used, raw single-core libjpeg-turbo decode of the
// same images for reference, the same loader-alone figures on large (ImageNet-sized)
// sources, persistent versus re-spawned workers, and the pinning stage (GPU only). Run with --help for its options (the old BENCH_WORKERS_* variables work too).
#include "bench/driver/harness.h"
#include "bench/driver/image_data.h"
#include "bench/driver/practice.h"
#include "kernels/clock.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "loaders/dataset.h"
#include "loaders/jpeg.h"
#include "loaders/loader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// seconds: two or more epochs of the default set per repetition; the VM's drift is large
// but slow, and short repetitions next to each other (rounds) cancel it in a pair's ratio.
// It is also enough for the per-core ratio with workers, which needs
// WORKER_CPU_MIN_SECONDS_EACH of every worker's CPU: an epoch takes 2 workers ~0.25 s.
#define LOADER_MIN_TIME 1.0
// The large-source family: one epoch (1000 500x375 JPEGs, over a second) per repetition,
// so that it adds little to a default run.
#define LARGE_SOURCE_MIN_TIME 0.5

// A dataset, scanned (and generated) on first use, once for the whole run: a family whose
// runs are all filtered out never generates its data.
typedef struct {
    const char *preset_option; // the option naming its generated preset
    bool user_data;            // --data_dir replaces the generated preset
    const char *context;       // the results' context key naming its folder
    Dataset dataset;
    int state;                 // 0 not tried, 1 ready, -1 failed
    char error[2048];
    ErrorKind error_kind;
} Source;

static Source bench_source = {.preset_option = "dataset", .user_data = true, .context = "workers_dataset"};
static Source large_source = {.preset_option = "large_dataset", .context = "workers_large_dataset"};

typedef struct {
    int workers;
    bool persistent;
    LoaderPinMode pin;
    char name[48];
    Source *source;
    const char *size_option;   // the option giving the loader's output side
} Variant;

// Variants and their driver tables (registration keeps pointers to them).
static Variant variants[64];
static int nvariants;
static PracticeVariant train_variants[16], pin_variants[4];
static PracticeLoader loaders[20];
static int nloaders;

static int dataset_load(Source *s)
{
    if (s->state == 0) {
        char root[4096], note[512];
        int rc = image_data_root(s->user_data ? harness_common()->data_dir : NULL,
                                 harness_option_str_value(s->preset_option), NULL, root, sizeof root,
                                 note, sizeof note);
        if (rc == 0 && note[0]) fprintf(stderr, "bench_workers: %s\n", note);
        if (rc == 0) rc = dataset_scan(root, &s->dataset);
        if (rc == 0 && s->dataset.num_irregular > 0) { // a FIFO, a dangling link: bad input,
            char summary[1536];                         // never opened (raw decode would block)
            dataset_summary(&s->dataset, summary, sizeof summary);
            dataset_free(&s->dataset);
            rc = error_set(ERROR_BAD_DATA, "%s", summary);
        }
        s->state = rc == 0 ? 1 : -1;
        if (rc != 0) {
            s->error_kind = error_kind();
            snprintf(s->error, sizeof s->error, "%s", error_message());
        } else {
            harness_add_context(s->context, root);
        }
    }
    return s->state > 0 ? 0 : error_restore(s->error_kind, s->error);
}

static LoaderConfig loader_config(const Variant *v, int batch, int size, bool drop_last)
{
    LoaderConfig c = loader_default_config(&v->source->dataset, batch);
    c.num_workers = v->workers;
    c.persistent_workers = v->persistent;
    c.pin = v->pin;
    c.seed = 1;
    c.drop_last = drop_last;
    c.augment = augment_default_config(size);
    practice_loader_options(&c); // --loader-timeout, --max-image-pixels
    return c;
}

// Raw decode on this core: file read + full decode to RGB, no augmentation, of the
// dataset's files `indices` (NULL: all, in order). Adds to *images; 0 or -1.
static int raw_decode_files(const Dataset *d, JpegDecoder *dec, Image *img, const int64_t *indices,
                            int64_t count, int64_t *images)
{
    for (int64_t i = 0; i < count; i++) {
        if (jpeg_decode_file(dec, d->paths[indices ? indices[i] : i], img) != 0) return -1;
        ++*images;
    }
    return 0;
}

// The raw-decode reference run inside a loader benchmark: its decoder, and the images,
// CPU seconds and wall seconds of its passes so far.
typedef struct {
    JpegDecoder *dec;
    Image img;
    int64_t images;
    double cpu, wall;
} RawReference;

// One raw-decode pass (see raw_decode_files) with the benchmark's timer paused. 0 or -1.
static int raw_decode_untimed(HarnessState *st, const Dataset *d, RawReference *raw, const int64_t *indices,
                              int64_t count)
{
    harness_pause_timing(st);
    double cpu0 = clock_process_cpu_seconds(), wall0 = clock_seconds();
    int rc = raw_decode_files(d, raw->dec, &raw->img, indices, count, &raw->images);
    raw->cpu += clock_process_cpu_seconds() - cpu0;
    raw->wall += clock_seconds() - wall0;
    harness_resume_timing(st);
    return rc;
}

// Raw libjpeg-turbo decode of the same files on one core: the ceiling for one worker.
static void bench_raw_decode(HarnessState *st, void *user)
{
    const Variant *v = user;
    const Dataset *d = &v->source->dataset;
    if (dataset_load(v->source) != 0) {
        practice_fail_or_skip(st, "the dataset");
        return;
    }
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    int64_t images = 0;
    int failed = !dec;
    while (harness_keep_running(st) && !failed) failed = raw_decode_files(d, dec, &img, NULL, d->num_samples, &images) != 0;
    if (failed) practice_fail_or_skip(st, "decoding");
    harness_set_items_processed(st, images);
    harness_counter(st, "images_per_second", (double)images, HARNESS_COUNTER_RATE);
    harness_set_label(st, "1 core, file read + decode to RGB");
    image_free(&img);
    jpeg_decoder_destroy(dec);
}

// Per-core ratio to raw decode for this many workers and fewer (the goal: >= 0.85).
#define RATIO_MAX_WORKERS 2
// Least CPU time per worker for per-core figures with workers: each worker's reading is
// off by up to a 10 ms tick, 4% of this at worst (the spread between repetitions is
// larger); one large-source epoch per repetition has enough.
#define WORKER_CPU_MIN_SECONDS_EACH 0.25
// The raw-decode reference decodes one file in this many (see bench_loader).
#define RAW_SAMPLE_EVERY 4

// Loader alone: each iteration is one epoch over the dataset. For num_workers <=
// RATIO_MAX_WORKERS a sample of the same files (one in RAW_SAMPLE_EVERY) is also
// raw-decoded on this core, untimed and interleaved with the loader so that both see the
// same machine load: with 0 workers the files of every RAW_SAMPLE_EVERY-th batch right
// after it; with workers (which would go on working meanwhile) that share of the dataset
// after each epoch. A sample, not every file: the reference is a rate, and decoding all
// of them again doubled every repetition's time.
static void bench_loader(HarnessState *st, void *user)
{
    const Variant *v = user;
    if (v->pin != LOADER_PIN_NONE && practice_skip_without_gpu(st)) return;
    int batch = (int)harness_axis_int(st, "batch"), size = (int)harness_option_int_value(v->size_option);
    const Dataset *d = &v->source->dataset;
    Loader *l;
    if (dataset_load(v->source) != 0) {
        practice_fail_or_skip(st, "the dataset");
        return;
    }
    LoaderConfig c = loader_config(v, batch, size, false);
    if (loader_create(&c, &l) != 0) {
        practice_fail_or_skip(st, "the loader");
        return;
    }
    bool ratio = v->workers <= RATIO_MAX_WORKERS && v->pin == LOADER_PIN_NONE;
    RawReference raw = {ratio ? jpeg_decoder_create() : NULL, {0}, 0, 0, 0};
    if (ratio && !raw.dec) {
        practice_fail_or_skip(st, "the raw-decode reference");
        loader_destroy(l);
        return;
    }
    LoaderStats s0, s1;
    loader_get_stats(l, &s0);
    double cpu0 = clock_process_cpu_seconds(), t0 = clock_seconds();
    int64_t epoch = 0, images = 0, wrong_epochs = 0;
    LoaderBatch b;
    int rc = 0, raw_rc = 0;
    int64_t batches_seen = 0;
    while (harness_keep_running(st)) {
        if (loader_begin_epoch(l, epoch++) != 0) { rc = -1; break; }
        int64_t n = 0;
        while ((rc = loader_next_batch(l, &b)) == 1) {
            n += b.count;
            if (ratio && v->workers == 0 && batches_seen++ % RAW_SAMPLE_EVERY == 0 &&
                (raw_rc = raw_decode_untimed(st, d, &raw, b.indices, b.count)) != 0)
                break;
        }
        if (rc < 0 || raw_rc != 0) break;
        wrong_epochs += n != d->num_samples;
        images += n;
        int64_t sample = (d->num_samples + RAW_SAMPLE_EVERY - 1) / RAW_SAMPLE_EVERY;
        if (ratio && v->workers > 0 && (raw_rc = raw_decode_untimed(st, d, &raw, NULL, sample)) != 0)
            break;
    }
    double wall = clock_seconds() - t0 - raw.wall; // the raw passes taken out
    double cpu = clock_process_cpu_seconds() - cpu0 - raw.cpu;
    loader_get_stats(l, &s1);
    image_free(&raw.img);
    jpeg_decoder_destroy(raw.dec);
    if (rc < 0 || raw_rc != 0) {
        practice_fail_or_skip(st, rc < 0 ? "loading" : "the raw-decode reference");
        loader_destroy(l);
        return;
    }
    double worker_cpu = s1.worker_cpu_seconds - s0.worker_cpu_seconds;
    cpu += worker_cpu;
    int64_t batches = s1.batches - s0.batches;
    harness_set_items_processed(st, images);
    harness_counter(st, "images_per_second", (double)images, HARNESS_COUNTER_RATE);
    harness_counter(st, "images_per_second_per_worker", (double)images / (v->workers ? v->workers : 1),
                    HARNESS_COUNTER_RATE);
    harness_counter(st, "num_workers", v->workers, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "cpu_cores_used", wall > 0 ? cpu / wall : 0, HARNESS_COUNTER_PLAIN);
    // Images per CPU-second of all the loader's processes, and against raw decode (file
    // read + full decode, one core, CPU-seconds too) measured in the same iterations.
    // Workers' CPU time comes from /proc in 10 ms ticks: over a short run (a test's) it
    // would be mostly rounding, so the per-core figures are left out then.
    bool per_core = cpu > 0 && (v->workers == 0 || worker_cpu >= v->workers * WORKER_CPU_MIN_SECONDS_EACH);
    if (per_core) harness_counter(st, "images_per_second_per_core", images / cpu, HARNESS_COUNTER_PLAIN);
    if (per_core && ratio && raw.cpu > 0) {
        double raw_rate = raw.images / raw.cpu;
        harness_counter(st, "raw_decode_images_per_second", raw_rate, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "per_core_ratio_to_raw_decode", images / cpu / raw_rate, HARNESS_COUNTER_PLAIN);
    }
    harness_counter(st, "wait_ms_per_batch",
                    batches ? 1e3 * (s1.wait_seconds - s0.wait_seconds) / batches : 0,
                    HARNESS_COUNTER_PLAIN);
    harness_counter(st, "pin_ms_per_batch",
                    batches ? 1e3 * (s1.pin_seconds - s0.pin_seconds) / batches : 0,
                    HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wrong_epochs", (double)wrong_epochs, HARNESS_COUNTER_PLAIN);
    char label[96];
    snprintf(label, sizeof label, "epoch of %lld images, %dx%d out", (long long)d->num_samples,
             size, size);
    harness_set_label(st, label);
    loader_destroy(l);
    if (wrong_epochs) harness_fail(st, "an epoch did not deliver every image exactly once");
}

// ---- loader + training: the practice driver, images through each variant's loader ----

// The model's input side for loader + training (the train_size option).
static void train_size(CoreConfig *c) { c->model.image_size = (int)harness_option_int_value("train_size"); }

static PracticeVariant train_variant(const char *name, int workers, LoaderPinMode pin, HarnessRole role)
{
    PracticeLoader *how = &loaders[nloaders++];
    *how = (PracticeLoader){.num_workers = workers, .pin = pin};
    return (PracticeVariant){name, role, train_size, how};
}

static Variant *add_variant(int workers, bool persistent, LoaderPinMode pin, const char *fmt, int arg)
{
    Variant *v = &variants[nvariants++];
    *v = (Variant){workers, persistent, pin, "", &bench_source, "size"};
    snprintf(v->name, sizeof v->name, fmt, arg);
    return v;
}

static void register_loader(const char *practice, Variant *v, HarnessRole role, HarnessFn fn,
                            const char *batch)
{
    harness_register(&(HarnessSpec){
        .practice = practice, .variant = v->name, .role = role, .timing = HARNESS_TIMING_WALL,
        .fn = fn, .user = v, .axes = {{"batch", batch}}, .unit = HARNESS_MS,
        .min_time = v->source == &large_source ? LARGE_SOURCE_MIN_TIME : LOADER_MIN_TIME});
}

// The old environment names of the axes' defaults, checked as the options are.
static const char *env_default(const char *name, const char *def, bool integer, int *bad)
{
    const char *s = getenv(name);
    if (!s || !*s) return def;
    if (integer) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || *end || errno || v < 1 || v > 1 << 20) {
            fprintf(stderr, "bench_workers: error: %s='%s' is not an integer in 1..%d\n", name, s, 1 << 20);
            *bad = 1;
        }
    }
    return s;
}

int main(int argc, char **argv)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    harness_option_int("workers_max", cores < 1 ? 1 : cores > 32 ? 32 : cores, 1, 32,
                       "BENCH_WORKERS_MAX",
                       "largest num_workers; runs 0,1,2,4,..,N (default: the CPU count, at most 32)");
    harness_option_int("size", 128, 1, 4096, "BENCH_WORKERS_SIZE", "loader-alone crop output side");
    harness_option_int("train_size", 32, 1, 4096, "BENCH_WORKERS_TRAIN_SIZE",
                       "model input side for loader + training");
    harness_option_str("dataset", "bench", "BENCH_WORKERS_PRESET",
                       "generated dataset: tiny, small, bench (160x160 sources), large, imagenet (500x375: "
                       "use --size=224) (--data_dir: your own; "
                       "generated into $BENCH_CACHE_DIR, default cache/datasets)");
    harness_option_str("large_dataset", "imagenet", "BENCH_WORKERS_LARGE_PRESET",
                       "generated dataset of the num_workers_large_source family (0, 1 and 2 workers, "
                       "one epoch per repetition; --data_dir does not replace it)");
    harness_option_int("large_size", 224, 1, 4096, "BENCH_WORKERS_LARGE_SIZE",
                       "num_workers_large_source crop output side");
    int bad = 0;
    const char *batch = env_default("BENCH_WORKERS_BATCH", "64", true, &bad);
    const char *model = env_default("BENCH_WORKERS_MODEL", "mlp", false, &bad);
    // BENCH_WORKERS_DATA, the old name of --data_dir, unless the flag is given
    char data_flag[4200], *args[256];
    int nargs = 0;
    bool data_given = false;
    for (int i = 0; i < argc && nargs < 254; i++) {
        args[nargs++] = argv[i];
        data_given |= strncmp(argv[i], "--data_dir=", 11) == 0;
    }
    const char *data = getenv("BENCH_WORKERS_DATA");
    if (data && *data && !data_given) {
        snprintf(data_flag, sizeof data_flag, "--data_dir=%s", data);
        args[nargs++] = data_flag;
    }
    args[nargs] = NULL;
    int rc = harness_init(nargs, args);
    if (rc >= 0) return rc;
    if (bad) return 2;

    int wmax = (int)harness_option_int_value("workers_max");
    int counts[16], ncounts = 0;
    for (int w = 1; w < wmax; w *= 2) counts[ncounts++] = w;
    counts[ncounts++] = wmax;

    // Loader alone: images/s versus num_workers.
    register_loader("num_workers", add_variant(0, true, LOADER_PIN_NONE, "workers_%d", 0),
                    HARNESS_BASELINE, bench_loader, batch);
    for (int i = 0; i < ncounts; i++)
        register_loader("num_workers", add_variant(counts[i], true, LOADER_PIN_NONE, "workers_%d", counts[i]),
                        HARNESS_TUNED, bench_loader, batch);
    // The same with large sources (ImageNet-sized: crop + DCT-scaled decode matter most),
    // each with its own raw-decode ratio; workers 0, 1, 2 at most.
    for (int w = 0; w <= RATIO_MAX_WORKERS && w <= wmax; w++) {
        Variant *v = add_variant(w, true, LOADER_PIN_NONE, "workers_%d", w);
        v->source = &large_source;
        v->size_option = "large_size";
        register_loader("num_workers_large_source", v, w == 0 ? HARNESS_BASELINE : HARNESS_TUNED,
                        bench_loader, batch);
    }
    // Reference: raw decode on one core.
    register_loader("num_workers_decode_ref", add_variant(0, true, LOADER_PIN_NONE, "raw_turbojpeg_1core", 0),
                    HARNESS_REFERENCE, bench_raw_decode, batch);
    // Loader feeding training steps (the driver): step time and the wait for each batch.
    // (the loader-alone variants' names: workers_0, workers_1, ...)
    int ntrain = 0;
    for (int i = 0; i <= ncounts; i++)
        train_variants[ntrain++] = train_variant(variants[i].name, variants[i].workers, LOADER_PIN_NONE,
                                                 i == 0 ? HARNESS_BASELINE : HARNESS_TUNED);
    static Practice train = {.name = "num_workers_train", .mode = PRACTICE_THROUGHPUT, .steps = 20,
                             .min_time = LOADER_MIN_TIME, .images = true,
                             .label = "JPEGs through the loader, 20 steps per timed iteration"};
    train.variants = train_variants;
    train.variant_count = ntrain;
    train.presets = model;
    train.batches = batch;
    train.dataset_preset = harness_option_str_value("dataset");
    practice_register(&train);
    // Persistent workers versus forking them again every epoch.
    register_loader("persistent_workers", add_variant(wmax, false, LOADER_PIN_NONE, "respawn_workers_%d", wmax),
                    HARNESS_BASELINE, bench_loader, batch);
    register_loader("persistent_workers", add_variant(wmax, true, LOADER_PIN_NONE, "persistent_workers_%d", wmax),
                    HARNESS_TUNED, bench_loader, batch);
    // The pinning stage under training (its pinned variants are skipped without a GPU).
    static char pin_names[3][48];
    snprintf(pin_names[0], sizeof pin_names[0], "pin_none_workers_%d", wmax);
    snprintf(pin_names[1], sizeof pin_names[1], "pin_copy_workers_%d", wmax);
    snprintf(pin_names[2], sizeof pin_names[2], "pin_register_workers_%d", wmax);
    pin_variants[0] = train_variant(pin_names[0], wmax, LOADER_PIN_NONE, HARNESS_BASELINE);
    pin_variants[1] = train_variant(pin_names[1], wmax, LOADER_PIN_COPY, HARNESS_TUNED);
    pin_variants[2] = train_variant(pin_names[2], wmax, LOADER_PIN_REGISTER, HARNESS_TUNED);
    static Practice pin = {.name = "num_workers_pin", .mode = PRACTICE_THROUGHPUT, .variant_count = 3,
                           .steps = 20, .min_time = LOADER_MIN_TIME, .images = true,
                           .label = "JPEGs through the loader, 20 steps per timed iteration"};
    pin.variants = pin_variants;
    pin.presets = model;
    pin.batches = batch;
    pin.dataset_preset = harness_option_str_value("dataset");
    practice_register(&pin);
    rc = harness_run();
    if (bench_source.state > 0) dataset_free(&bench_source.dataset);
    if (large_source.state > 0) dataset_free(&large_source.dataset);
    return rc;
}
