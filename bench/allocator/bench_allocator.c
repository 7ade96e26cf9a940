// bench_allocator.c: the memory-allocator practice of PyTorch's tuning guide (CPU section,
// "Switch Memory allocator": jemalloc or TCMalloc in place of glibc's malloc, preloaded with
// LD_PRELOAD). An allocator is chosen when a process starts, so every row runs its work in a
// child: this program again (`--allocator-worker=...`, allocator_worker.c) started with
// LD_PRELOAD naming the row's library (glibc: LD_PRELOAD removed), kept alive across the
// row's repetitions; it times each unit of work on its own wall clock and sends the seconds
// back, which the harness takes as manual time (allocator_child.c: the exchange).
// allocator/*: training steps of the core presets (tiny, mlp) on the fast CPU backend, one
//   step per iteration, on three synthetic batches in turn; baseline glibc, tuned jemalloc
//   and tcmalloc.
// allocator_loader/*: epochs of the loader (2 worker processes, forked in the child: the
//   same allocator) over the generated JPEG dataset (the bench preset, or --data_dir), one
//   epoch per iteration, 128x128 crops.
// Every child asserts that its allocator is in effect (the library mapped in it and in each
// loader worker, malloc resolving to it; glibc: neither library mapped): in_effect 1, else
// the row fails. A missing library is a skip naming the Debian package to install.
// Check (tuned rows): the parameters after the first 3 steps from the preset's initialisation
//   are bit-identical to a glibc child's (train), the check epoch's batches identical
//   (loader): an allocator changes no number. The reference is the glibc row's, or a glibc
//   child started for it. --practice_selftest breaks the tuned children, which the check
//   catches: train: half_lr halves the LR, drop_step leaves out the middle checked step, the
//   other modes (frozen, ...) drop the update; loader: every mode loses a batch.
// Counters: images_per_second, peak_rss_mib (the child's VmHWM), peak_rss_growth_mib (that
//   less the child's VmHWM when it started: ~160 MiB of the program's libraries, CUDA's
//   among them), workers_peak_rss_mib (loader: the workers' VmHWM, summed), minor_faults_per_step (train), wrong (check),
//   check_baseline_moved, wrong_epochs (loader), in_effect.
// Test-only variables: BENCH_ALLOCATOR_DIR=DIR looks for the libraries in DIR only;
// BENCH_ALLOCATOR_DATASET=PRESET generates the loader's dataset from PRESET (tiny: 24 images).
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/allocator/allocator.h"
#include "bench/driver/harness.h"
#include "bench/driver/image_data.h"
#include "bench/driver/practice.h"

#define LOADER_WORKERS 2
#define LOADER_SIZE 128
#define LOADER_DATASET "bench"
// seconds per repetition: a loader epoch of the bench set takes 2 workers ~0.25-1 s
#define LOADER_MIN_TIME 1.0

typedef struct Row {
    AllocWork work;
    AllocKind kind;
} Row;

static const Row rows[2][ALLOC_COUNT] = {
    {{ALLOC_WORK_TRAIN, ALLOC_GLIBC}, {ALLOC_WORK_TRAIN, ALLOC_JEMALLOC}, {ALLOC_WORK_TRAIN, ALLOC_TCMALLOC}},
    {{ALLOC_WORK_LOADER, ALLOC_GLIBC}, {ALLOC_WORK_LOADER, ALLOC_JEMALLOC}, {ALLOC_WORK_LOADER, ALLOC_TCMALLOC}},
};

// ---- the glibc reference of the check, per work and axes ------------------------------------

#define MAX_REFERENCES 32

typedef struct Reference {
    char key[96];
    uint64_t hash;
    double moved;
    int64_t items;
} Reference;

static Reference references[MAX_REFERENCES];
static int nreferences;

static void reference_key(const AllocWorkerArgs *a, char *key, size_t size)
{
    snprintf(key, size, "%d/%s/%d", (int)a->work, a->preset ? a->preset : "", a->batch);
}

static Reference *reference_find(const AllocWorkerArgs *a)
{
    char key[96];
    reference_key(a, key, sizeof key);
    for (int i = 0; i < nreferences; i++)
        if (strcmp(references[i].key, key) == 0) return &references[i];
    return NULL;
}

static const Reference *reference_add(const AllocWorkerArgs *a, const AllocHello *h)
{
    if (nreferences == MAX_REFERENCES) return NULL;
    Reference *r = &references[nreferences++];
    reference_key(a, r->key, sizeof r->key);
    r->hash = h->check_hash;
    r->moved = h->check_moved;
    r->items = h->check_items;
    return r;
}

// ---- one row ------------------------------------------------------------------------------

// The child's arguments for this run's axes; false when the run has ended (failed, skipped).
static bool row_args(HarnessState *st, const Row *row, AllocWorkerArgs *a)
{
    Selftest mode;
    if (practice_training_selftest_mode(&mode) != 0) {
        practice_fail_or_skip(st, "the self-test");
        return false;
    }
    *a = (AllocWorkerArgs){.work = row->work, .kind = row->kind, .threads = harness_common()->threads,
                           .selftest = mode != SELFTEST_NONE && row->kind != ALLOC_GLIBC
                                           ? harness_option_str_value("practice_selftest") : "none"};
    a->batch = (int)harness_axis_int(st, "batch");
    if (row->work == ALLOC_WORK_TRAIN) {
        a->preset = harness_axis_str(st, "preset");
        return !harness_run_failed(st);
    }
    static char root[4096];
    char note[512];
    const char *preset = getenv(ALLOC_DATASET_ENV);
    if (image_data_root(harness_common()->data_dir, preset && *preset ? preset : LOADER_DATASET, NULL, root, sizeof root, note, sizeof note) != 0) {
        practice_fail_or_skip(st, "the dataset");
        return false;
    }
    static bool noted;
    if (note[0] && !noted) fprintf(stderr, "bench_allocator: %s\n", note);
    noted = true;
    a->data_root = root;
    a->workers = LOADER_WORKERS;
    a->size = LOADER_SIZE;
    a->loader_timeout_s = (int)harness_option_int_value("loader-timeout");
    return !harness_run_failed(st);
}

// Ends the run on a child's error (a skip for a machine limit, as the driver's runs).
static void child_failed(HarnessState *st, const char *what, int32_t kind, const char *message)
{
    error_restore((ErrorKind)kind, message);
    practice_fail_or_skip(st, what);
}

// The glibc reference for a's work, from the cache or a glibc child started for it; NULL
// when the run has ended.
static const Reference *reference_of(HarnessState *st, const AllocWorkerArgs *a)
{
    const Reference *ref = reference_find(a);
    if (ref) return ref;
    AllocWorkerArgs base = *a;
    base.kind = ALLOC_GLIBC;
    base.selftest = "none";
    AllocChild *c;
    if (alloc_child_start(&base, "", &c) != 0) {
        practice_fail_or_skip(st, "the glibc reference worker");
        return NULL;
    }
    if (!c->hello.ok) child_failed(st, "the glibc reference worker", c->hello.error_kind, c->hello.message);
    else if (!(ref = reference_add(&base, &c->hello))) harness_fail(st, "too many check references");
    alloc_child_stop(c);
    return ref;
}

// Whether the child's check agrees with glibc's (failing the run when not).
static bool check_against_glibc(HarnessState *st, const AllocWorkerArgs *a, const AllocHello *h)
{
    const Reference *ref = reference_find(a);
    if (!ref && a->kind == ALLOC_GLIBC) ref = reference_add(a, h); // the glibc row is its own
    if (!ref && !(ref = reference_of(st, a))) return false;
    char why[256] = "";
    if (a->work == ALLOC_WORK_TRAIN && ref->moved < PRACTICE_CHECK_MIN_MOVED)
        snprintf(why, sizeof why, "glibc's update after 3 steps is %.3g of its parameters: too small to vouch for "
                 "anything", ref->moved);
    else if (a->work == ALLOC_WORK_LOADER && (ref->items <= 0 || h->check_items != ref->items))
        snprintf(why, sizeof why, "the check epoch delivered %lld images, glibc's %lld", (long long)h->check_items,
                 (long long)ref->items);
    else if (h->check_hash != ref->hash)
        snprintf(why, sizeof why, "%s with %s differ from glibc's (checksum %016llx, glibc %016llx)%s",
                 a->work == ALLOC_WORK_TRAIN ? "the parameters after 3 steps" : "the check epoch's batches",
                 alloc_kind_name(a->kind), (unsigned long long)h->check_hash, (unsigned long long)ref->hash,
                 a->kind == ALLOC_GLIBC ? ": two glibc runs disagree" : "");
    if (why[0]) {
        harness_fail(st, why);
        return false;
    }
    harness_counter(st, "wrong", 0, HARNESS_COUNTER_PLAIN);
    if (a->work == ALLOC_WORK_TRAIN) harness_counter(st, "check_baseline_moved", ref->moved, HARNESS_COUNTER_PLAIN);
    return true;
}

// The row's child: the one a previous run kept, or a new one (started, in effect, checked).
static AllocChild *row_child(HarnessState *st, const AllocWorkerArgs *a, const char *library)
{
    AllocChild *c = harness_take_kept(st);
    if (!c && alloc_child_start(a, library, &c) != 0) {
        practice_fail_or_skip(st, "the worker process");
        return NULL;
    }
    if (!c->hello.ok) {
        child_failed(st, "the worker's set-up", c->hello.error_kind, c->hello.message);
        alloc_child_stop(c);
        return NULL;
    }
    if (!check_against_glibc(st, a, &c->hello)) {
        alloc_child_stop(c);
        return NULL;
    }
    return c;
}

static void release_child(void *obj) { alloc_child_stop(obj); }

static void report(HarnessState *st, const Row *row, const AllocChild *c, const AllocReply *r, int64_t units)
{
    harness_set_items_processed(st, r->items);
    harness_counter(st, "images_per_second", (double)r->items, HARNESS_COUNTER_RATE);
    harness_counter(st, "peak_rss_mib", r->peak_rss_mib, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "peak_rss_growth_mib", r->peak_rss_mib - c->hello.start_rss_mib, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "in_effect", 1, HARNESS_COUNTER_PLAIN);
    char label[512];
    if (row->work == ALLOC_WORK_TRAIN) {
        harness_counter(st, "minor_faults_per_step", r->minor_faults / (double)units, HARNESS_COUNTER_PLAIN);
        snprintf(label, sizeof label, "fast CPU backend, one training step per iteration, wall clock in a child; "
                 "malloc from %s", c->hello.malloc_from);
    } else {
        harness_counter(st, "workers_peak_rss_mib", r->workers_peak_rss_mib, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "num_workers", LOADER_WORKERS, HARNESS_COUNTER_PLAIN);
        harness_counter(st, "wrong_epochs", (double)r->wrong_units, HARNESS_COUNTER_PLAIN);
        snprintf(label, sizeof label, "loader epoch per iteration, %d workers, %dx%d out, wall clock in a child; "
                 "malloc from %s", LOADER_WORKERS, LOADER_SIZE, LOADER_SIZE, c->hello.malloc_from);
    }
    harness_set_label(st, label);
}

static void bench_row(HarnessState *st, void *user)
{
    const Row *row = user;
    char library[PATH_MAX], why[1024];
    if (alloc_find_library(row->kind, library, sizeof library, why, sizeof why) != 0) {
        harness_skip(st, why);
        return;
    }
    AllocWorkerArgs a;
    if (!row_args(st, row, &a)) return;
    AllocChild *c = row_child(st, &a, library);
    if (!c) return;
    int64_t units = harness_max_iterations(st);
    double *seconds = malloc((size_t)(units > 0 ? units : 1) * sizeof *seconds);
    AllocReply r;
    if (!seconds || units > ALLOC_MAX_UNITS) {
        harness_fail(st, "too many iterations for the worker");
    } else if (alloc_child_run(c, units, &r, seconds) != 0) {
        practice_fail_or_skip(st, "the worker process");
    } else if (!r.ok) {
        child_failed(st, row->work == ALLOC_WORK_TRAIN ? "training" : "loading", r.error_kind, r.message);
    } else {
        for (int64_t i = 0; harness_keep_running(st); i++) harness_set_iteration_time(st, seconds[i < units ? i : units - 1]);
        report(st, row, c, &r, units);
        if (r.wrong_units) harness_fail(st, "an epoch did not deliver every image exactly once");
    }
    free(seconds);
    if (harness_run_failed(st)) alloc_child_stop(c);
    else harness_keep(st, c, release_child);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strncmp(argv[1], ALLOC_WORKER_FLAG, strlen(ALLOC_WORKER_FLAG)) == 0)
        return alloc_worker_main(argc, argv);
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    static const char *const families[2] = {"allocator", "allocator_loader"};
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < ALLOC_COUNT; k++) {
            HarnessSpec spec = {.practice = families[w], .variant = alloc_kind_name((AllocKind)k),
                                .role = k == ALLOC_GLIBC ? HARNESS_BASELINE : HARNESS_TUNED,
                                .timing = HARNESS_TIMING_MANUAL, .fn = bench_row, .user = (void *)&rows[w][k],
                                .unit = HARNESS_MS};
            if (w == 0) {
                spec.axes[0] = (HarnessAxis){"preset", "tiny,mlp", true};
                spec.axes[1] = (HarnessAxis){"batch", "0", false};
                spec.min_time = PRACTICE_CPU_MIN_TIME;
            } else {
                spec.axes[0] = (HarnessAxis){"batch", "64", false};
                spec.min_time = LOADER_MIN_TIME;
            }
            harness_register(&spec);
        }
    return harness_run();
}
