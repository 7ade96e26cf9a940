// max_batch.c: the largest-batch probes' budget, ballast, search, estimate, counters and
// label (max_batch.h).
#include "bench/driver/max_batch.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/check.h"
#include "kernels/error.h"
#include "kernels/model.h"

#define OPTION "max_batch_memory_mib"
#define MIB ((size_t)1 << 20)
#define GRANULE (2 * MIB)  // cudaMalloc's page: the ballast is held in whole ones

void max_batch_option(void)
{
    harness_option_int(OPTION, MAX_BATCH_DEFAULT_MIB, 0, (int64_t)1 << 30, NULL,
                       "largest-batch probes (*_max_batch): the memory a batch may use, MiB; on a "
                       "GPU the rest of the device's free memory is held as ballast while probing, "
                       "on a CPU the estimate reads against it (0: all the device's free memory, "
                       "the machine's memory)");
}

int max_batch_values_per_image(const CoreModelConfig *m, size_t *values)
{
    ModelGraph *g = malloc(sizeof *g);
    if (!g) return error_set(ERROR_OUT_OF_MEMORY, "model graph: out of memory (host)");
    int rc = model_build(m, g);
    *values = 0;
    for (int t = 0; rc == 0 && t < g->n_tensors; t++) {
        size_t v = model_tensor_size(g, t);
        if (v > *values) *values = v;
    }
    free(g);
    return rc;
}

int max_batch_guard(size_t values_per_image)
{
    size_t n = values_per_image ? (size_t)INT32_MAX / values_per_image : (size_t)INT32_MAX;
    return n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
}

int max_batch_search_init(const CoreConfig *cfg, int start, const char *cap_flag, MaxBatchSearch *s)
{
    *s = (MaxBatchSearch){.start = start > 0 ? start : 1, .cap_flag = cap_flag, .device = cfg->device};
    s->cap = (int)harness_option_int_value(cap_flag);
    s->budget = (size_t)harness_option_int_value(OPTION) * MIB;
    return max_batch_values_per_image(&cfg->model, &s->values_per_image);
}

// ---- the search ------------------------------------------------------------------------------

// Runs batch n for the search: 0 with *fit (out of memory: false), or 1 when another
// error ended the search after a batch that fitted (r says so), or -1 when it came before any.
static int try_batch(MaxBatchRunFn run, void *ctx, int n, bool *fit, MaxBatchResult *r)
{
    r->probes++;
    *fit = run(ctx, n) == 0;
    if (*fit || error_kind() == ERROR_OUT_OF_MEMORY) return 0;
    if (r->largest == 0) return -1;
    r->stop = MAX_BATCH_STOP_ERROR;
    r->next = n;
    snprintf(r->error, sizeof r->error, "%s", error_message());
    return 1;
}

// The first batch tried: the start, within the cap and the guard.
static int first_batch(const MaxBatchSearch *s)
{
    int n = s->start, guard = max_batch_guard(s->values_per_image);
    if (n > s->cap) n = s->cap;
    if (n > guard) n = guard;
    return n < 1 ? 1 : n;
}

int max_batch_search(const MaxBatchSearch *s, MaxBatchRunFn run, void *ctx, MaxBatchResult *r)
{
    *r = (MaxBatchResult){0};
    int guard = max_batch_guard(s->values_per_image);
    int n = first_batch(s);
    bool fit = false;
    // Down: halve until a batch fits (the start fits at once in the usual case).
    for (;;) {
        int rc = try_batch(run, ctx, n, &fit, r);
        if (rc < 0) return -1;
        if (fit) break;
        r->next = n;
        if (n == 1) {
            r->stop = MAX_BATCH_STOP_MEMORY;
            return 0;
        }
        n /= 2;
    }
    r->largest = n;
    if (r->next > 0) {  // found going down: the batch above it did not fit
        r->stop = MAX_BATCH_STOP_MEMORY;
        return 0;
    }
    // Up: double until a batch does not fit, or the cap or the guard comes first.
    for (;;) {
        int m = n > INT32_MAX / 2 ? INT32_MAX : 2 * n;
        r->next = m;
        if (m > s->cap) {
            r->stop = MAX_BATCH_STOP_CAP;
            return 0;
        }
        if (m > guard) {
            r->stop = MAX_BATCH_STOP_GUARD;
            return 0;
        }
        if (try_batch(run, ctx, m, &fit, r) != 0) return 0;  // an error after a fit: r says it
        if (!fit) {
            r->stop = MAX_BATCH_STOP_MEMORY;
            return 0;
        }
        r->largest = n = m;
    }
}

int max_batch_ballast_hold(int device, size_t budget, MaxBatchBallast *b)
{
    *b = (MaxBatchBallast){0};
    size_t total = 0;
    CUDA_TRY(cudaSetDevice(device));
    CUDA_TRY(cudaMemGetInfo(&b->free_before, &total));
    size_t want = b->free_before > budget ? (b->free_before - budget) / GRANULE * GRANULE : 0;
    size_t chunk = want;
    while (want >= GRANULE && chunk >= GRANULE && b->count < MAX_BATCH_BALLAST_BLOCKS) {
        if (chunk > want) chunk = want;
        void *p = NULL;
        cudaError_t e = cudaMalloc(&p, chunk);
        if (e == cudaErrorMemoryAllocation) {  // not sticky: clear it and try a smaller block
            (void)cudaGetLastError();
            chunk = chunk / 2 / GRANULE * GRANULE;
            continue;
        }
        if (e != cudaSuccess) {
            max_batch_ballast_release(b);
            return check_cuda_failed(e, __FILE__, __LINE__, "cudaMalloc (ballast)");
        }
        b->blocks[b->count++] = p;
        b->held += chunk;
        want -= chunk;
    }
    cudaError_t e = cudaMemGetInfo(&b->free_after, &total);
    if (e != cudaSuccess) {
        max_batch_ballast_release(b);
        return check_cuda_failed(e, __FILE__, __LINE__, "cudaMemGetInfo");
    }
    return 0;
}

void max_batch_ballast_release(MaxBatchBallast *b)
{
    for (int i = 0; i < b->count; i++) cudaFree(b->blocks[i]);
    b->count = 0;
    b->held = 0;
}

int max_batch_probe(const MaxBatchSearch *s, MaxBatchRunFn run, void *ctx, MaxBatchResult *r)
{
    MaxBatchBallast ballast = {0};
    size_t free_b = 0, total = 0;
    if (s->budget > 0) {
        // One run first, without the ballast: what the libraries load once (kernels,
        // handles) is not the batch's memory.
        if (run(ctx, first_batch(s)) != 0 && error_kind() != ERROR_OUT_OF_MEMORY) return -1;
        TRY(max_batch_ballast_hold(s->device, s->budget, &ballast));
        free_b = ballast.free_after;
    } else {
        CUDA_TRY(cudaSetDevice(s->device));
        CUDA_TRY(cudaMemGetInfo(&free_b, &total));
    }
    int rc = max_batch_search(s, run, ctx, r);
    max_batch_ballast_release(&ballast);
    r->memory = (double)free_b;
    return rc;
}

// ---- the estimate ---------------------------------------------------------------------------

double max_batch_memory(const MaxBatchSearch *s)
{
    double machine = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    return s->budget > 0 && (double)s->budget < machine ? (double)s->budget : machine;
}

int max_batch_estimate(const MaxBatchSearch *s, MaxBatchPeakFn peak, void *ctx, size_t input_bytes,
                       double memory, MaxBatchResult *r)
{
    enum { N1 = MAX_BATCH_ESTIMATE_N1, N2 = MAX_BATCH_ESTIMATE_N2 };
    *r = (MaxBatchResult){.estimated = true, .memory = memory};
    size_t p1 = 0, p2 = 0;
    TRY(peak(ctx, N1, &p1));
    TRY(peak(ctx, N2, &p2));
    double slope = p2 > p1 ? (double)(p2 - p1) / (N2 - N1) : 0.0;
    double fixed = (double)p1 - slope * N1;
    r->bytes_per_image = slope + (double)input_bytes;
    double fits = floor((memory - fixed) / r->bytes_per_image);
    int guard = max_batch_guard(s->values_per_image);
    if (fits >= s->cap) {  // the cap first: a capped row says so even past the guard
        r->largest = s->cap;
        r->stop = MAX_BATCH_STOP_CAP;
    } else if (fits > guard) {
        r->largest = guard;
        r->stop = MAX_BATCH_STOP_GUARD;
    } else {
        r->largest = fits > 0 ? (int)fits : 0;
        r->stop = MAX_BATCH_STOP_MEMORY;
    }
    r->next = r->largest + 1;
    return 0;
}

// ---- what the rows report ---------------------------------------------------------------------

static double mib(double bytes) { return bytes / (double)MIB; }

bool max_batch_skip_if_none(HarnessState *st, const MaxBatchSearch *s, const MaxBatchResult *r)
{
    if (r->largest > 0) return false;
    char why[300];
    snprintf(why, sizeof why, "out of memory: not even a batch of %d fits in %.0f MiB (--%s=%zu)",
             r->estimated ? 1 : r->next, mib(r->memory), OPTION, s->budget / MIB);
    harness_skip(st, why);
    return true;
}

void max_batch_counters(HarnessState *st, const MaxBatchSearch *s, const MaxBatchResult *r)
{
    harness_counter(st, "max_batch", r->largest, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_batch_capped", r->stop == MAX_BATCH_STOP_CAP, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_batch_at_guard", r->stop == MAX_BATCH_STOP_GUARD, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_batch_out_of_memory", r->stop == MAX_BATCH_STOP_MEMORY, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "max_batch_estimated", r->estimated, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "memory_budget_mib", mib((double)s->budget), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "memory_available_mib", mib(r->memory), HARNESS_COUNTER_PLAIN);
    if (r->estimated) harness_counter(st, "bytes_per_image", r->bytes_per_image, HARNESS_COUNTER_PLAIN);
    else harness_counter(st, "max_batch_probes", r->probes, HARNESS_COUNTER_PLAIN);
}

// What ended the search, for the label.
static void stopped_by(const MaxBatchSearch *s, const MaxBatchResult *r, char *buf, size_t size)
{
    switch (r->stop) {
    case MAX_BATCH_STOP_MEMORY:
        snprintf(buf, size, "out of memory");
        break;
    case MAX_BATCH_STOP_CAP:
        snprintf(buf, size, "the cap (--%s=%d), still fitting", s->cap_flag, s->cap);
        break;
    case MAX_BATCH_STOP_GUARD:
        snprintf(buf, size, "the guard, still fitting: a tensor of %zu values there, past the "
                 "2^31 that cuDNN (and int-indexed kernels) take", (size_t)r->next * s->values_per_image);
        break;
    case MAX_BATCH_STOP_ERROR:
        snprintf(buf, size, "an error: %s", r->error);
        break;
    }
}

void max_batch_describe(const MaxBatchSearch *s, const MaxBatchResult *r, char *buf, size_t size)
{
    char stop[700];
    stopped_by(s, r, stop, sizeof stop);
    size_t budget = s->budget / MIB;
    if (r->estimated) {
        snprintf(buf, size, "estimated, not probed (a CPU swaps long before an allocation fails): "
                 "%.0f MiB (--%s=%zu%s) over %.0f bytes per image (the core's peak at batch %d and "
                 "%d, plus the input); largest %d, stopped by: %s", mib(r->memory), OPTION, budget,
                 budget ? "; the machine's memory when less" : ": the machine's memory",
                 r->bytes_per_image, MAX_BATCH_ESTIMATE_N1, MAX_BATCH_ESTIMATE_N2, r->largest, stop);
        return;
    }
    snprintf(buf, size, "probed: the batch halved or doubled from %d within --%s=%zu (%s; %.0f MiB "
             "free while probing); largest %d, stopped at %d by: %s", first_batch(s), OPTION, budget,
             budget ? "the rest of the device's free memory held as ballast"
                    : "no budget: all of the device's free memory",
             mib(r->memory), r->largest, r->next, stop);
}
