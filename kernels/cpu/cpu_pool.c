// cpu_pool.c: the fast CPU backend's thread pool (see cpu_pool.h).
// A job is published by bumping a generation number held in the high half of one 64-bit
// word whose low half counts claimed tasks, so a worker that wakes late can never claim
// a task of a newer job with the parameters of an older one: its compare-and-swap fails.
// The parameters of generation g live in slot g % 2, written while the state still holds
// g - 1: a worker that read the state of generation g - 1 reads slot (g - 1) % 2, which
// the next job does not touch, so it cannot claim a task of g - 1 with g's parameters.
#include "kernels/cpu_pool.h"

#include "kernels/clock.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define POOL_MAX_WORKERS 255
// How long an idle worker spins for the next job before it sleeps, and how long the
// caller spins for unfinished tasks before it starts yielding its core to them.
#define WORKER_SPIN_NS 200000
#define CALLER_SPIN_NS 50000

typedef struct Pool {
    pthread_mutex_t run_lock;  // one cpu_pool_run at a time; others run inline
    pthread_mutex_t lock;      // guards sleeping and waking
    pthread_cond_t wake;
    int workers;               // started
    pthread_t threads[POOL_MAX_WORKERS];
    _Atomic uint64_t state;    // generation << 32 | next task to claim
    _Atomic int done;          // tasks of the current job finished
    _Atomic int sleepers;
    _Atomic int active;        // workers 0..active-1 take part in the current job
    struct {                   // job of generation g in slot g % 2 (stored before it)
        _Atomic(CpuTaskFn) fn;
        _Atomic(void *) ctx;
        _Atomic int count;
    } job[2];
} Pool;

static cpu_set_t unbound_cpus;   // the CPUs threads go back to (cpu_pool_bind(0)); run_lock
static bool unbound_known;
static _Thread_local uint64_t caller_bound;  // this thread's binding by cpu_pool_bind
static _Atomic uint64_t workers_bound;       // the workers' (0: unbound); written under run_lock
static _Atomic uint64_t cpus_used;           // cpu_pool_cpus_used

static Pool pool = {.run_lock = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER,
                    .wake = PTHREAD_COND_INITIALIZER};
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) { return (int64_t)(1e9 * clock_seconds()); }

// Notes the CPU this thread runs on (a read first: the bit is usually set already).
static void note_cpu(void)
{
    int cpu = sched_getcpu();
    if (cpu < 0 || cpu >= 64) return;
    uint64_t bit = (uint64_t)1 << cpu;
    if (!(atomic_load_explicit(&cpus_used, memory_order_relaxed) & bit))
        atomic_fetch_or_explicit(&cpus_used, bit, memory_order_relaxed);
}

// Claims and runs tasks of generation gen until none is left or the job changed.
static void run_tasks(uint32_t gen)
{
    bool noted = false;
    for (;;) {
        uint64_t s = atomic_load_explicit(&pool.state, memory_order_acquire);
        if ((uint32_t)(s >> 32) != gen) return;
        // Generation gen's own slot: the next job writes the other one, and the one after
        // only once the state has left gen, when the compare-and-swap below fails.
        CpuTaskFn fn = atomic_load_explicit(&pool.job[gen & 1].fn, memory_order_acquire);
        void *ctx = atomic_load_explicit(&pool.job[gen & 1].ctx, memory_order_acquire);
        int count = atomic_load_explicit(&pool.job[gen & 1].count, memory_order_acquire);
        uint32_t task = (uint32_t)s;
        if ((int)task >= count) return;
        if (!atomic_compare_exchange_weak_explicit(&pool.state, &s, s + 1, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        if (!noted) note_cpu();
        noted = true;
        fn(ctx, (int)task);
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
    }
}

static void *worker_main(void *arg)
{
    int index = (int)(intptr_t)arg;
    uint32_t seen = (uint32_t)(atomic_load(&pool.state) >> 32);
    for (;;) {
        // Wait for a new generation: spin a little, then sleep.
        int64_t t0 = now_ns();
        uint32_t gen;
        for (int spins = 0;; spins++) {
            gen = (uint32_t)(atomic_load_explicit(&pool.state, memory_order_acquire) >> 32);
            if (gen != seen) break;
            cpu_relax();
            if ((spins & 255) == 255 && now_ns() - t0 > WORKER_SPIN_NS) {
                pthread_mutex_lock(&pool.lock);
                atomic_fetch_add(&pool.sleepers, 1);
                while ((gen = (uint32_t)(atomic_load(&pool.state) >> 32)) == seen)
                    pthread_cond_wait(&pool.wake, &pool.lock);
                atomic_fetch_sub(&pool.sleepers, 1);
                pthread_mutex_unlock(&pool.lock);
                break;
            }
        }
        seen = gen;
        if (index < atomic_load_explicit(&pool.active, memory_order_acquire)) run_tasks(gen);
    }
    return NULL;
}

// After fork the child has this thread only: it starts its own workers if it needs any.
static void forget_workers_in_child(void)
{
    pthread_mutex_init(&pool.run_lock, NULL);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pool.workers = 0;
    atomic_store(&pool.sleepers, 0);
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, forget_workers_in_child); }

// The k-th CPU of cpus, cyclically (cpus != 0).
static int nth_cpu(uint64_t cpus, int k)
{
    k %= __builtin_popcountll(cpus);
    for (int i = 0;; i++)
        if ((cpus >> i & 1) && k-- == 0) return i;
}

// Puts thread t on the k-th CPU of cpus, or back on the unbound CPUs (cpus = 0). 0 or an errno.
static int bind_thread(pthread_t t, uint64_t cpus, int k)
{
    cpu_set_t set;
    if (cpus) {
        CPU_ZERO(&set);
        CPU_SET(nth_cpu(cpus, k), &set);
    } else {
        set = unbound_cpus;
    }
    return pthread_setaffinity_np(t, sizeof set, &set);
}

static void start_workers(int wanted)
{
    pthread_once(&fork_once, register_fork_handler);
    if (wanted > POOL_MAX_WORKERS) wanted = POOL_MAX_WORKERS;
    while (pool.workers < wanted) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, worker_main, (void *)(intptr_t)pool.workers);
        pthread_attr_destroy(&attr);
        if (rc != 0) break; // fewer threads, same results
        pool.threads[pool.workers] = t;
        uint64_t bound = atomic_load(&workers_bound);
        if (bound) bind_thread(t, bound, pool.workers + 1); // best effort: fewer bound threads
        pool.workers++;
    }
}

void cpu_pool_run(int threads, int count, CpuTaskFn fn, void *ctx)
{
    if (count <= 0) return;
    if (threads <= 1 || count == 1 || pthread_mutex_trylock(&pool.run_lock) != 0) {
        note_cpu();
        for (int i = 0; i < count; i++) fn(ctx, i);
        return;
    }
    int helpers = (threads < count ? threads : count) - 1;
    start_workers(helpers);
    if (pool.workers == 0) {
        pthread_mutex_unlock(&pool.run_lock);
        note_cpu();
        for (int i = 0; i < count; i++) fn(ctx, i);
        return;
    }
    uint32_t gen = (uint32_t)(atomic_load(&pool.state) >> 32) + 1;
    atomic_store_explicit(&pool.job[gen & 1].fn, fn, memory_order_relaxed);
    atomic_store_explicit(&pool.job[gen & 1].ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&pool.job[gen & 1].count, count, memory_order_relaxed);
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.active, helpers, memory_order_relaxed);
    atomic_store(&pool.state, (uint64_t)gen << 32); // seq_cst: ordered before the sleepers read
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
    run_tasks(gen);
    // Tasks other threads claimed: spin briefly, then yield the core to them.
    int64_t t0 = now_ns();
    for (int spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < count; spins++) {
        if (spins < 64 || now_ns() - t0 < CALLER_SPIN_NS) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&pool.run_lock);
}

int cpu_pool_bind(uint64_t cpus)
{
    if (cpus == caller_bound && cpus == atomic_load_explicit(&workers_bound, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&pool.run_lock);
    int err = 0;
    if (!unbound_known && cpus) {
        if (sched_getaffinity(0, sizeof unbound_cpus, &unbound_cpus) != 0) err = errno;
        unbound_known = err == 0;
    }
    if (!err && unbound_known) {
        err = bind_thread(pthread_self(), cpus, 0);
        for (int k = 0; !err && k < pool.workers; k++) err = bind_thread(pool.threads[k], cpus, k + 1);
    }
    if (!err) {
        caller_bound = cpus;
        atomic_store(&workers_bound, cpus);
    }
    pthread_mutex_unlock(&pool.run_lock);
    if (err) errno = err;
    return err ? -1 : 0;
}

uint64_t cpu_pool_cpus_used(void) { return atomic_exchange(&cpus_used, 0); }
