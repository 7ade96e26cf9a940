// test_loader_bad_input.c: the loader against bad input and stuck or dying workers.
// A bad file skipped once is remembered for the run (read once over 3 epochs, for any
// num_workers, with the same batches whatever num_workers is); .jpg names that are not
// regular files (a FIFO, a dangling symbolic link) are counted and named by the scan,
// never opened, and are an error naming them or skipped and counted; the pixel limit
// reaches every decoder (0 workers and the workers); a SIGSTOP'd worker is reported
// within the timeout naming its pid, batch and epoch, with no hang and no process left
// behind; a worker that dies after its last batch of an epoch is reported (re-spawned
// and persistent workers).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loaders/dataset.h"
#include "loaders/loader.h"
#include "tests/loader_support.h"
#include "tests/support.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>

enum { NSAMPLES = FIXTURE_CLASSES * FIXTURE_PER_CLASS, BATCH = 4, OUT = 16, EPOCHS = 3 };

// What one epoch delivered, concatenated.
typedef struct {
    int64_t indices[NSAMPLES + 3];  // the fixture plus the bad files of these tests
    float images[NSAMPLES + 3][3 * OUT * OUT];
    int total;
    int64_t skipped;
} Epoch;

static LoaderConfig small_config(const Dataset *ds, int workers)
{
    return testutil_loader_config(ds, BATCH, workers, 77, OUT);
}

// Runs one epoch into e (NULL: discarded); loader_next_batch's final result.
static int run_epoch(Loader *l, int64_t epoch, Epoch *e)
{
    static Epoch scratch;
    if (!e) e = &scratch;
    memset(e, 0, sizeof *e);
    if (loader_begin_epoch(l, epoch) != 0) return -1;
    LoaderBatch b;
    int rc;
    while ((rc = loader_next_batch(l, &b)) == 1) {
        assert_true(e->total + b.count <= NSAMPLES + 3);
        memcpy(e->indices + e->total, b.indices, b.count * sizeof *b.indices);
        memcpy(e->images[e->total], b.images, b.image_bytes);
        e->total += b.count;
        e->skipped += b.skipped;
    }
    return rc;
}

static void assert_pids_gone(const int *pids, int n)
{
    double deadline = test_now_s() + 5;
    for (int i = 0; i < n; i++) {
        while (pids[i] > 0 && testutil_pid_alive(pids[i]) && test_now_s() < deadline) usleep(10000);
        if (pids[i] > 0 && testutil_pid_alive(pids[i])) fail_msg("worker pid %d still alive", pids[i]);
    }
}

static void assert_has(const char *text, const char *what)
{
    if (!strstr(text, what)) fail_msg("'%s' lacks '%s'", text, what);
}

// The three kinds of bad input of these tests, in class_001 (sorted first in it): a
// corrupt JPEG, a FIFO and a dangling symbolic link, all named .jpg.
typedef struct {
    char corrupt[256], fifo[256], link[256];
} BadFiles;

static void add_bad_files(const LoaderFixture *f, BadFiles *bad)
{
    snprintf(bad->corrupt, sizeof bad->corrupt, "%s/class_001/aaa_corrupt.jpg", f->root);
    snprintf(bad->fifo, sizeof bad->fifo, "%s/class_001/aab_fifo.jpg", f->root);
    snprintf(bad->link, sizeof bad->link, "%s/class_001/aac_dangling.jpg", f->root);
    assert_int_equal(testutil_write(bad->corrupt, "not a JPEG", 10), 0);
    assert_int_equal(mkfifo(bad->fifo, 0600), 0);
    assert_int_equal(symlink("/nonexistent/target.jpg", bad->link), 0);
}

static void remove_bad_files(const BadFiles *bad)
{
    unlink(bad->corrupt);
    unlink(bad->fifo);
    unlink(bad->link);
}

// The scan keeps the FIFO and the dangling link, marks and counts them, and its summary
// names them; nothing is opened (a FIFO would block the scan).
static void test_scan_counts_and_names_irregular_files(void **state)
{
    LoaderFixture *f = *state;
    BadFiles bad;
    add_bad_files(f, &bad);
    Dataset ds;
    assert_int_equal(dataset_scan(f->root, &ds), 0);
    assert_int_equal(ds.num_samples, NSAMPLES + 3);
    assert_int_equal(ds.num_irregular, 2);
    int found = 0;
    for (int64_t i = 0; i < ds.num_samples; i++) {
        DatasetFileKind k = dataset_file_kind(&ds, i);
        if (!strcmp(ds.paths[i], bad.fifo)) found++, assert_int_equal(k, DATASET_FILE_FIFO);
        else if (!strcmp(ds.paths[i], bad.link)) found++, assert_int_equal(k, DATASET_FILE_DANGLING_LINK);
        else assert_int_equal(k, DATASET_FILE_REGULAR);  // the corrupt file is regular
    }
    assert_int_equal(found, 2);
    char summary[2048];
    dataset_summary(&ds, summary, sizeof summary);
    assert_has(summary, "2 of them not regular files");
    assert_has(summary, "class_001/aab_fifo.jpg (a FIFO)");
    assert_has(summary, "class_001/aac_dangling.jpg (a dangling symbolic link)");
    // The split keeps the kinds with the files.
    Dataset train, held;
    assert_int_equal(dataset_split(&ds, 0.3, 5, &train, &held), 0);
    assert_int_equal(train.num_irregular + held.num_irregular, 2);
    dataset_free(&train);
    dataset_free(&held);
    dataset_free(&ds);
    remove_bad_files(&bad);
}

// Without skip_bad_files a FIFO or a dangling link is an error naming it, at creation
// (before any worker is forked), for any num_workers.
static void test_irregular_file_without_skip_is_named(void **state)
{
    LoaderFixture *f = *state;
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/class_002/zzz_pipe.jpg", f->root);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    Dataset ds;
    assert_int_equal(dataset_scan(f->root, &ds), 0);
    for (int workers = 0; workers <= 2; workers += 2) {
        LoaderConfig c = small_config(&ds, workers);
        Loader *l = NULL;
        assert_int_equal(loader_create(&c, &l), -1);
        assert_null(l);
        assert_int_equal(error_kind(), ERROR_BAD_DATA);
        assert_has(error_message(), fifo);
        assert_has(error_message(), "a FIFO, not a regular file");
        assert_int_equal(testutil_count_shm(), 0);
    }
    dataset_free(&ds);
    unlink(fifo);
}

// With skip_bad_files, over 3 epochs: the corrupt file is read once (the first epoch)
// and then skipped unread, the FIFO and the link are never opened, each epoch skips all
// three and delivers every good file once, and the batches are the same bytes for 0, 1
// and 3 workers; the distinct-bad-file counter says 3 throughout. "Read once": after the
// first epoch the corrupt file is replaced by a valid JPEG, which later epochs still skip
// because they never read it again (a re-read would deliver it).
static void test_bad_files_are_read_once_per_run(void **state)
{
    LoaderFixture *f = *state;
    BadFiles bad;
    add_bad_files(f, &bad);
    char good[256];
    snprintf(good, sizeof good, "%s/class_001/img_00000.jpg", f->root);
    size_t good_size;
    unsigned char *good_bytes = (unsigned char *)test_read_file(good, &good_size);
    assert_non_null(good_bytes);
    Dataset ds;
    assert_int_equal(dataset_scan(f->root, &ds), 0);
    static Epoch ref[EPOCHS], got;
    const int workers_list[] = {0, 1, 3};
    for (int wi = 0; wi < 3; wi++) {
        int workers = workers_list[wi];
        assert_int_equal(testutil_write(bad.corrupt, "not a JPEG", 10), 0);
        LoaderConfig c = small_config(&ds, workers);
        c.skip_bad_files = true;
        Loader *l;
        assert_int_equal(loader_create(&c, &l), 0);
        LoaderStats st;
        loader_get_stats(l, &st);
        assert_int_equal(st.bad_files, 2);  // the FIFO and the link, known from the scan
        for (int epoch = 0; epoch < EPOCHS; epoch++) {
            Epoch *e = workers == 0 ? &ref[epoch] : &got;
            assert_int_equal(run_epoch(l, epoch, e), 0);
            assert_int_equal(e->total, NSAMPLES);
            assert_int_equal(e->skipped, 3);
            for (int i = 0; i < e->total; i++)
                assert_int_equal(dataset_file_kind(&ds, e->indices[i]), DATASET_FILE_REGULAR);
            if (workers > 0) {
                assert_memory_equal(e->indices, ref[epoch].indices, sizeof e->indices);
                assert_memory_equal(e->images, ref[epoch].images, sizeof e->images);
            }
            loader_get_stats(l, &st);
            assert_int_equal(st.bad_files, 3);
            assert_int_equal(st.skipped, 3 * (epoch + 1));
            if (epoch == 0)  // now a good JPEG: read again, it would be delivered
                assert_int_equal(testutil_write(bad.corrupt, good_bytes, good_size), 0);
        }
        assert_has(st.last_skip, "aa");  // names one of the bad files
        loader_destroy(l);
    }
    // A fresh loader (a new run) reads the now-good file and skips only the other two.
    LoaderConfig c = small_config(&ds, 2);
    c.skip_bad_files = true;
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    assert_int_equal(run_epoch(l, 0, &got), 0);
    assert_int_equal(got.total, NSAMPLES + 1);
    assert_int_equal(got.skipped, 2);
    loader_destroy(l);
    free(good_bytes);
    dataset_free(&ds);
    remove_bad_files(&bad);
}

// max_image_pixels reaches the decoder of the 0-worker path and of every worker: a limit
// below the fixture's 40x36 images makes each file bad input naming it and its size.
static void test_pixel_limit_reaches_every_decoder(void **state)
{
    LoaderFixture *f = *state;
    for (int workers = 0; workers <= 2; workers += 2) {
        LoaderConfig c = small_config(&f->ds, workers);
        c.shuffle = false;
        c.max_image_pixels = 40 * 36 - 1;
        Loader *l;
        assert_int_equal(loader_create(&c, &l), 0);
        LoaderBatch b;
        assert_int_equal(loader_next_batch(l, &b), -1);
        assert_int_equal(error_kind(), ERROR_BAD_DATA);
        assert_has(error_message(), f->ds.paths[0]);
        assert_has(error_message(), "40x36");
        loader_destroy(l);
        c.max_image_pixels = 40 * 36;  // exactly the limit is fine
        assert_int_equal(loader_create(&c, &l), 0);
        assert_int_equal(loader_next_batch(l, &b), 1);
        loader_destroy(l);
    }
    LoaderConfig c = small_config(&f->ds, 0);
    c.max_image_pixels = -1;
    Loader *l;
    assert_int_equal(loader_create(&c, &l), -1);
    assert_has(error_message(), "max_image_pixels");
}

// A SIGSTOP'd worker: the wait for its batch ends after the timeout with an error that
// names its pid, the batch and the epoch, and says it was stopped; the worker is killed
// at once (it is gone before loader_destroy) and nothing is left behind.
static void test_stopped_worker_is_reported_within_timeout(void **state)
{
    LoaderFixture *f = *state;
    LoaderConfig c = small_config(&f->ds, 2);
    c.timeout_ms = 400;
    c.shuffle = false;
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    int pids[2] = {loader_worker_pid(l, 0), loader_worker_pid(l, 1)};
    LoaderBatch b;
    assert_int_equal(loader_next_batch(l, &b), 1);  // batch 0, from worker 0
    assert_int_equal(kill(pids[1], SIGSTOP), 0);
    double t0 = test_now_s();
    int rc = 1;
    int64_t last = 0;
    for (int calls = 0; calls < 40 && rc == 1; calls++) {
        rc = loader_next_batch(l, &b);
        if (rc == 1) last = b.batch_index;
    }
    double took = test_now_s() - t0;
    assert_int_equal(rc, -1);
    char want[96];
    snprintf(want, sizeof want, "worker 1 (pid %d, stopped (T))", pids[1]);
    assert_has(error_message(), want);
    assert_has(error_message(), "timed out after 400 ms");
    assert_has(error_message(), "of epoch 0");
    // Worker 1 holds the odd batches: the stuck one is the next one after the last good one
    // (or one after that when a prefetched odd batch was done before the stop).
    snprintf(want, sizeof want, "batch %lld of", (long long)(last + 1));
    char want2[96];
    snprintf(want2, sizeof want2, "batch %lld of", (long long)(last + 2));
    if (!strstr(error_message(), want) && !strstr(error_message(), want2))
        fail_msg("'%s' names neither batch %lld nor %lld", error_message(), (long long)last + 1,
                 (long long)last + 2);
    // within the timeout, plus polling and a busy machine's slack; nowhere near a hang
    if (took > 0.4 + 3.0) fail_msg("the timeout took %.2f s", took);
    assert_false(testutil_pid_alive(pids[1]));  // killed and reaped by the loader itself
    assert_int_equal(loader_next_batch(l, &b), -1);  // stays failed, no hang
    LoaderStats st;
    loader_get_stats(l, &st);
    assert_int_equal(st.worker_failures, 1);
    loader_destroy(l);
    assert_pids_gone(pids, 2);
    assert_int_equal(testutil_count_shm(), 0);
}

// loader_destroy with a stopped worker (no timeout set): it continues or kills it, and
// returns promptly.
static void test_destroy_with_stopped_worker_leaves_nothing(void **state)
{
    LoaderFixture *f = *state;
    LoaderConfig c = small_config(&f->ds, 2);
    c.timeout_ms = 0;
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    int pids[2] = {loader_worker_pid(l, 0), loader_worker_pid(l, 1)};
    LoaderBatch b;
    assert_int_equal(loader_next_batch(l, &b), 1);
    assert_int_equal(kill(pids[0], SIGSTOP), 0);
    double t0 = test_now_s();
    loader_destroy(l);
    assert_true(test_now_s() - t0 < 3.0);
    assert_pids_gone(pids, 2);
}

// Waits until pid is dead (a zombie counts as dead).
static void wait_dead(int pid)
{
    double deadline = test_now_s() + 5;
    while (testutil_pid_alive(pid) && test_now_s() < deadline) usleep(5000);
    assert_false(testutil_pid_alive(pid));
}

// A worker that dies after it has delivered its last batch of the epoch is reported at
// the end of the epoch, naming its pid and signal: re-spawned workers (joined there)
// and persistent ones (checked there).
static void test_death_after_last_batch_is_reported(void **state)
{
    LoaderFixture *f = *state;
    for (int persistent = 0; persistent <= 1; persistent++) {
        LoaderConfig c = small_config(&f->ds, 2);
        c.persistent_workers = persistent;
        Loader *l;
        assert_int_equal(loader_create(&c, &l), 0);
        assert_int_equal(loader_begin_epoch(l, 0), 0);
        int pid = loader_worker_pid(l, 1);
        assert_true(pid > 0);
        LoaderBatch b;
        int64_t n = loader_num_batches(l);
        for (int64_t i = 0; i < n; i++) assert_int_equal(loader_next_batch(l, &b), 1);
        // Every batch delivered: worker 1 is idle, its share of the epoch done.
        assert_int_equal(kill(pid, SIGTERM), 0);
        wait_dead(pid);
        assert_int_equal(loader_next_batch(l, &b), -1);  // the end of the epoch
        char want[96];
        snprintf(want, sizeof want, "worker 1 (pid %d) was killed by signal %d", pid, SIGTERM);
        assert_has(error_message(), want);
        assert_has(error_message(), "after its last batch of epoch 0");
        LoaderStats st;
        loader_get_stats(l, &st);
        assert_int_equal(st.worker_failures, 1);
        loader_destroy(l);
    }
    // A clean epoch in re-spawn mode still ends with 0 (the workers exit with status 0).
    LoaderConfig c = small_config(&f->ds, 2);
    c.persistent_workers = false;
    Loader *l;
    assert_int_equal(loader_create(&c, &l), 0);
    for (int epoch = 0; epoch < 2; epoch++) assert_int_equal(run_epoch(l, epoch, NULL), 0);
    LoaderStats st;
    loader_get_stats(l, &st);
    assert_int_equal(st.worker_failures, 0);
    loader_destroy(l);
}

// build/datasets check lists the FIFO and the dangling link as bad without opening them
// (the FIFO would block: the command runs under `timeout`), and still checks the rest.
static void test_datasets_check_names_irregular_files(void **state)
{
    LoaderFixture *f = *state;
    BadFiles bad;
    add_bad_files(f, &bad);
    char *dir = test_temp_dir();
    assert_non_null(dir);
    int rc = test_run("timeout 60 '%s/datasets' check '%s' 2 > '%s/out.txt' 2>&1", test_build_dir(),
                      f->root, dir);
    char path[512];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    char *out = test_read_file(path, NULL);
    assert_non_null(out);
    if (rc != 1) fail_msg("datasets check exited %d:\n%s", rc, out);
    assert_has(out, "2 of them not regular files");
    assert_has(out, "aab_fifo.jpg: a FIFO, not a regular file");
    assert_has(out, "aac_dangling.jpg: a dangling symbolic link, not a regular file");
    assert_has(out, "aaa_corrupt.jpg");
    assert_has(out, "skipped 3 bad files");
    free(out);
    test_remove_tree(dir);
    free(dir);
    remove_bad_files(&bad);
}

int main(void)
{
    alarm(120); // a hang (a FIFO opened, a loader waiting forever) fails instead of stalling
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_counts_and_names_irregular_files),
        cmocka_unit_test(test_irregular_file_without_skip_is_named),
        cmocka_unit_test(test_bad_files_are_read_once_per_run),
        cmocka_unit_test(test_pixel_limit_reaches_every_decoder),
        cmocka_unit_test(test_stopped_worker_is_reported_within_timeout),
        cmocka_unit_test(test_destroy_with_stopped_worker_leaves_nothing),
        cmocka_unit_test(test_death_after_last_batch_is_reported),
        cmocka_unit_test(test_datasets_check_names_irregular_files),
    };
    return cmocka_run_group_tests(tests, testutil_fixture_setup, testutil_fixture_teardown);
}
