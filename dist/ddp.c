// ddp.c: DistributedDataParallel: buckets, the gradients-ready hook, the communication
// stream (CUDA) or thread (CPU), no_sync accumulation (see ddp.h).
//
// Buckets follow PyTorch's rebuild: the first step reduces every gradient at once after
// backward and records the order in which backward reported the gradients; the buckets
// are then cut from that order (reverse parameter order), as PyTorch rebuilds its buckets
// after the first iteration (bucket_order_forward: cut from the reverse of that order).
// Each bucket is one contiguous range of the core's flat gradient buffer, reduced in place
// (PyTorch's gradient_as_bucket_view), so no copies.
#include "dist/ddp.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/check.h"
#include "kernels/error.h"

enum { MAX_UNITS = 1024 };

typedef struct Bucket {
    size_t lo, hi;        // flat gradient range [lo, hi)
    size_t pending;       // floats not yet reported this backward
    cudaEvent_t ready;    // CUDA: the core's event of the bucket's last gradient
} Bucket;

struct Ddp {
    Core *core;
    DistComm *comm;
    DdpConfig cfg;
    bool cuda;
    float scale;                     // 1 / (world x accumulation_steps); sync every micro-batch: 1 / world
    float loss_weight;               // each micro-batch's (sync every micro-batch: / accumulation_steps)
    float *grads;                    // the core's gradient buffer (from the hooks)
    void *stream;                    // CUDA: the core's compute stream (from the hooks)
    bool sync;                       // this backward all-reduces (not a no_sync micro-step)
    // the first step's record of the ready order, then the buckets cut from it
    size_t unit_lo[MAX_UNITS], unit_hi[MAX_UNITS];
    int units;
    Bucket *buckets;
    int n_buckets;
    int next_launch;                 // buckets handed to the communication stream/thread
    // CUDA
    cudaStream_t comm_stream;
    cudaEvent_t comm_done;
    // CPU: the communication thread
    pthread_t thread;
    bool thread_started, stop;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int completed;                   // buckets the thread has reduced this step
    bool failed;
    ErrorKind fail_kind;
    char fail_message[512];
    double comm_ms, wait_ms;
    long long allreduces;
    int steps;
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

DdpConfig ddp_config_default(void)
{
    return (DdpConfig){.bucket_cap_bytes = DDP_DEFAULT_BUCKET_CAP_BYTES,
                       .first_bucket_bytes = DDP_DEFAULT_FIRST_BUCKET_BYTES, .overlap = true,
                       .accumulation_steps = 1};
}

// ---- the CPU communication thread: reduces buckets in order as they are handed over ----

static void *comm_thread(void *arg)
{
    Ddp *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && d->completed >= d->next_launch) pthread_cond_wait(&d->work, &d->mu);
        if (d->stop) break;
        Bucket *b = &d->buckets[d->completed];
        pthread_mutex_unlock(&d->mu);
        double t0 = now_ms();
        int rc = dist_comm_allreduce(d->comm, d->grads + b->lo, d->grads + b->lo, b->hi - b->lo, d->scale, NULL);
        double spent = now_ms() - t0;
        pthread_mutex_lock(&d->mu);
        d->comm_ms += spent;
        d->allreduces++;
        if (rc != 0 && !d->failed) {
            d->failed = true;
            d->fail_kind = error_kind();
            snprintf(d->fail_message, sizeof d->fail_message, "%s", error_message());
        }
        d->completed++;
        pthread_cond_broadcast(&d->done);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

// Hands every ready bucket, in bucket order, to the communication stream or thread.
static int launch_ready(Ddp *d)
{
    while (d->next_launch < d->n_buckets && d->buckets[d->next_launch].pending == 0) {
        Bucket *b = &d->buckets[d->next_launch];
        if (d->cuda) {
            CUDA_TRY(cudaStreamWaitEvent(d->comm_stream, b->ready, 0));
            TRY(dist_comm_allreduce(d->comm, d->grads + b->lo, d->grads + b->lo, b->hi - b->lo, d->scale,
                                    d->comm_stream));
            d->next_launch++;
            d->allreduces++;
        } else {
            pthread_mutex_lock(&d->mu);
            d->next_launch++;
            pthread_cond_signal(&d->work);
            pthread_mutex_unlock(&d->mu);
        }
    }
    return 0;
}

int ddp_broadcast_buffers(Ddp *d)
{
    size_t n = core_buffer_count(d->core);
    if (n == 0 || d->cfg.keep_local_buffers || dist_comm_world(d->comm) <= 1) return 0;
    float *buffers = NULL;
    void *stream = NULL;
    TRY(core_buffers(d->core, &buffers, &stream));
    // CUDA: enqueued on the core's compute stream, after the last step's updates of the
    // statistics and before the next forward reads them; a peer that never joins shows
    // up in the step's dist_comm_wait (the bucket all-reduces queue behind it).
    // CPU: the communication thread is idle between steps (MPI_THREAD_SERIALIZED).
    if (dist_comm_broadcast(d->comm, buffers, n, stream) != 0)
        return error_wrap("rank %d: DDP: broadcasting the BatchNorm buffers", dist_comm_rank(d->comm));
    return 0;
}

static int on_ready(void *user, const CoreGradReady *r)
{
    Ddp *d = user;
    d->grads = r->grads;
    d->stream = r->stream;
    if (!d->sync) return 0;
    if (!d->buckets) {  // the first step: record the order
        if (d->units >= MAX_UNITS)
            return error_set(ERROR_BAD_USAGE, "rank %d: DDP: more than %d parameter groups", dist_comm_rank(d->comm), MAX_UNITS);
        d->unit_lo[d->units] = r->offset;
        d->unit_hi[d->units] = r->offset + r->count;
        d->units++;
        return 0;
    }
    if (!d->cfg.overlap) return 0;
    for (int i = 0; i < d->n_buckets; i++) {
        Bucket *b = &d->buckets[i];
        size_t lo = r->offset > b->lo ? r->offset : b->lo;
        size_t hi = r->offset + r->count < b->hi ? r->offset + r->count : b->hi;
        if (lo >= hi) continue;
        if (hi - lo > b->pending)
            return error_set(ERROR_BAD_USAGE, "rank %d: DDP: gradients of [%zu, %zu) reported twice in one backward",
                             dist_comm_rank(d->comm), r->offset, r->offset + r->count);
        b->pending -= hi - lo;
        if (b->pending == 0) b->ready = (cudaEvent_t)r->event;
    }
    return launch_ready(d);
}

// Cuts the buckets from the first step's ready order.
static int build_buckets(Ddp *d)
{
    size_t np = core_param_count(d->core);
    Bucket *buckets = calloc((size_t)(d->units ? d->units : 1), sizeof *buckets);
    if (!buckets) return error_set(ERROR_OUT_OF_MEMORY, "DDP buckets: out of memory");
    int n = 0;
    size_t covered = 0;
    for (int k = 0; k < d->units; k++) {
        int u = d->cfg.bucket_order_forward ? d->units - 1 - k : k;  // forward: the first layers first
        size_t cap = n == 0 && d->cfg.first_bucket_bytes ? d->cfg.first_bucket_bytes : d->cfg.bucket_cap_bytes;
        Bucket *b = &buckets[n];
        if (b->hi == b->lo) { b->lo = d->unit_lo[u]; b->hi = d->unit_hi[u]; }
        else if (d->unit_hi[u] == b->lo) b->lo = d->unit_lo[u];      // backward order: grows down
        else if (d->unit_lo[u] == b->hi) b->hi = d->unit_hi[u];
        else {
            free(buckets);
            return error_set(ERROR_BAD_USAGE, "rank %d: DDP: backward reported [%zu, %zu) out of parameter order",
                             dist_comm_rank(d->comm), d->unit_lo[u], d->unit_hi[u]);
        }
        covered += d->unit_hi[u] - d->unit_lo[u];
        if (cap && (b->hi - b->lo) * sizeof(float) >= cap) n++;
    }
    if (n < d->units && buckets[n].hi > buckets[n].lo) n++;
    if (covered != np) {
        free(buckets);
        return error_set(ERROR_BAD_USAGE, "rank %d: DDP: backward reported %zu of %zu gradients",
                         dist_comm_rank(d->comm), covered, np);
    }
    d->buckets = buckets;
    d->n_buckets = n;
    return 0;
}

// Waits for the communication thread with the deadline; a peer that died shows up here
// (or MPI's own error) and every rank stops, non-zero.
static int wait_thread(Ddp *d)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    int timeout_ms = dist_comm_timeout_ms(d->comm);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    while (d->completed < d->n_buckets && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&d->done, &d->mu, &deadline);
    bool timed_out = d->completed < d->n_buckets;
    bool failed = d->failed;
    pthread_mutex_unlock(&d->mu);
    if (timed_out) {
        // The watchdog: the thread is stuck in MPI with a dead or hung peer. Nothing can
        // unblock it; stop the whole job.
        fprintf(stderr, "rank %d: DDP watchdog: bucket all-reduce %d of %d not done after %.1f s: a peer died or hangs\n",
                dist_comm_rank(d->comm), d->completed + 1, d->n_buckets, timeout_ms / 1e3);
        dist_comm_abort(d->comm, 3);
    }
    if (failed) return error_restore(d->fail_kind, d->fail_message);
    return 0;
}

// The end of a backward that all-reduces: the update's (before_update) or, with
// sync_every_micro_batch, each micro-batch's, ordered before the next backward.
static int finish_allreduces(Ddp *d, float *grads, size_t count, void *stream)
{
    d->grads = grads;
    double t0 = now_ms();
    if (!d->buckets || !d->cfg.overlap) {  // one all-reduce of everything after backward
        d->allreduces++;
        TRY(dist_comm_allreduce(d->comm, grads, grads, count, d->scale, stream));
        if (!d->buckets) TRY(build_buckets(d));
        if (d->cuda) TRY(dist_comm_wait(d->comm, stream));
        d->wait_ms += now_ms() - t0;
        return 0;
    }
    if (d->next_launch < d->n_buckets)
        return error_set(ERROR_BAD_USAGE, "rank %d: DDP: bucket %d never got all its gradients",
                         dist_comm_rank(d->comm), d->next_launch);
    if (d->cuda) {
        CUDA_TRY(cudaEventRecord(d->comm_done, d->comm_stream));
        CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)stream, d->comm_done, 0));
    } else {
        TRY(wait_thread(d));
    }
    d->wait_ms += now_ms() - t0;
    return 0;
}

static int before_update(void *user, float *grads, size_t count, void *stream)
{
    return finish_allreduces(user, grads, count, stream);
}

int ddp_create(Core *core, DistComm *comm, const DdpConfig *cfg, Ddp **out)
{
    *out = NULL;
    int rank = dist_comm_rank(comm);
    if (cfg->accumulation_steps < 1)
        return error_set(ERROR_BAD_USAGE, "rank %d: DDP: accumulation_steps must be >= 1", rank);
    if (!(cfg->loss_weight >= 0.0f))
        return error_set(ERROR_BAD_USAGE, "rank %d: DDP: loss_weight must be >= 0 (0: 1)", rank);
    CoreStats st;
    TRY(core_stats(core, &st));
    bool cuda = st.backend == CORE_BACKEND_CUDA;
    if (cuda != (dist_comm_kind(comm) == DIST_COMM_NCCL))
        return error_set(ERROR_BAD_USAGE, "rank %d: DDP: the %s backend needs the %s communicator", rank,
                         core_backend_name(st.backend), cuda ? "nccl" : "mpi");
    Ddp *d = calloc(1, sizeof *d);
    if (!d) return error_set(ERROR_OUT_OF_MEMORY, "calloc(Ddp): out of memory");
    d->core = core;
    d->comm = comm;
    d->cfg = *cfg;
    d->cuda = cuda;
    float steps = (float)cfg->accumulation_steps, world = (float)dist_comm_world(comm);
    d->scale = cfg->sync_every_micro_batch ? 1.0f / world : 1.0f / (world * steps);
    d->loss_weight = (cfg->loss_weight > 0.0f ? cfg->loss_weight : 1.0f) / (cfg->sync_every_micro_batch ? steps : 1.0f);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->done, NULL);
    *out = d;

    // Every replica starts from rank 0's parameters, as DDP's constructor broadcasts them.
    size_t np = core_param_count(core);
    float *host = malloc(np * sizeof *host);
    if (!host) { ddp_free(d); *out = NULL; return error_set(ERROR_OUT_OF_MEMORY, "DDP: out of memory"); }
    int rc = core_params_get(core, host, np);
    if (rc == 0 && cuda) {
        float *dev = NULL;
        rc = -1;
        if (cudaStreamCreateWithFlags(&d->comm_stream, cudaStreamNonBlocking) == cudaSuccess &&
            cudaEventCreateWithFlags(&d->comm_done, cudaEventDisableTiming) == cudaSuccess &&
            cudaMalloc((void **)&dev, np * sizeof *dev) == cudaSuccess &&
            // on the stream the broadcast runs on: a pageable cudaMemcpy may return before
            // its DMA lands, and the non-blocking comm stream is not ordered after it
            cudaMemcpyAsync(dev, host, np * sizeof *dev, cudaMemcpyHostToDevice, d->comm_stream) == cudaSuccess &&
            dist_comm_broadcast(comm, dev, np, d->comm_stream) == 0 && dist_comm_wait(comm, d->comm_stream) == 0 &&
            cudaMemcpyAsync(host, dev, np * sizeof *dev, cudaMemcpyDeviceToHost, d->comm_stream) == cudaSuccess &&
            cudaStreamSynchronize(d->comm_stream) == cudaSuccess)
            rc = 0;
        else if (error_kind() == ERROR_NONE)
            error_set(ERROR_LIBRARY, "rank %d: DDP: CUDA setup or parameter broadcast failed", rank);
        cudaFree(dev);
    } else if (rc == 0) {
        rc = dist_comm_broadcast(comm, host, np, NULL);
        if (rc == 0 && pthread_create(&d->thread, NULL, comm_thread, d) != 0)
            rc = error_set(ERROR_LIBRARY, "rank %d: DDP: cannot start the communication thread", rank);
        else if (rc == 0)
            d->thread_started = true;
    }
    if (rc == 0) rc = core_params_set(core, host, np);
    free(host);
    if (rc == 0) rc = ddp_broadcast_buffers(d);  // the module's buffers too, as DDP's constructor
    if (rc == 0 && cuda) {  // ... done, with the deadline, before the first step
        float *buffers = NULL;
        void *stream = NULL;
        rc = core_buffers(core, &buffers, &stream);
        if (rc == 0) rc = dist_comm_wait(comm, stream);
    }
    CoreGradHooks hooks = {.ready = on_ready, .before_update = before_update, .user = d};
    if (rc == 0) rc = core_set_grad_hooks(core, &hooks);
    if (rc != 0) { ddp_free(d); *out = NULL; return -1; }
    return 0;
}

int ddp_step(Ddp *d, const CoreBatch *micro, int global_batch, CoreStepResult *result)
{
    int steps = d->cfg.accumulation_steps;
    // broadcast_buffers: before the first forward of the step only; PyTorch skips it in the
    // forwards under no_sync, whose previous forward did not sync.
    TRY(ddp_broadcast_buffers(d));
    for (int a = 0; a < steps; a++) {
        bool last = a == steps - 1;
        // no_sync() for every micro-batch but the last, unless each one all-reduces
        d->sync = last || d->cfg.sync_every_micro_batch;
        if (d->sync) {
            for (int i = 0; i < d->n_buckets; i++) d->buckets[i].pending = d->buckets[i].hi - d->buckets[i].lo;
            pthread_mutex_lock(&d->mu);
            d->next_launch = d->completed = 0;
            pthread_mutex_unlock(&d->mu);
        }
        int rc = core_forward_backward_weighted(d->core, &micro[a], a > 0, d->loss_weight);
        // not the last: its all-reduces must end before the next backward adds to them
        if (rc == 0 && d->sync && !last) rc = finish_allreduces(d, d->grads, core_param_count(d->core), d->stream);
        if (rc != 0) {
            d->sync = false;
            return error_wrap("rank %d: micro-batch %d", dist_comm_rank(d->comm), a);
        }
    }
    d->sync = false;
    int rc = core_apply_update(d->core, global_batch, result);
    // A communication thread that is still busy (an error above) must finish with the
    // gradients before anything else touches them.
    if (!d->cuda && d->buckets && d->cfg.overlap && d->next_launch > d->completed) (void)wait_thread(d);
    if (rc != 0) return -1;
    if (d->cuda) TRY(dist_comm_wait(d->comm, d->comm_stream));
    d->steps++;
    return 0;
}

void ddp_stats(const Ddp *d, DdpStats *s)
{
    memset(s, 0, sizeof *s);
    s->buckets = d->n_buckets;
    for (int i = 0; i < d->n_buckets; i++) {
        size_t bytes = (d->buckets[i].hi - d->buckets[i].lo) * sizeof(float);
        if (bytes > s->largest_bucket) s->largest_bucket = bytes;
    }
    s->comm_ms = d->comm_ms;
    s->wait_ms = d->wait_ms;
    s->allreduces = d->allreduces;
    s->steps = d->steps;
}

void ddp_free(Ddp *d)
{
    if (!d) return;
    core_set_grad_hooks(d->core, NULL);
    if (d->thread_started) {
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_broadcast(&d->work);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    if (d->comm_stream) cudaStreamDestroy(d->comm_stream);
    if (d->comm_done) cudaEventDestroy(d->comm_done);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->work);
    pthread_cond_destroy(&d->done);
    free(d->buckets);
    free(d);
}
