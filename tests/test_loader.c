// test_loader.c: the multi-worker loader. Every image exactly once per epoch in sampler
// order for several num_workers (dataset size not a multiple of the batch), identical
// batches for a seed whatever num_workers, drop_last, prefetch, persistent vs re-spawned
// workers, bad files (error naming the file, or skipped and counted), a killed worker
// (named, with its batch, no hang), and no leftover processes or /dev/shm objects after
// a normal end, an error, an early exit and SIGINT.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/gpu_device.h"
#include "loaders/dataset.h"
#include "loaders/loader.h"
#include "tests/loader_support.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/wait.h>

enum { NSAMPLES = FIXTURE_CLASSES * FIXTURE_PER_CLASS, BATCH = 4, OUT = 16 };

// Everything one epoch delivered, concatenated.
typedef struct {
    int64_t indices[NSAMPLES];
    int32_t labels[NSAMPLES];
    float images[NSAMPLES][3 * OUT * OUT];
    int total, batches, last_count;
    int64_t skipped;
} Epoch;

static LoaderConfig small_config(const Dataset *ds, int workers)
{
    return testutil_loader_config(ds, BATCH, workers, 1234, OUT);
}

// Runs one epoch; returns loader_next_batch's final result (0 at a clean end).
static int run_epoch(Loader *l, int64_t epoch, Epoch *e)
{
    memset(e, 0, sizeof *e);
    if (loader_begin_epoch(l, epoch) != 0) return -1;
    LoaderBatch b;
    int rc;
    int64_t expect_index = 0;
    while ((rc = loader_next_batch(l, &b)) == 1) {
        assert_true(b.batch_index >= expect_index); // in order (skips may jump ahead)
        expect_index = b.batch_index + 1;
        assert_int_equal(b.epoch, epoch);
        assert_true(b.count >= 1 && b.count <= BATCH);
        assert_int_equal(b.image_bytes, (size_t)b.count * 3 * OUT * OUT * sizeof(float));
        assert_true(e->total + b.count <= NSAMPLES);
        memcpy(e->indices + e->total, b.indices, b.count * sizeof *b.indices);
        memcpy(e->labels + e->total, b.labels, b.count * sizeof *b.labels);
        memcpy(e->images[e->total], b.images, b.image_bytes);
        e->total += b.count;
        e->batches++;
        e->last_count = b.count;
        e->skipped += b.skipped;
    }
    return rc;
}

static void assert_each_once(const LoaderFixture *f, const Epoch *e)
{
    int seen[NSAMPLES] = {0};
    assert_int_equal(e->total, NSAMPLES);
    for (int i = 0; i < e->total; i++) {
        assert_in_range(e->indices[i], 0, NSAMPLES - 1);
        seen[e->indices[i]]++;
        assert_int_equal(e->labels[i], f->ds.labels[e->indices[i]]);
    }
    for (int i = 0; i < NSAMPLES; i++) assert_int_equal(seen[i], 1);
}

static void assert_pids_gone(const int *pids, int n)
{
    double deadline = test_now_s() + 5;
    for (int i = 0; i < n; i++) {
        while (pids[i] > 0 && testutil_pid_alive(pids[i]) && test_now_s() < deadline) usleep(10000);
        if (pids[i] > 0 && testutil_pid_alive(pids[i])) fail_msg("worker pid %d still alive", pids[i]);
    }
}

static void test_unshuffled_order_is_dataset_order(void **state)
{
    LoaderFixture *f = *state;
    static Epoch e;
    for (int workers = 0; workers <= 3; workers++) {
        LoaderConfig c = small_config(&f->ds, workers);
        c.shuffle = false;
        Loader *l;
        assert_int_equal(loader_create(&c, &l), 0);
        assert_int_equal(loader_num_batches(l), 6); // 21 = 5 * 4 + 1
        assert_int_equal(run_epoch(l, 0, &e), 0);
        assert_int_equal(e.batches, 6);
        assert_int_equal(e.last_count, 1);
        for (int i = 0; i < NSAMPLES; i++) assert_int_equal(e.indices[i], i);
        int pids[3] = {loader_worker_pid(l, 0), loader_worker_pid(l, 1), loader_worker_pid(l, 2)};
        loader_destroy(l); // after a normal end: workers reaped, nothing in /dev/shm
        assert_pids_gone(pids, 3);
        assert_int_equal(testutil_count_shm(), 0);
    }
}

static void test_each_image_once_same_batches_any_workers(void **state)
{
    LoaderFixture *f = *state;
    static Epoch ref[2], got;
    for (int workers = 0; workers <= 3; workers++) {
        LoaderConfig c = small_config(&f->ds, workers);
        Loader *l;
        assert_int_equal(loader_create(&c, &l), 0);
        for (int epoch = 0; epoch < 2; epoch++) {
            Epoch *e = workers == 0 ? &ref[epoch] : &got;
            assert_int_equal(run_epoch(l, epoch, e), 0);
            assert_int_equal(e->batches, 6);
            assert_each_once(f, e);
            int64_t order[NSAMPLES];
            loader_epoch_order(l, order);
            assert_memory_equal(e->indices, order, sizeof order); // sampler order
            if (workers > 0) {
                // Same seed: same order, labels and augmented pixels as num_workers = 0.
                assert_memory_equal(e->indices, ref[epoch].indices, sizeof e->indices);
                assert_memory_equal(e->images, ref[epoch].images, sizeof e->images);
            }
        }
        loader_destroy(l);
    }
    // A new epoch reshuffles: orders of epochs 0 and 1 differ.
    assert_memory_not_equal(ref[0].indices, ref[1].indices, sizeof ref[0].indices);
}

static void test_other_seed_other_batches(void **state)
{
    LoaderFixture *f = *state;
    static Epoch a, b;
    LoaderConfig c = small_config(&f->ds, 2);
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    assert_int_equal(run_epoch(l, 0, &a), 0);
    loader_destroy(l);
    c.seed = 99;
    assert_int_equal(loader_create(&c, &l), 0);
    assert_int_equal(run_epoch(l, 0, &b), 0);
    loader_destroy(l);
    assert_memory_not_equal(a.indices, b.indices, sizeof a.indices);
    assert_memory_not_equal(a.images, b.images, sizeof a.images);
}

static void test_drop_last_and_prefetch(void **state)
{
    LoaderFixture *f = *state;
    static Epoch e;
    const int prefetch[] = {1, 2, 4};
    for (int workers = 0; workers <= 2; workers++)
        for (int p = 0; p < 3; p++) {
            LoaderConfig c = small_config(&f->ds, workers);
            c.drop_last = true;
            c.prefetch_factor = prefetch[p];
            Loader *l;
            assert_int_equal(loader_create(&c, &l), 0);
            assert_int_equal(loader_num_batches(l), 5);
            assert_int_equal(run_epoch(l, 3, &e), 0);
            assert_int_equal(e.batches, 5);
            assert_int_equal(e.total, 20);
            int seen[NSAMPLES] = {0};
            for (int i = 0; i < e.total; i++) assert_int_equal(seen[e.indices[i]]++, 0);
            loader_destroy(l);
        }
}

static void test_respawn_matches_persistent(void **state)
{
    LoaderFixture *f = *state;
    static Epoch a, b;
    LoaderConfig c = small_config(&f->ds, 2);
    Loader *lp, *lr;
    assert_int_equal(loader_create(&c, &lp), 0);
    c.persistent_workers = false;
    assert_int_equal(loader_create(&c, &lr), 0);
    assert_int_equal(loader_worker_pid(lr, 0), -1); // none until an epoch starts
    for (int epoch = 0; epoch < 3; epoch++) {
        assert_int_equal(run_epoch(lp, epoch, &a), 0);
        assert_int_equal(run_epoch(lr, epoch, &b), 0);
        assert_memory_equal(a.indices, b.indices, sizeof a.indices);
        assert_memory_equal(a.images, b.images, sizeof a.images);
        assert_int_equal(loader_worker_pid(lr, 0), -1); // joined at the end of the epoch
        assert_true(loader_worker_pid(lp, 0) > 0);
    }
    LoaderStats sp, sr;
    loader_get_stats(lp, &sp);
    loader_get_stats(lr, &sr);
    assert_int_equal(sp.worker_spawns, 2);
    assert_int_equal(sr.worker_spawns, 6);
    assert_int_equal(sp.images, 3 * NSAMPLES);
    loader_destroy(lp);
    loader_destroy(lr);
}

// Two loaders alive at once (each with workers) do not disturb each other.
static void test_two_loaders_at_once(void **state)
{
    LoaderFixture *f = *state;
    static Epoch ref_a, ref_b, a, b;
    LoaderConfig ca = small_config(&f->ds, 0), cb = small_config(&f->ds, 0);
    cb.seed = 4321;
    Loader *la, *lb;
    assert_int_equal(loader_create(&ca, &la), 0);
    assert_int_equal(run_epoch(la, 0, &ref_a), 0);
    loader_destroy(la);
    assert_int_equal(loader_create(&cb, &lb), 0);
    assert_int_equal(run_epoch(lb, 0, &ref_b), 0);
    loader_destroy(lb);
    ca.num_workers = 2;
    cb.num_workers = 3;
    assert_int_equal(loader_create(&ca, &la), 0);
    assert_int_equal(loader_create(&cb, &lb), 0);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_int_equal(loader_begin_epoch(la, 0), 0);
    assert_int_equal(loader_begin_epoch(lb, 0), 0);
    LoaderBatch x, y;
    int ra = 1, rb = 1;
    while (ra == 1 || rb == 1) { // interleaved
        if (ra == 1 && (ra = loader_next_batch(la, &x)) == 1) {
            memcpy(a.images[a.total], x.images, x.image_bytes);
            a.total += x.count;
        }
        if (rb == 1 && (rb = loader_next_batch(lb, &y)) == 1) {
            memcpy(b.images[b.total], y.images, y.image_bytes);
            b.total += y.count;
        }
    }
    assert_int_equal(ra, 0);
    assert_int_equal(rb, 0);
    assert_memory_equal(a.images, ref_a.images, sizeof a.images);
    assert_memory_equal(b.images, ref_b.images, sizeof b.images);
    loader_destroy(la);
    loader_destroy(lb);
}

static void test_next_batch_starts_following_epochs(void **state)
{
    LoaderFixture *f = *state;
    LoaderConfig c = small_config(&f->ds, 1);
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    LoaderBatch b;
    int n = 0;
    while (loader_next_batch(l, &b) == 1) assert_int_equal(b.epoch, 0), n++;
    assert_int_equal(n, 6);
    assert_int_equal(loader_next_batch(l, &b), 1);
    assert_int_equal(b.epoch, 1);
    // Abandon epoch 1 half-way and restart at epoch 5: the in-flight batches are dropped.
    assert_int_equal(loader_begin_epoch(l, 5), 0);
    assert_int_equal(loader_next_batch(l, &b), 1);
    assert_int_equal(b.epoch, 5);
    assert_int_equal(b.batch_index, 0);
    loader_destroy(l);
}

// Adds a bad file to class_001 (sorted first in it); returns its path.
static void add_bad_file(LoaderFixture *f, const char *name, const void *data, size_t size,
                         char *path, size_t path_size)
{
    snprintf(path, path_size, "%s/class_001/%s", f->root, name);
    assert_int_equal(testutil_write(path, data, size), 0);
}

static void test_bad_file_error_names_it(void **state)
{
    LoaderFixture *f = *state;
    char bad[256];
    add_bad_file(f, "aaa_not_a_jpeg.jpg", "GIF89a not a jpeg at all", 24, bad, sizeof bad);
    Dataset ds;
    assert_int_equal(dataset_scan(f->root, &ds), 0);
    for (int workers = 0; workers <= 2; workers += 2) {
        LoaderConfig c = small_config(&ds, workers);
        Loader *l;
        assert_int_equal(loader_create(&c, &l), 0);
        int pids[2] = {loader_worker_pid(l, 0), loader_worker_pid(l, 1)};
        LoaderBatch b;
        int rc;
        while ((rc = loader_next_batch(l, &b)) == 1) {}
        assert_int_equal(rc, -1);
        if (!strstr(error_message(), bad))
            fail_msg("error '%s' does not name %s", error_message(), bad);
        assert_int_equal(loader_next_batch(l, &b), -1); // stays failed
        loader_destroy(l);
        if (workers) assert_pids_gone(pids, 2);
        assert_int_equal(testutil_count_shm(), 0);
    }
    dataset_free(&ds);
    unlink(bad);
}

static void test_skip_bad_files_counts_them(void **state)
{
    LoaderFixture *f = *state;
    char bad1[256], bad2[256], good[256];
    add_bad_file(f, "aaa_text.jpg", "hello", 5, bad1, sizeof bad1);
    snprintf(good, sizeof good, "%s/class_001/img_00000.jpg", f->root);
    size_t size;
    unsigned char *buf = (unsigned char *)test_read_file(good, &size);
    assert_non_null(buf);
    add_bad_file(f, "aab_truncated.jpg", buf, size / 2, bad2, sizeof bad2);
    // Cut inside the header: the good file decoded next by the same worker must not suffer.
    char bad3[256];
    add_bad_file(f, "aac_header_cut.jpg", buf, 100, bad3, sizeof bad3);
    free(buf);
    Dataset ds;
    assert_int_equal(dataset_scan(f->root, &ds), 0);
    assert_int_equal(ds.num_samples, NSAMPLES + 3);
    for (int workers = 0; workers <= 2; workers++) {
        LoaderConfig c = small_config(&ds, workers);
        c.skip_bad_files = true;
        Loader *l;
        assert_int_equal(loader_create(&c, &l), 0);
        LoaderBatch b;
        int images = 0, rc;
        int64_t skipped = 0;
        while ((rc = loader_next_batch(l, &b)) == 1) {
            images += b.count;
            skipped += b.skipped;
            for (int i = 0; i < b.count; i++)
                assert_string_not_equal(ds.paths[b.indices[i]], bad1);
        }
        assert_int_equal(rc, 0);
        assert_int_equal(images, NSAMPLES);
        assert_int_equal(skipped, 3);
        LoaderStats st;
        loader_get_stats(l, &st);
        assert_int_equal(st.skipped, 3);
        if (!strstr(st.last_skip, bad1) && !strstr(st.last_skip, bad2) && !strstr(st.last_skip, bad3))
            fail_msg("last_skip '%s' names no bad file", st.last_skip);
        loader_destroy(l);
    }
    dataset_free(&ds);
    unlink(bad1);
    unlink(bad2);
    unlink(bad3);
}

static void test_dead_worker_is_named_without_hang(void **state)
{
    LoaderFixture *f = *state;
    LoaderConfig c = small_config(&f->ds, 2);
    c.timeout_ms = 0; // detection must not rely on a timeout
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    LoaderBatch b;
    assert_int_equal(loader_next_batch(l, &b), 1);
    int pids[2] = {loader_worker_pid(l, 0), loader_worker_pid(l, 1)};
    assert_true(pids[1] > 0);
    assert_int_equal(kill(pids[1], SIGKILL), 0);
    double t0 = test_now_s();
    int rc;
    while ((rc = loader_next_batch(l, &b)) == 1) {}
    double took = test_now_s() - t0;
    assert_int_equal(rc, -1);
    const char *msg = error_message();
    char want[64];
    snprintf(want, sizeof want, "worker 1 (pid %d)", pids[1]);
    if (!strstr(msg, want) || !strstr(msg, "signal 9") || !strstr(msg, "batch "))
        fail_msg("unexpected message: %s", msg);
    assert_true(took < 5.0);
    loader_destroy(l);
    assert_pids_gone(pids, 2);
}

// A worker that hangs (stopped, not dead) ends in a timeout error, not a hang.
static void test_hung_worker_times_out(void **state)
{
    LoaderFixture *f = *state;
    LoaderConfig c = small_config(&f->ds, 2);
    c.timeout_ms = 300;
    c.shuffle = false;
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    LoaderBatch b;
    int pids[2] = {loader_worker_pid(l, 0), loader_worker_pid(l, 1)};
    assert_int_equal(loader_next_batch(l, &b), 1); // batch 0 from worker 0
    // Freeze worker 0: at the latest the next epoch's batch 0 is its job.
    assert_int_equal(kill(pids[0], SIGSTOP), 0);
    double t0 = test_now_s();
    int rc = 1;
    for (int calls = 0; calls < 40 && rc != -1; calls++) rc = loader_next_batch(l, &b);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(error_message(), "timed out"));
    assert_non_null(strstr(error_message(), "worker 0"));
    loader_destroy(l); // must kill the stopped worker too
    assert_true(test_now_s() - t0 < 8.0);
    assert_pids_gone(pids, 2);
}

static void test_early_exit_leaves_nothing(void **state)
{
    LoaderFixture *f = *state;
    int before = testutil_count_shm();
    assert_int_equal(before, 0);
    LoaderConfig c = small_config(&f->ds, 3);
    c.prefetch_factor = 4;
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    int pids[3] = {loader_worker_pid(l, 0), loader_worker_pid(l, 1), loader_worker_pid(l, 2)};
    for (int i = 0; i < 3; i++) assert_true(pids[i] > 0 && testutil_pid_alive(pids[i]));
    LoaderBatch b;
    assert_int_equal(loader_next_batch(l, &b), 1);
    assert_int_equal(testutil_count_shm(), 0); // the ring's name is unlinked at creation
    double t0 = test_now_s();
    loader_destroy(l); // mid-epoch, batches in flight
    assert_true(test_now_s() - t0 < 3.0);
    assert_pids_gone(pids, 3);
    assert_int_equal(testutil_count_shm(), 0);
}

// A child process runs a loader and gets SIGINT mid-epoch: the workers must go too.
static void test_sigint_leaves_nothing(void **state)
{
    LoaderFixture *f = *state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); // orphans come back to us
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(fds[0]);
        LoaderConfig c = small_config(&f->ds, 2);
        Loader *l;
        if (loader_create(&c, &l) != 0) _exit(2);
        int pids[2] = {loader_worker_pid(l, 0), loader_worker_pid(l, 1)};
        LoaderBatch b;
        if (loader_next_batch(l, &b) != 1) _exit(3);
        if (write(fds[1], pids, sizeof pids) != sizeof pids) _exit(4);
        for (;;) pause(); // "training" until interrupted
    }
    close(fds[1]);
    int pids[2] = {0, 0};
    assert_int_equal(read(fds[0], pids, sizeof pids), (ssize_t)sizeof pids);
    close(fds[0]);
    assert_true(pids[0] > 0 && pids[1] > 0);
    assert_int_equal(kill(child, SIGINT), 0);
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT);
    // Reap the orphaned workers as they die (we are their subreaper now).
    double deadline = test_now_s() + 5;
    int reaped = 0;
    while (reaped < 2 && test_now_s() < deadline) {
        pid_t r = waitpid(-1, &status, WNOHANG);
        if (r == pids[0] || r == pids[1]) reaped++;
        else usleep(10000);
    }
    assert_int_equal(reaped, 2);
    assert_pids_gone(pids, 2);
    assert_int_equal(testutil_count_shm(), 0);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
}

static void test_fp16_batches(void **state)
{
    LoaderFixture *f = *state;
    LoaderConfig c = small_config(&f->ds, 1);
    c.augment.dtype = AUGMENT_FLOAT16;
    c.shuffle = false;
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    LoaderBatch b;
    assert_int_equal(loader_next_batch(l, &b), 1);
    assert_int_equal(b.dtype, AUGMENT_FLOAT16);
    assert_int_equal(b.image_bytes, (size_t)BATCH * 3 * OUT * OUT * 2);
    const uint16_t *h = b.images;
    int nonzero = 0;
    for (size_t i = 0; i < b.image_bytes / 2; i++) nonzero += h[i] != 0;
    assert_true(nonzero > (int)(b.image_bytes / 4));
    loader_destroy(l);
}

static void test_pinned_modes_need_a_gpu(void **state)
{
    LoaderFixture *f = *state;
    char why[256];
    bool gpu = gpu_device_available(why, sizeof why);
    const LoaderPinMode modes[] = {LOADER_PIN_COPY, LOADER_PIN_REGISTER};
    for (int workers = 0; workers <= 2; workers += 2)
        for (int m = 0; m < 2; m++) {
            LoaderConfig c = small_config(&f->ds, workers);
            c.pin = modes[m];
            Loader *l = NULL;
            int rc = loader_create(&c, &l);
            if (!gpu) {
                assert_int_equal(rc, -1);
                assert_null(l);
                assert_int_equal(error_kind(), ERROR_NO_DEVICE);  // a skip, not a failure
                assert_non_null(strstr(error_message(), "no CUDA device"));
                continue;
            }
            assert_int_equal(rc, 0);
            static Epoch e;
            assert_int_equal(run_epoch(l, 0, &e), 0);
            assert_each_once(f, &e);
            LoaderBatch b;
            assert_int_equal(loader_next_batch(l, &b), 1);
            assert_true(b.pinned);
            loader_destroy(l);
        }
    assert_int_equal(testutil_count_shm(), 0);
}

static void test_bad_configs_are_rejected(void **state)
{
    LoaderFixture *f = *state;
    Loader *l;
    LoaderConfig c = small_config(&f->ds, 0);
    c.batch_size = 0;
    assert_int_equal(loader_create(&c, &l), -1);
    assert_non_null(strstr(error_message(), "batch_size"));
    c = small_config(&f->ds, -1);
    assert_int_equal(loader_create(&c, &l), -1);
    c = small_config(&f->ds, 0);
    c.batch_size = NSAMPLES + 1;
    c.drop_last = true;
    assert_int_equal(loader_create(&c, &l), -1);
    assert_non_null(strstr(error_message(), "drop_last"));
}

int main(void)
{
    alarm(180); // a hang (a loader waiting forever) fails the program instead of stalling
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unshuffled_order_is_dataset_order),
        cmocka_unit_test(test_each_image_once_same_batches_any_workers),
        cmocka_unit_test(test_other_seed_other_batches),
        cmocka_unit_test(test_drop_last_and_prefetch),
        cmocka_unit_test(test_respawn_matches_persistent),
        cmocka_unit_test(test_two_loaders_at_once),
        cmocka_unit_test(test_next_batch_starts_following_epochs),
        cmocka_unit_test(test_bad_file_error_names_it),
        cmocka_unit_test(test_skip_bad_files_counts_them),
        cmocka_unit_test(test_dead_worker_is_named_without_hang),
        cmocka_unit_test(test_hung_worker_times_out),
        cmocka_unit_test(test_early_exit_leaves_nothing),
        cmocka_unit_test(test_sigint_leaves_nothing),
        cmocka_unit_test(test_fp16_batches),
        cmocka_unit_test(test_pinned_modes_need_a_gpu),
        cmocka_unit_test(test_bad_configs_are_rejected),
    };
    return cmocka_run_group_tests(tests, testutil_fixture_setup, testutil_fixture_teardown);
}
