// test_pin_thread.c: the pin-memory thread (loaders/pin_thread.h) and the loader's
// LOADER_PIN_COPY stage built on it, run on the CPU with plain allocators standing in
// for cudaHostAlloc. The thread fills items in order on its own thread (the caller's time
// is not charged with the copies), never runs more than `depth` items ahead, hands back
// the right bytes, stops promptly, reports a failed item; the loader with the pin stage
// delivers the same batches, byte for byte and in the same order, as without it, across
// epochs and an epoch abandoned half-way, and still names a dead worker.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loaders/dataset.h"
#include "loaders/loader.h"
#include "loaders/pin_thread.h"
#include "tests/loader_support.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static atomic_int allocs, frees;

static int plain_alloc(size_t bytes, void **ptr)
{
    *ptr = malloc(bytes);
    if (!*ptr) return error_set(ERROR_OUT_OF_MEMORY, "plain_alloc: out of memory");
    atomic_fetch_add(&allocs, 1);
    return 0;
}

static void plain_free(void *ptr)
{
    if (!ptr) return;
    atomic_fetch_add(&frees, 1);
    free(ptr);
}

// ---- the thread alone -------------------------------------------------------------------

enum { ITEM_BYTES = 4096 };

typedef struct Fill {
    atomic_int filled;         // items filled so far
    int fail_at;               // item whose fill fails (-1: none)
    int block_at;              // item whose fill waits for cancellation (-1: none)
    int sleep_us;              // per fill, to make the copies visible in time
    pthread_t caller;          // the thread that must never run fill
    atomic_bool ran_on_caller;
} Fill;

static uint8_t pattern(int64_t item, size_t i) { return (uint8_t)(item * 31 + i * 7); }

static int fill_pattern(void *ctx, int64_t item, void *dst, size_t capacity, size_t *used,
                        const atomic_bool *cancel)
{
    Fill *f = ctx;
    if (pthread_equal(pthread_self(), f->caller)) atomic_store(&f->ran_on_caller, true);
    if (item == f->block_at) {
        while (!atomic_load(cancel)) usleep(1000);
        return 1;
    }
    if (item == f->fail_at) return error_set(ERROR_BAD_DATA, "fill: item %lld is bad", (long long)item);
    if (f->sleep_us) usleep((useconds_t)f->sleep_us);
    uint8_t *p = dst;
    for (size_t i = 0; i < capacity; i++) p[i] = pattern(item, i);
    *used = capacity - (size_t)(item % 3);
    atomic_fetch_add(&f->filled, 1);
    return 0;
}

static PinThread *make_thread(Fill *f, int depth, bool fresh)
{
    f->caller = pthread_self();
    PinThreadConfig c = {depth, ITEM_BYTES, fill_pattern, f, fresh, plain_alloc, plain_free};
    PinThread *t = NULL;
    assert_int_equal(pin_thread_create(&c, &t), 0);
    return t;
}

// Takes item i within a second (or fails the test); returns the buffer.
static uint8_t *take(PinThread *t, int64_t item, size_t *bytes)
{
    void *buf = NULL;
    int rc = 0;
    for (int tries = 0; tries < 100 && rc == 0; tries++) rc = pin_thread_next(t, item, &buf, bytes, 10);
    if (rc != 1) fail_msg("item %lld: pin_thread_next %d (%s)", (long long)item, rc, error_message());
    return buf;
}

static void test_items_come_in_order_with_their_bytes(void **state)
{
    (void)state;
    Fill f = {.fail_at = -1, .block_at = -1, .sleep_us = 2000};
    PinThread *t = make_thread(&f, 3, false);
    assert_int_equal(pin_thread_start(t, 5, 12), 0);
    double caller_wait = 0.0;
    for (int64_t item = 5; item < 17; item++) {
        size_t bytes = 0;
        double t0 = test_now_s();
        uint8_t *p = take(t, item, &bytes);
        caller_wait += test_now_s() - t0;
        assert_int_equal(bytes, ITEM_BYTES - (size_t)(item % 3));
        for (size_t i = 0; i < bytes; i++)
            if (p[i] != pattern(item, i)) fail_msg("item %lld byte %zu wrong", (long long)item, i);
        usleep(4000);  // "training" on the batch: the thread fills the next ones meanwhile
        pin_thread_release(t, item);
    }
    assert_false(atomic_load(&f.ran_on_caller));
    double busy = pin_thread_busy_seconds(t);
    printf("12 items: pin thread busy %.1f ms, caller waited %.1f ms\n", 1e3 * busy, 1e3 * caller_wait);
    assert_true(busy >= 12 * 0.002);
    assert_true(caller_wait < busy);  // the copies overlapped the caller's work
    // Only the next item may be asked for; a finished run has nothing more.
    void *buf;
    size_t bytes;
    assert_int_equal(pin_thread_next(t, 17, &buf, &bytes, 10), -1);
    pin_thread_destroy(t);
}

static void test_thread_stays_within_depth(void **state)
{
    (void)state;
    Fill f = {.fail_at = -1, .block_at = -1};
    PinThread *t = make_thread(&f, 2, false);
    assert_int_equal(pin_thread_start(t, 0, 10), 0);
    size_t bytes;
    take(t, 0, &bytes);  // held, not released
    usleep(50000);
    assert_int_equal(atomic_load(&f.filled), 2);  // the held one and one ahead
    void *buf;
    assert_int_equal(pin_thread_next(t, 2, &buf, &bytes, 10), -1);  // out of order
    take(t, 1, &bytes);
    usleep(50000);
    assert_int_equal(atomic_load(&f.filled), 2);  // both buffers held: nothing free to fill
    pin_thread_release(t, 0);
    take(t, 2, &bytes);
    assert_int_equal(atomic_load(&f.filled), 3);
    pin_thread_destroy(t);
}

static void test_stop_is_prompt_and_a_failure_is_reported(void **state)
{
    (void)state;
    Fill f = {.fail_at = -1, .block_at = 1};
    PinThread *t = make_thread(&f, 3, false);
    assert_int_equal(pin_thread_start(t, 0, 5), 0);
    size_t bytes;
    take(t, 0, &bytes);
    double t0 = test_now_s();
    pin_thread_stop(t);  // item 1's fill waits for cancellation
    assert_true(test_now_s() - t0 < 0.5);
    // A new run starts cleanly; item 2 fails and says why; nothing after it comes.
    f.block_at = -1;
    f.fail_at = 2;
    assert_int_equal(pin_thread_start(t, 0, 5), 0);
    for (int64_t i = 0; i < 2; i++) {
        take(t, i, &bytes);
        pin_thread_release(t, i);
    }
    void *buf;
    int rc = 0;
    for (int tries = 0; tries < 100 && rc == 0; tries++) rc = pin_thread_next(t, 2, &buf, &bytes, 10);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(error_message(), "item 2 is bad"));
    pin_thread_destroy(t);
}

static void test_fresh_buffer_per_item_allocates_and_frees_each(void **state)
{
    (void)state;
    atomic_store(&allocs, 0);
    atomic_store(&frees, 0);
    Fill f = {.fail_at = -1, .block_at = -1};
    PinThread *t = make_thread(&f, 2, true);
    assert_int_equal(atomic_load(&allocs), 0);
    assert_int_equal(pin_thread_start(t, 0, 6), 0);
    for (int64_t i = 0; i < 6; i++) {
        size_t bytes;
        take(t, i, &bytes);
        pin_thread_release(t, i);
    }
    pin_thread_destroy(t);
    assert_int_equal(atomic_load(&allocs), 6);
    assert_int_equal(atomic_load(&frees), 6);
}

// ---- the loader's pinning stage ---------------------------------------------------------

enum { NSAMPLES = FIXTURE_CLASSES * FIXTURE_PER_CLASS, BATCH = 4, OUT = 16 };
enum { SAMPLE_FLOATS = 3 * OUT * OUT };

typedef struct {
    int64_t indices[NSAMPLES];
    float images[NSAMPLES][SAMPLE_FLOATS];
    int total;
} Epoch;

static LoaderConfig config(const Dataset *ds, int workers, LoaderPinMode pin)
{
    LoaderConfig c = loader_default_config(ds, BATCH);
    c.num_workers = workers;
    c.seed = 99;
    c.augment = augment_default_config(OUT);
    c.timeout_ms = 20000;
    c.pin = pin;
    c.pin_host_alloc = plain_alloc;
    c.pin_host_free = plain_free;
    return c;
}

static void run_epoch(Loader *l, int64_t epoch, Epoch *e, bool expect_pinned)
{
    memset(e, 0, sizeof *e);
    assert_int_equal(loader_begin_epoch(l, epoch), 0);
    LoaderBatch b;
    int rc;
    int64_t expect = 0;
    while ((rc = loader_next_batch(l, &b)) == 1) {
        assert_int_equal(b.batch_index, expect++);
        assert_int_equal(b.epoch, epoch);
        assert_int_equal(b.pinned, expect_pinned);
        assert_true(e->total + b.count <= NSAMPLES);
        memcpy(e->indices + e->total, b.indices, (size_t)b.count * sizeof *b.indices);
        memcpy(e->images[e->total], b.images, b.image_bytes);
        e->total += b.count;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(e->total, NSAMPLES);
}

static void test_loader_pin_copy_matches_unpinned(void **state)
{
    LoaderFixture *f = *state;
    Loader *plain, *pinned;
    LoaderConfig cp = config(&f->ds, 2, LOADER_PIN_NONE), cq = config(&f->ds, 2, LOADER_PIN_COPY);
    assert_int_equal(loader_create(&cp, &plain), 0);
    assert_int_equal(loader_create(&cq, &pinned), 0);
    static Epoch a, b;
    for (int64_t epoch = 0; epoch < 3; epoch++) {
        run_epoch(plain, epoch, &a, false);
        run_epoch(pinned, epoch, &b, true);
        assert_memory_equal(a.indices, b.indices, sizeof a.indices);
        assert_memory_equal(a.images, b.images, sizeof a.images);
    }
    // An epoch abandoned after one batch, then a full one: the drain must not wait for
    // slots the pin thread has already taken, nor skip the ones it has not.
    LoaderBatch lb;
    assert_int_equal(loader_begin_epoch(pinned, 3), 0);
    assert_int_equal(loader_next_batch(pinned, &lb), 1);
    run_epoch(pinned, 4, &b, true);
    run_epoch(plain, 4, &a, false);
    assert_memory_equal(a.images, b.images, sizeof a.images);
    LoaderStats s;
    loader_get_stats(pinned, &s);
    printf("pin stage: %lld batches, %.2f ms copying on the pin thread\n", (long long)s.batches,
           1e3 * s.pin_seconds);
    assert_true(s.pin_seconds > 0.0);
    loader_destroy(plain);
    loader_destroy(pinned);
}

static void test_loader_pin_copy_in_caller_without_workers(void **state)
{
    LoaderFixture *f = *state;
    Loader *plain, *pinned;
    LoaderConfig cp = config(&f->ds, 0, LOADER_PIN_NONE), cq = config(&f->ds, 0, LOADER_PIN_COPY);
    assert_int_equal(loader_create(&cp, &plain), 0);
    assert_int_equal(loader_create(&cq, &pinned), 0);
    static Epoch a, b;
    run_epoch(plain, 0, &a, false);
    run_epoch(pinned, 0, &b, true);
    assert_memory_equal(a.images, b.images, sizeof a.images);
    loader_destroy(plain);
    loader_destroy(pinned);
}

static void test_loader_pin_copy_names_a_dead_worker(void **state)
{
    LoaderFixture *f = *state;
    LoaderConfig c = config(&f->ds, 2, LOADER_PIN_COPY);
    c.timeout_ms = 0;  // detection must not rely on a timeout
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    LoaderBatch b;
    assert_int_equal(loader_next_batch(l, &b), 1);
    int pid = loader_worker_pid(l, 1);
    assert_true(pid > 0);
    assert_int_equal(kill(pid, SIGKILL), 0);
    double t0 = test_now_s();
    int rc;
    while ((rc = loader_next_batch(l, &b)) == 1) {}
    assert_int_equal(rc, -1);
    char want[64];
    snprintf(want, sizeof want, "worker 1 (pid %d)", pid);
    if (!strstr(error_message(), want)) fail_msg("unexpected message: %s", error_message());
    assert_true(test_now_s() - t0 < 5.0);
    loader_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_items_come_in_order_with_their_bytes),
        cmocka_unit_test(test_thread_stays_within_depth),
        cmocka_unit_test(test_stop_is_prompt_and_a_failure_is_reported),
        cmocka_unit_test(test_fresh_buffer_per_item_allocates_and_frees_each),
        cmocka_unit_test_setup_teardown(test_loader_pin_copy_matches_unpinned, testutil_fixture_setup, testutil_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_loader_pin_copy_in_caller_without_workers, testutil_fixture_setup, testutil_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_loader_pin_copy_names_a_dead_worker, testutil_fixture_setup, testutil_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
