// bench_workers.c: the num_workers practice. How many images/s the loader delivers
// with num_workers = 0 (decode + augment in the caller, the baseline) versus N worker
// processes, alone and feeding training steps of the shared core (CUDA with a GPU, the
// CPU backend without), with the time the training loop waits for each batch, the CPU
// cores used, raw single-core libjpeg-turbo decode of the same images for reference,
// persistent versus re-spawned workers, and the pinning stage (GPU only).
// Run with --help for the environment variables that size the run.
#include "bench/harness.h"
#include "kernels/check.h"
#include "kernels/core.h"
#include "kernels/gpu_device.h"
#include "loaders/dataset.h"
#include "loaders/dataset_gen.h"
#include "loaders/errors.h"
#include "loaders/jpeg.h"
#include "loaders/loader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int max_workers;     // BENCH_WORKERS_MAX
    int batch;           // BENCH_WORKERS_BATCH
    int size;            // BENCH_WORKERS_SIZE: loader-alone output side
    int train_size;      // BENCH_WORKERS_TRAIN_SIZE: model input side
    const char *model;   // BENCH_WORKERS_MODEL: core preset
    const char *preset;  // BENCH_WORKERS_PRESET: generated dataset preset
    const char *data;    // BENCH_WORKERS_DATA: an ImageFolder root instead
    const char *cache;   // BENCH_CACHE_DIR
} Options;

typedef struct {
    int workers;
    bool persistent;
    LoaderPinMode pin;
    char name[48];
} Variant;

#define TRAIN_WARMUP_STEPS 3  // untimed steps before a training variant's clock starts

static Options opt;
static double default_min_time; // 0 when --benchmark_min_time was given
static Dataset dataset;
static int dataset_state; // 0 not tried, 1 ready, -1 failed
static char dataset_error[1024];
static Variant variants[64];
static int nvariants;
static char options_error[256]; // a bad BENCH_WORKERS_* value: every run fails with it

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double process_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// An integer environment variable in [min, max], def when unset or empty. A bad value
// ("abc", "0", "-3") is kept in options_error, so that every run fails naming it,
// instead of silently running something else.
static int env_int(const char *name, int def, int min, int max)
{
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < min || v > max) {
        if (!options_error[0])
            snprintf(options_error, sizeof options_error, "%s='%s' is not an integer in %d..%d",
                     name, s, min, max);
        return def;
    }
    return (int)v;
}

static const char *env_str(const char *name, const char *def)
{
    const char *s = getenv(name);
    return s && *s ? s : def;
}

// Scans the dataset once (generating the synthetic one on first use); fails the run if not.
static bool dataset_ready(HarnessState *st)
{
    if (options_error[0]) {
        harness_fail(st, options_error);
        return false;
    }
    if (dataset_state == 0) {
        char root[4096];
        int rc = 0;
        if (opt.data) {
            snprintf(root, sizeof root, "%s", opt.data);
        } else {
            DatasetGenConfig gen;
            rc = dataset_gen_preset(opt.preset, &gen);
            if (rc == 0) {
                fprintf(stderr, "bench_workers: dataset preset '%s' under %s (generated on first use)\n",
                        opt.preset, opt.cache);
                rc = dataset_gen_ensure(&gen, opt.cache, root, sizeof root);
            }
        }
        if (rc == 0) rc = dataset_scan(root, &dataset);
        dataset_state = rc == 0 ? 1 : -1;
        if (rc != 0) snprintf(dataset_error, sizeof dataset_error, "%s", loaders_last_error());
        else
            harness_add_context("workers_dataset", root);
    }
    if (dataset_state < 0) harness_fail(st, dataset_error);
    return dataset_state > 0;
}

static bool pin_usable(HarnessState *st, LoaderPinMode pin)
{
    char why[256];
    if (pin == LOADER_PIN_NONE || gpu_device_available(why, sizeof why)) return true;
    harness_skip(st, why);
    return false;
}

static LoaderConfig loader_config(const Variant *v, int size, bool drop_last)
{
    LoaderConfig c = loader_default_config(&dataset, opt.batch);
    c.num_workers = v->workers;
    c.persistent_workers = v->persistent;
    c.pin = v->pin;
    c.seed = 1;
    c.drop_last = drop_last;
    c.augment = augment_default_config(size);
    return c;
}

// Loader alone: each iteration is one epoch over the dataset.
static void bench_loader(HarnessState *st, void *user)
{
    const Variant *v = user;
    if (!dataset_ready(st) || !pin_usable(st, v->pin)) return;
    LoaderConfig c = loader_config(v, opt.size, false);
    Loader *l;
    if (loader_create(&c, &l) != 0) {
        harness_fail(st, loaders_last_error());
        return;
    }
    LoaderStats s0, s1;
    loader_get_stats(l, &s0);
    double cpu0 = process_cpu_seconds(), t0 = wall_seconds();
    int64_t epoch = 0, images = 0, wrong_epochs = 0;
    LoaderBatch b;
    int rc = 0;
    while (harness_keep_running(st)) {
        if (loader_begin_epoch(l, epoch++) != 0) { rc = -1; break; }
        int64_t n = 0;
        while ((rc = loader_next_batch(l, &b)) == 1) n += b.count;
        if (rc < 0) break;
        wrong_epochs += n != dataset.num_samples;
        images += n;
    }
    double wall = wall_seconds() - t0, cpu = process_cpu_seconds() - cpu0;
    loader_get_stats(l, &s1);
    if (rc < 0) {
        harness_fail(st, loaders_last_error());
        loader_destroy(l);
        return;
    }
    cpu += s1.worker_cpu_seconds - s0.worker_cpu_seconds;
    int64_t batches = s1.batches - s0.batches;
    harness_set_items_processed(st, images);
    harness_counter(st, "images_per_second", (double)images, HARNESS_COUNTER_RATE);
    harness_counter(st, "images_per_second_per_worker", (double)images / (v->workers ? v->workers : 1),
                    HARNESS_COUNTER_RATE);
    harness_counter(st, "num_workers", v->workers, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "cpu_cores_used", wall > 0 ? cpu / wall : 0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wait_ms_per_batch",
                    batches ? 1e3 * (s1.wait_seconds - s0.wait_seconds) / batches : 0,
                    HARNESS_COUNTER_PLAIN);
    harness_counter(st, "pin_ms_per_batch",
                    batches ? 1e3 * (s1.pin_seconds - s0.pin_seconds) / batches : 0,
                    HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wrong_epochs", (double)wrong_epochs, HARNESS_COUNTER_PLAIN);
    char label[96];
    snprintf(label, sizeof label, "epoch of %lld images, %dx%d out", (long long)dataset.num_samples,
             opt.size, opt.size);
    harness_set_label(st, label);
    loader_destroy(l);
    if (wrong_epochs) harness_fail(st, "an epoch did not deliver every image exactly once");
}

static void fail_core(HarnessState *st, const char *what)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s", what, check_last_error());
    harness_fail(st, msg);
}

// Loader feeding training steps: each iteration is one epoch (drop_last) of steps.
static void bench_train(HarnessState *st, void *user)
{
    const Variant *v = user;
    if (!dataset_ready(st) || !pin_usable(st, v->pin)) return;
    CoreConfig cc;
    if (core_config_preset(&cc, opt.model) != 0) {
        fail_core(st, "core_config_preset");
        return;
    }
    cc.model.image_size = opt.train_size;
    cc.model.num_classes = dataset.num_classes;
    cc.batch_size = opt.batch;
    // The loader forks its workers before the core sets up its device; workers never
    // call CUDA (the harness has already probed the device by now).
    LoaderConfig c = loader_config(v, opt.train_size, true);
    Loader *l;
    if (loader_create(&c, &l) != 0) {
        harness_fail(st, loaders_last_error());
        return;
    }
    Core *core;
    if (core_create(&cc, &core) != 0) {
        fail_core(st, "core_create");
        loader_destroy(l);
        return;
    }
    // Untimed warm-up (the harness's clock starts with the loop): module loading, cuBLAS
    // and cuDNN set-up and planning, first touch of every buffer, the workers' first
    // batches. Epoch 0 is abandoned after it; timed epochs start at 1.
    int rc = 0;
    LoaderBatch b;
    if (loader_begin_epoch(l, 0) != 0) rc = -1;
    for (int i = 0; i < TRAIN_WARMUP_STEPS && rc == 0; i++) {
        int got = loader_next_batch(l, &b);
        if (got < 0) rc = -1;
        if (got <= 0) break;
        CoreBatch cb = {b.images, b.labels, b.count, CORE_MEMORY_HOST};
        if (core_step(core, &cb, NULL) != 0) rc = -2;
    }
    if (rc == 0 && core_sync(core) != 0) rc = -2;
    LoaderStats s0, s1;
    loader_get_stats(l, &s0);
    double cpu0 = process_cpu_seconds(), t0 = wall_seconds();
    int64_t epoch = 1, images = 0, steps = 0;
    float last_loss = 0;
    while (rc == 0 && harness_keep_running(st)) {
        if (loader_begin_epoch(l, epoch++) != 0) { rc = -1; break; }
        while ((rc = loader_next_batch(l, &b)) == 1) {
            CoreBatch cb = {b.images, b.labels, b.count, CORE_MEMORY_HOST};
            CoreStepResult r;
            if (core_step(core, &cb, &r) != 0) { rc = -2; break; }
            if (r.loss_ready) last_loss = r.loss;
            images += b.count;
            steps++;
        }
        if (rc == 0 && core_sync(core) != 0) rc = -2;
    }
    double wall = wall_seconds() - t0, cpu = process_cpu_seconds() - cpu0;
    loader_get_stats(l, &s1);
    CoreStats cs = {0};
    if (rc == 0 && core_stats(core, &cs) != 0) rc = -2;
    if (rc == -1) harness_fail(st, loaders_last_error());
    if (rc == -2) fail_core(st, "core_step");
    if (rc == 0) {
        cpu += s1.worker_cpu_seconds - s0.worker_cpu_seconds;
        harness_set_items_processed(st, images);
        harness_counter(st, "images_per_second", (double)images, HARNESS_COUNTER_RATE);
        harness_counter(st, "num_workers", v->workers, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "step_ms", steps ? 1e3 * wall / steps : 0, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "wait_ms_per_step",
                        steps ? 1e3 * (s1.wait_seconds - s0.wait_seconds) / steps : 0,
                        HARNESS_COUNTER_PLAIN);
        harness_counter(st, "cpu_cores_used", wall > 0 ? cpu / wall : 0, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "last_loss", last_loss, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "peak_mib", cs.peak_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "device_used_mib", cs.device_used_bytes / 1048576.0,
                        HARNESS_COUNTER_PLAIN);
        char algos[1536], label[2048];
        if (core_conv_algo_summary(core, algos, sizeof algos) != 0) snprintf(algos, sizeof algos, "?");
        snprintf(label, sizeof label, "core '%s' %s backend %s, %dx%d, epochs of %lld steps after "
                 "%d warm-up steps; conv algorithms: %s", opt.model, core_backend_name(cs.backend),
                 core_precision_name(cc.precision), opt.train_size, opt.train_size,
                 (long long)loader_num_batches(l), TRAIN_WARMUP_STEPS, algos);
        harness_set_label(st, label);
    }
    core_free(core);
    loader_destroy(l);
}

// Raw libjpeg-turbo decode of the same files on one core: the ceiling for one worker.
static void bench_raw_decode(HarnessState *st, void *user)
{
    (void)user;
    if (!dataset_ready(st)) return;
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    int64_t images = 0;
    int failed = 0;
    while (harness_keep_running(st) && !failed)
        for (int64_t i = 0; i < dataset.num_samples && !failed; i++) {
            failed = jpeg_decode_file(dec, dataset.paths[i], &img) != 0;
            images++;
        }
    if (failed) harness_fail(st, loaders_last_error());
    harness_set_items_processed(st, images);
    harness_counter(st, "images_per_second", (double)images, HARNESS_COUNTER_RATE);
    harness_set_label(st, "1 core, file read + decode to RGB");
    image_free(&img);
    jpeg_decoder_destroy(dec);
}

static Variant *add_variant(int workers, bool persistent, LoaderPinMode pin,
                            const char *fmt, int arg)
{
    Variant *v = &variants[nvariants++];
    *v = (Variant){workers, persistent, pin, ""};
    snprintf(v->name, sizeof v->name, fmt, arg);
    return v;
}

static void register_variant(const char *practice, Variant *v, HarnessRole role, HarnessFn fn)
{
    HarnessBench *b = harness_register(&(HarnessSpec){
        .practice = practice, .variant = v->name, .role = role, .timing = HARNESS_TIMING_WALL,
        .fn = fn, .user = v, .param_names = {"batch", NULL}, .unit = HARNESS_MS});
    if (!b) return;
    harness_add_values(b, (int64_t[]){opt.batch}, 1);
    // A fixed min time would override --benchmark_min_time, so only without the flag.
    if (default_min_time > 0) harness_set_min_time(b, default_min_time);
}

static void print_options(void)
{
    printf("bench_workers environment (defaults in brackets):\n"
           "  BENCH_WORKERS_MAX=N         largest num_workers, 1..32; runs 0,1,2,4,..,N\n"
           "                              [core count, at most 32]\n"
           "  BENCH_WORKERS_DATA=DIR      your ImageFolder root (DIR/<class>/*.jpg) [generated]\n"
           "  BENCH_WORKERS_PRESET=NAME   generated dataset: tiny, small, bench, large [bench]\n"
           "  BENCH_CACHE_DIR=DIR         where generated datasets live [cache/datasets]\n"
           "  BENCH_WORKERS_BATCH=N       batch size, 1..1048576 [64]\n"
           "  BENCH_WORKERS_SIZE=N        loader-alone crop output side, 1..4096 [128]\n"
           "  BENCH_WORKERS_TRAIN_SIZE=N  model input side for loader + training, 1..4096 [32]\n"
           "  BENCH_WORKERS_MODEL=NAME    core preset for loader + training [mlp]\n"
           "A bigger run: BENCH_WORKERS_PRESET=large BENCH_WORKERS_SIZE=224 BENCH_WORKERS_MAX=16\n"
           "A bad value (e.g. BENCH_WORKERS_MAX=abc) fails every run, naming it.\n\n");
}

int main(int argc, char **argv)
{
    default_min_time = 2.0; // a few epochs per instance: the VM's noise is large
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) print_options();
        if (strncmp(argv[i], "--benchmark_min_time", 20) == 0) default_min_time = 0;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    opt = (Options){
        .max_workers = env_int("BENCH_WORKERS_MAX", cores > 0 ? (int)cores : 1, 1, 32),
        .batch = env_int("BENCH_WORKERS_BATCH", 64, 1, 1 << 20),
        .size = env_int("BENCH_WORKERS_SIZE", 128, 1, 4096),
        .train_size = env_int("BENCH_WORKERS_TRAIN_SIZE", 32, 1, 4096),
        .model = env_str("BENCH_WORKERS_MODEL", "mlp"),
        .preset = env_str("BENCH_WORKERS_PRESET", "bench"),
        .data = env_str("BENCH_WORKERS_DATA", NULL), // empty: unset, as for the others
        .cache = env_str("BENCH_CACHE_DIR", "cache/datasets"),
    };
    if (opt.max_workers < 1) opt.max_workers = 1;
    if (opt.max_workers > 32) opt.max_workers = 32; // the default on a machine of > 32 cores
    if (options_error[0]) fprintf(stderr, "bench_workers: %s; every run fails\n", options_error);

    int counts[16], ncounts = 0;
    for (int w = 1; w < opt.max_workers; w *= 2) counts[ncounts++] = w;
    counts[ncounts++] = opt.max_workers;

    // Loader alone: images/s versus num_workers.
    register_variant("num_workers", add_variant(0, true, LOADER_PIN_NONE, "workers_%d", 0),
                     HARNESS_BASELINE, bench_loader);
    for (int i = 0; i < ncounts; i++)
        register_variant("num_workers",
                         add_variant(counts[i], true, LOADER_PIN_NONE, "workers_%d", counts[i]),
                         HARNESS_TUNED, bench_loader);
    // Reference: raw decode on one core.
    register_variant("num_workers_decode_ref", add_variant(0, true, LOADER_PIN_NONE,
                                                           "raw_turbojpeg_1core", 0),
                     HARNESS_BASELINE, bench_raw_decode);
    // Loader feeding training steps: step time and the wait for each batch.
    register_variant("num_workers_train", add_variant(0, true, LOADER_PIN_NONE, "workers_%d", 0),
                     HARNESS_BASELINE, bench_train);
    for (int i = 0; i < ncounts; i++)
        register_variant("num_workers_train",
                         add_variant(counts[i], true, LOADER_PIN_NONE, "workers_%d", counts[i]),
                         HARNESS_TUNED, bench_train);
    // Persistent workers versus forking them again every epoch.
    int wmax = opt.max_workers;
    register_variant("persistent_workers",
                     add_variant(wmax, false, LOADER_PIN_NONE, "respawn_workers_%d", wmax),
                     HARNESS_BASELINE, bench_loader);
    register_variant("persistent_workers",
                     add_variant(wmax, true, LOADER_PIN_NONE, "persistent_workers_%d", wmax),
                     HARNESS_TUNED, bench_loader);
    // The pinning stage under training (skipped without a GPU).
    register_variant("num_workers_pin",
                     add_variant(wmax, true, LOADER_PIN_NONE, "pin_none_workers_%d", wmax),
                     HARNESS_BASELINE, bench_train);
    register_variant("num_workers_pin",
                     add_variant(wmax, true, LOADER_PIN_COPY, "pin_copy_workers_%d", wmax),
                     HARNESS_TUNED, bench_train);
    register_variant("num_workers_pin",
                     add_variant(wmax, true, LOADER_PIN_REGISTER, "pin_register_workers_%d", wmax),
                     HARNESS_TUNED, bench_train);
    int rc = harness_main(argc, argv);
    if (dataset_state > 0) dataset_free(&dataset);
    return rc;
}
