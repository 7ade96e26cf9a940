// pin_thread.c: the pin-memory thread (pin_thread.h): a bounded pool of page-locked
// buffers, filled in item order by one thread, taken in order and given back by the caller.
#include "loaders/pin_thread.h"

#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/pinned.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { BUF_FREE, BUF_FILLING, BUF_READY, BUF_HELD, BUF_FAILED } BufState;

typedef struct PinBuffer {
    void *ptr;         // NULL while free in the fresh-buffer-per-item mode
    size_t used;
    int64_t item;
    BufState state;
    ErrorKind error_kind; // BUF_FAILED: the fill's error
    char error[1024];
} PinBuffer;

struct PinThread {
    PinThreadConfig cfg;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t changed;      // any state change; waited on by both sides
    PinBuffer *bufs;
    int64_t end;                 // the run is items [.., end)
    int64_t next_fill;           // next item the thread fills
    int64_t next_take;           // next item the caller takes
    bool running;                // the thread may fill items of the run
    bool filling;                // the thread is inside cfg.fill (lock released)
    bool quit;
    atomic_bool cancel;
    double busy_seconds;
};

static int buffer_alloc(const PinThreadConfig *c, void **ptr)
{
    return c->alloc ? c->alloc(c->buffer_bytes, ptr) : pinned_alloc(c->buffer_bytes, ptr);
}

static void buffer_free(const PinThreadConfig *c, void *ptr)
{
    if (!ptr) return;
    if (c->free) c->free(ptr);
    else pinned_free(ptr);
}

static int find_free(const PinThread *t)
{
    for (int i = 0; i < t->cfg.depth; i++)
        if (t->bufs[i].state == BUF_FREE) return i;
    return -1;
}

static void *pin_thread_main(void *arg)
{
    PinThread *t = arg;
    pthread_mutex_lock(&t->lock);
    while (!t->quit) {
        int i = t->running && t->next_fill < t->end ? find_free(t) : -1;
        if (i < 0) {
            pthread_cond_wait(&t->changed, &t->lock);
            continue;
        }
        PinBuffer *b = &t->bufs[i];
        b->state = BUF_FILLING;
        b->item = t->next_fill++;
        b->used = 0;
        b->error[0] = '\0';
        b->error_kind = ERROR_NONE;
        t->filling = true;
        pthread_mutex_unlock(&t->lock);

        double t0 = clock_seconds();
        int rc = 0;
        if (!b->ptr && buffer_alloc(&t->cfg, &b->ptr) != 0) rc = error_wrap("pin thread");
        if (rc == 0)
            rc = t->cfg.fill(t->cfg.ctx, b->item, b->ptr, t->cfg.buffer_bytes, &b->used,
                             &t->cancel);
        if (rc < 0) {  // this thread's error goes to whoever takes the item
            b->error_kind = error_kind();
            snprintf(b->error, sizeof b->error, "%s", error_message());
        }
        double busy = clock_seconds() - t0;

        pthread_mutex_lock(&t->lock);
        t->filling = false;
        t->busy_seconds += busy;
        if (rc == 0) {
            b->state = BUF_READY;
        } else if (rc > 0) {  // cancelled: the run is being stopped
            b->state = BUF_FREE;
        } else {
            b->state = BUF_FAILED;
            t->running = false;  // nothing after a failed item
        }
        pthread_cond_broadcast(&t->changed);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

void pin_thread_destroy(PinThread *t)
{
    if (!t) return;
    if (t->thread_started) {
        pthread_mutex_lock(&t->lock);
        t->quit = true;
        atomic_store(&t->cancel, true);
        pthread_cond_broadcast(&t->changed);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->thread, NULL);
    }
    if (t->bufs)
        for (int i = 0; i < t->cfg.depth; i++) buffer_free(&t->cfg, t->bufs[i].ptr);
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
    free(t->bufs);
    free(t);
}

int pin_thread_create(const PinThreadConfig *cfg, PinThread **out)
{
    *out = NULL;
    if (!cfg->fill || cfg->depth < 2 || cfg->buffer_bytes == 0)
        return error_set(ERROR_BAD_USAGE, "pin thread: needs a fill function, depth >= 2 and a buffer size");
    PinThread *t = calloc(1, sizeof *t);
    if (!t) return error_set(ERROR_OUT_OF_MEMORY, "pin thread: out of memory");
    t->cfg = *cfg;
    atomic_init(&t->cancel, false);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, &attr);
    pthread_condattr_destroy(&attr);
    t->bufs = calloc((size_t)cfg->depth, sizeof *t->bufs);
    if (!t->bufs) {
        pin_thread_destroy(t);
        return error_set(ERROR_OUT_OF_MEMORY, "pin thread: out of memory");
    }
    if (!cfg->fresh_buffer_per_item)
        for (int i = 0; i < cfg->depth; i++)
            if (buffer_alloc(cfg, &t->bufs[i].ptr) != 0) {
                char msg[1024];
                ErrorKind kind = error_kind();
                snprintf(msg, sizeof msg, "%s", error_message());
                pin_thread_destroy(t);
                return error_restore(kind, msg);
            }
    int e = pthread_create(&t->thread, NULL, pin_thread_main, t);
    if (e != 0) {
        pin_thread_destroy(t);
        return error_set(ERROR_LIBRARY, "pin thread: pthread_create failed: %s", strerror(e));
    }
    t->thread_started = true;
    *out = t;
    return 0;
}

// Frees every buffer state once the thread is out of fill; lock held.
static void reset_buffers_locked(PinThread *t)
{
    while (t->filling) pthread_cond_wait(&t->changed, &t->lock);
    for (int i = 0; i < t->cfg.depth; i++) {
        if (t->cfg.fresh_buffer_per_item) {
            buffer_free(&t->cfg, t->bufs[i].ptr);
            t->bufs[i].ptr = NULL;
        }
        t->bufs[i].state = BUF_FREE;
    }
}

void pin_thread_stop(PinThread *t)
{
    pthread_mutex_lock(&t->lock);
    t->running = false;
    atomic_store(&t->cancel, true);
    pthread_cond_broadcast(&t->changed);
    reset_buffers_locked(t);
    atomic_store(&t->cancel, false);
    t->next_fill = t->next_take = t->end;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
}

int pin_thread_start(PinThread *t, int64_t first, int64_t count)
{
    if (count < 0) return error_set(ERROR_BAD_USAGE, "pin thread: negative item count");
    pin_thread_stop(t);
    pthread_mutex_lock(&t->lock);
    t->next_fill = t->next_take = first;
    t->end = first + count;
    t->running = true;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
    return 0;
}

static int find_item(const PinThread *t, int64_t item, BufState state)
{
    for (int i = 0; i < t->cfg.depth; i++)
        if (t->bufs[i].state == state && t->bufs[i].item == item) return i;
    return -1;
}

int pin_thread_next(PinThread *t, int64_t item, void **buffer, size_t *bytes, int timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&t->lock);
    int rc = 0;
    if (item != t->next_take || item >= t->end) {
        rc = error_set(ERROR_BAD_USAGE, "pin thread: item %lld asked for, the next is %lld of a run ending at "
                          "%lld", (long long)item, (long long)t->next_take, (long long)t->end);
        pthread_mutex_unlock(&t->lock);
        return rc;
    }
    for (;;) {
        int i = find_item(t, item, BUF_READY);
        if (i >= 0) {
            t->bufs[i].state = BUF_HELD;
            t->next_take++;
            *buffer = t->bufs[i].ptr;
            *bytes = t->bufs[i].used;
            rc = 1;
            break;
        }
        i = find_item(t, item, BUF_FAILED);
        if (i >= 0) {
            rc = error_restore(t->bufs[i].error_kind, t->bufs[i].error);
            break;
        }
        if (!t->running && find_item(t, item, BUF_FILLING) < 0) {
            rc = error_set(ERROR_BAD_USAGE, "pin thread: item %lld will not come: the run was stopped or an "
                              "earlier item failed", (long long)item);
            break;
        }
        if (pthread_cond_timedwait(&t->changed, &t->lock, &deadline) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void pin_thread_release(PinThread *t, int64_t item)
{
    void *fresh = NULL;
    pthread_mutex_lock(&t->lock);
    int i = find_item(t, item, BUF_HELD);
    if (i >= 0) {
        if (t->cfg.fresh_buffer_per_item) {
            fresh = t->bufs[i].ptr;
            t->bufs[i].ptr = NULL;
        }
        t->bufs[i].state = BUF_FREE;
        pthread_cond_broadcast(&t->changed);
    }
    pthread_mutex_unlock(&t->lock);
    buffer_free(&t->cfg, fresh);  // cudaFreeHost can block: outside the lock
}

double pin_thread_busy_seconds(PinThread *t)
{
    pthread_mutex_lock(&t->lock);
    double s = t->busy_seconds;
    pthread_mutex_unlock(&t->lock);
    return s;
}
