// allocator_worker.c: the child's side of the allocator practice. This program again,
// started with LD_PRELOAD naming the row's allocator (allocator_child.c): it asserts that
// the allocator is in effect (its library mapped and malloc resolving to it), sets up the
// row's work untimed (the check first, then a warm-up), says hello with the check's
// checksum, and answers each request with the wall-clock seconds of each unit it ran.
//   train: training steps of a core preset on the fast CPU backend, on three synthetic host
//     batches in turn (the driver's task and noise); the check is the parameters' bits
//     after the first 3 steps from the preset's initialisation (then 3 warm-up steps).
//   loader: epochs of the loader (N worker processes forked here, so they run the same
//     allocator, which is asserted for each) over an ImageFolder; the check is epoch 0's
//     batches (images, labels, indices), a unit is a later epoch.
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/allocator/allocator.h"
#include "bench/driver/practice.h"
#include "kernels/clock.h"
#include "kernels/core.h"
#include "loaders/dataset.h"
#include "loaders/loader.h"

#define REQUEST_FD 0
#define REPLY_FD 3
#define CHECK_STEPS 3
#define WARMUP_STEPS 3
#define TRAIN_BATCHES 3

uint64_t alloc_hash(uint64_t h, const void *data, size_t bytes)
{
    // FNV-1a over 64-bit words (then the tail bytes): a check epoch hashes ~0.4 GB
    const unsigned char *p = data;
    const uint64_t prime = 1099511628211ull;
    for (; bytes >= 8; p += 8, bytes -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * prime;
    }
    for (; bytes > 0; p++, bytes--) h = (h ^ *p) * prime;
    return h;
}

// ---- facts about a process ----------------------------------------------------------------

// Reads /proc/<pid or self>/<name> whole into a malloc'd string, or NULL.
static char *proc_read(pid_t pid, const char *name)
{
    char path[64];
    if (pid) snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    else snprintf(path, sizeof path, "/proc/self/%s", name);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap + 1);
    size_t got;
    while (text && (got = fread(text + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *more = realloc(text, 2 * cap + 1);
            if (!more) { free(text); text = NULL; break; }
            text = more;
            cap *= 2;
        }
    }
    fclose(f);
    if (text) text[n] = '\0';
    return text;
}

int alloc_check_in_effect(AllocKind kind, pid_t pid)
{
    char *maps = proc_read(pid, "maps");
    if (!maps) return error_set(ERROR_IO, "cannot read /proc/%d/maps", (int)(pid ? pid : getpid()));
    const char *want = alloc_kind_marker(kind);
    int rc = 0;
    if (want && !strstr(maps, want)) {
        rc = error_set(ERROR_LIBRARY, "the practice was not in effect: %s is not mapped in process %d "
                       "(LD_PRELOAD did not load it)", want, (int)(pid ? pid : getpid()));
    }
    for (int k = 0; k < ALLOC_COUNT && rc == 0; k++) {
        const char *other = alloc_kind_marker((AllocKind)k);
        if (k != (int)kind && other && strstr(maps, other))
            rc = error_set(ERROR_LIBRARY, "the %s row has %s mapped in process %d: not the allocator asked for",
                           alloc_kind_name(kind), other, (int)(pid ? pid : getpid()));
    }
    free(maps);
    return rc;
}

double alloc_peak_rss_mib(pid_t pid)
{
    char *status = proc_read(pid, "status");
    const char *line = status ? strstr(status, "VmHWM:") : NULL;
    double kib = line ? atof(line + 6) : -1;
    free(status);
    return kib < 0 ? -1 : kib / 1024.0;
}

// The library this process's malloc comes from (the symbol the dynamic linker bound
// first: a preloaded allocator's), into out; 0, or -1 when it is not kind's.
static int malloc_library(AllocKind kind, char *out, size_t size)
{
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    if (!sym || !dladdr(sym, &info) || !info.dli_fname)
        return error_set(ERROR_LIBRARY, "cannot tell which library malloc comes from (dladdr)");
    snprintf(out, size, "%s", info.dli_fname);
    const char *want = alloc_kind_marker(kind);
    if (want ? !strstr(out, want) : !strstr(out, "libc."))
        return error_set(ERROR_LIBRARY, "the practice was not in effect: malloc comes from %s, not %s", out,
                         want ? want : "glibc's libc");
    return 0;
}

static double minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_minflt;
}

// ---- the arguments ------------------------------------------------------------------------

static int parse_args(int argc, char **argv, AllocWorkerArgs *a)
{
    *a = (AllocWorkerArgs){.selftest = "none"};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = strchr(s, '=');
        if (!v) return error_set(ERROR_BAD_USAGE, "allocator worker: bad argument '%s'", s);
        v++;
        size_t name = (size_t)(v - s);
        if (strncmp(s, ALLOC_WORKER_FLAG, name) == 0) a->work = strcmp(v, "loader") == 0 ? ALLOC_WORK_LOADER : ALLOC_WORK_TRAIN;
        else if (strncmp(s, "--allocator=", name) == 0) {
            a->kind = ALLOC_COUNT;
            for (int k = 0; k < ALLOC_COUNT; k++)
                if (strcmp(v, alloc_kind_name((AllocKind)k)) == 0) a->kind = (AllocKind)k;
            if (a->kind == ALLOC_COUNT) return error_set(ERROR_BAD_USAGE, "allocator worker: --allocator=%s", v);
        }
        else if (strncmp(s, "--preset=", name) == 0) a->preset = v;
        else if (strncmp(s, "--batch=", name) == 0) a->batch = atoi(v);
        else if (strncmp(s, "--threads=", name) == 0) a->threads = atoi(v);
        else if (strncmp(s, "--data-root=", name) == 0) a->data_root = v;
        else if (strncmp(s, "--workers=", name) == 0) a->workers = atoi(v);
        else if (strncmp(s, "--size=", name) == 0) a->size = atoi(v);
        else if (strncmp(s, "--loader-timeout=", name) == 0) a->loader_timeout_s = atoi(v);
        else if (strncmp(s, "--selftest=", name) == 0) a->selftest = v;
        else return error_set(ERROR_BAD_USAGE, "allocator worker: unknown argument '%s'", s);
    }
    return 0;
}

// Whether args ask for self-test `mode` ("": any; NULL: any that loses the whole update,
// every mode but half_lr and drop_step).
static bool selftest_is(const AllocWorkerArgs *a, const char *mode)
{
    if (strcmp(a->selftest, "none") == 0) return false;
    if (!mode) return strcmp(a->selftest, "half_lr") != 0 && strcmp(a->selftest, "drop_step") != 0;
    return !mode[0] || strcmp(a->selftest, mode) == 0;
}

// ---- the work -----------------------------------------------------------------------------

// A row's work, set up: run() times `count` units into seconds[] and adds to the reply.
typedef struct Work {
    const AllocWorkerArgs *args;
    // train
    Core *core;
    PracticeHostBatch batches[TRAIN_BATCHES];
    int64_t steps;
    // loader
    Dataset dataset;
    bool dataset_open;
    Loader *loader;
    int64_t epoch;
} Work;

static int train_setup(Work *w, AllocHello *hello)
{
    const AllocWorkerArgs *a = w->args;
    CoreConfig cfg;
    TRY(core_config_preset(&cfg, a->preset));
    cfg.backend = CORE_BACKEND_CPU;
    if (a->batch > 0) cfg.batch_size = a->batch;
    bool lose_update = selftest_is(a, NULL), drop_middle = selftest_is(a, "drop_step");
    if (selftest_is(a, "half_lr")) cfg.optim.base_lr *= 0.5f;
    TRY(core_config_validate(&cfg));
    if (a->threads > 0) core_cpu_set_threads(a->threads);
    for (int i = 0; i < TRAIN_BATCHES; i++)
        TRY(practice_host_batch(&w->batches[i], &cfg, cfg.batch_size, (uint64_t)i));
    TRY(core_create(&cfg, &w->core));
    size_t np = core_param_count(w->core);
    float *before = malloc(np * sizeof *before), *after = malloc(np * sizeof *after);
    int rc = before && after ? 0 : error_set(ERROR_OUT_OF_MEMORY, "parameters: out of memory");
    if (rc == 0) rc = core_params_get(w->core, before, np);
    for (int s = 0; s < CHECK_STEPS && rc == 0; s++)
        if (!(drop_middle && s == CHECK_STEPS / 2)) rc = core_step(w->core, &w->batches[s % TRAIN_BATCHES].b, NULL);
    if (rc == 0) rc = core_sync(w->core);
    if (rc == 0) rc = core_params_get(w->core, after, np);
    if (rc == 0) {
        double moved = 0, norm = 0;
        for (size_t i = 0; i < np; i++) {
            moved += ((double)after[i] - before[i]) * ((double)after[i] - before[i]);
            norm += (double)before[i] * before[i];
        }
        hello->check_moved = norm > 0 ? sqrt(moved / norm) : 0;
        // the self-test's frozen: a tuned run whose update is lost (the parameters it started from)
        hello->check_hash = alloc_hash(ALLOC_HASH_START, lose_update ? before : after, np * sizeof *after);
    }
    free(before);
    free(after);
    for (int s = 0; s < WARMUP_STEPS && rc == 0; s++) rc = core_step(w->core, &w->batches[s % TRAIN_BATCHES].b, NULL);
    w->steps = CHECK_STEPS + WARMUP_STEPS;
    return rc == 0 ? core_sync(w->core) : rc;
}

static int train_run(Work *w, int64_t count, double *seconds, AllocReply *r)
{
    for (int64_t i = 0; i < count; i++) {
        const CoreBatch *b = &w->batches[w->steps++ % TRAIN_BATCHES].b;
        double t0 = clock_seconds();
        TRY(core_step(w->core, b, NULL));
        TRY(core_sync(w->core));
        seconds[i] = clock_seconds() - t0;
        r->items += b->n;
    }
    return 0;
}

// One epoch of the loader: images delivered into *images; with hash non-NULL, the batches
// (the self-test leaves the first out: a lost batch). 0 or -1.
static int loader_epoch(Work *w, uint64_t *hash, int64_t *images)
{
    TRY(loader_begin_epoch(w->loader, w->epoch++));
    LoaderBatch b;
    int rc;
    *images = 0;
    for (int k = 0; (rc = loader_next_batch(w->loader, &b)) == 1; k++) {
        *images += b.count;
        if (!hash || (selftest_is(w->args, "") && k == 0)) continue;
        *hash = alloc_hash(*hash, b.images, b.image_bytes);
        *hash = alloc_hash(*hash, b.labels, (size_t)b.count * sizeof *b.labels);
        *hash = alloc_hash(*hash, b.indices, (size_t)b.count * sizeof *b.indices);
    }
    return rc < 0 ? -1 : 0;
}

static int loader_setup(Work *w, AllocHello *hello)
{
    const AllocWorkerArgs *a = w->args;
    TRY(dataset_scan(a->data_root, &w->dataset));
    w->dataset_open = true;
    LoaderConfig c = loader_default_config(&w->dataset, a->batch);
    c.num_workers = a->workers;
    c.persistent_workers = true;
    c.seed = 1;
    c.augment = augment_default_config(a->size);
    c.timeout_ms = a->loader_timeout_s * 1000;
    TRY(loader_create(&c, &w->loader));
    for (int i = 0; i < a->workers; i++)  // forked from here: the same allocator, asserted
        TRY(alloc_check_in_effect(a->kind, loader_worker_pid(w->loader, i)));
    hello->check_hash = ALLOC_HASH_START;
    return loader_epoch(w, &hello->check_hash, &hello->check_items);
}

static int loader_run(Work *w, int64_t count, double *seconds, AllocReply *r)
{
    for (int64_t i = 0; i < count; i++) {
        int64_t images;
        double t0 = clock_seconds();
        TRY(loader_epoch(w, NULL, &images));
        seconds[i] = clock_seconds() - t0;
        r->items += images;
        r->wrong_units += images != w->dataset.num_samples;
    }
    r->workers_peak_rss_mib = 0;
    for (int i = 0; i < w->args->workers; i++) {
        double mib = alloc_peak_rss_mib(loader_worker_pid(w->loader, i));
        if (mib < 0) return error_set(ERROR_IO, "cannot read loader worker %d's peak memory", i);
        r->workers_peak_rss_mib += mib;
    }
    return 0;
}

static void work_free(Work *w)
{
    loader_destroy(w->loader);
    if (w->dataset_open) dataset_free(&w->dataset);
    core_free(w->core);
    for (int i = 0; i < TRAIN_BATCHES; i++) practice_host_batch_free(&w->batches[i]);
}

// ---- the exchange -------------------------------------------------------------------------

static int write_all(const void *buf, size_t bytes)
{
    const char *p = buf;
    while (bytes > 0) {
        ssize_t n = write(REPLY_FD, p, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}

// 1 with a request read, 0 at the end (EOF, or a request to quit), -1.
static int read_request(int64_t *count)
{
    AllocRequest rq;
    size_t got = 0;
    while (got < sizeof rq) {
        ssize_t n = read(REQUEST_FD, (char *)&rq + got, sizeof rq - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return got == 0 ? 0 : -1;
        got += (size_t)n;
    }
    *count = rq.count;
    return rq.count > 0 ? 1 : 0;
}

static void fill_error(int32_t *ok, int32_t *kind, char *message, size_t size)
{
    *ok = 0;
    *kind = (int32_t)error_kind();
    snprintf(message, size, "%s", error_message());
}

// Answers requests until told to quit; the exit status.
static int serve(Work *w)
{
    int64_t count;
    int got;
    double *seconds = NULL;
    while ((got = read_request(&count)) == 1) {
        AllocReply r = {.ok = 1, .count = count};
        double *more = count <= ALLOC_MAX_UNITS ? realloc(seconds, (size_t)count * sizeof *seconds) : NULL;
        int rc = more ? 0 : error_set(ERROR_BAD_USAGE, "allocator worker: a request for %lld units", (long long)count);
        if (more) seconds = more;
        double faults0 = minor_faults();
        if (rc == 0) rc = w->args->work == ALLOC_WORK_TRAIN ? train_run(w, count, seconds, &r) : loader_run(w, count, seconds, &r);
        r.minor_faults = minor_faults() - faults0;
        r.peak_rss_mib = alloc_peak_rss_mib(0);
        if (rc != 0) fill_error(&r.ok, &r.error_kind, r.message, sizeof r.message);
        if (write_all(&r, sizeof r) != 0 || (rc == 0 && write_all(seconds, (size_t)count * sizeof *seconds) != 0) ||
            rc != 0)
            break;
    }
    free(seconds);
    return got == 0 ? 0 : 1;
}

int alloc_worker_main(int argc, char **argv)
{
    // stdout is the parent's results: anything printed here goes to stderr instead
    fflush(stdout);
    dup2(STDERR_FILENO, STDOUT_FILENO);
    AllocWorkerArgs a;
    Work w = {.args = &a};
    // the program's libraries alone (CUDA's among them) are ~160 MiB of it
    AllocHello hello = {.ok = 1, .start_rss_mib = alloc_peak_rss_mib(0)};
    double t0 = clock_seconds();
    int rc = parse_args(argc, argv, &a);
    if (rc == 0) rc = alloc_check_in_effect(a.kind, 0);
    if (rc == 0) rc = malloc_library(a.kind, hello.malloc_from, sizeof hello.malloc_from);
    if (rc == 0) rc = a.work == ALLOC_WORK_TRAIN ? train_setup(&w, &hello) : loader_setup(&w, &hello);
    hello.setup_seconds = clock_seconds() - t0;
    if (rc != 0) fill_error(&hello.ok, &hello.error_kind, hello.message, sizeof hello.message);
    int status = write_all(&hello, sizeof hello) != 0 ? 1 : rc != 0 ? 0 : serve(&w);
    work_free(&w);
    return status;
}
