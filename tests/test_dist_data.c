// test_dist_data.c: DDP's data path. Each rank reads its own shard through the loader with
// its own workers (LoaderConfig.world, .rank: torch.utils.data.DistributedSampler): for 2
// and 3 ranks over the 21-image fixture, in two epochs,
// - every rank takes the same number of batches (ceil(21 / world) samples each, padded);
// - rank r's sample i is position r + i * world of the epoch's order of ONE loader with the
//   same seed (batch size local x world): the same global sample order, so together the
//   ranks' batch b is that loader's batch b; the padding (21 -> 22 for 2 ranks) repeats the
//   epoch's first samples, as DistributedSampler wraps;
// - the samples' labels and augmented pixels are bit-identical to the single loader's
//   (augmentation is seeded by (seed, epoch, dataset index)), whatever the workers;
// - the union of the ranks' samples is the single epoch's samples plus the padding.
// And bad rank/world values are ERROR_BAD_USAGE.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "loaders/loader.h"
#include "tests/loader_support.h"

enum { LOCAL_BATCH = 3, OUT = 12, NSAMPLES = FIXTURE_CLASSES * FIXTURE_PER_CLASS, MAX_WORLD = 3 };
#define SAMPLE_FLOATS (3 * OUT * OUT)

typedef struct {
    int64_t indices[NSAMPLES + MAX_WORLD];
    int32_t labels[NSAMPLES + MAX_WORLD];
    float images[NSAMPLES + MAX_WORLD][SAMPLE_FLOATS];
    int total, batches;
} Epoch;

static LoaderConfig config(const Dataset *ds, int batch, int workers, int world, int rank)
{
    LoaderConfig c = loader_default_config(ds, batch);
    c.num_workers = workers;
    c.seed = 77;
    c.augment = augment_default_config(OUT);
    c.timeout_ms = 20000;
    c.world = world;
    c.rank = rank;
    return c;
}

static void read_epoch(const LoaderConfig *c, int64_t epoch, Epoch *e)
{
    Loader *l = NULL;
    if (loader_create(c, &l) != 0) fail_msg("%s", error_message());
    memset(e, 0, sizeof *e);
    assert_int_equal(loader_begin_epoch(l, epoch), 0);
    LoaderBatch b;
    int rc;
    while ((rc = loader_next_batch(l, &b)) == 1) {
        assert_true(e->total + b.count <= NSAMPLES + MAX_WORLD);
        memcpy(e->indices + e->total, b.indices, b.count * sizeof *b.indices);
        memcpy(e->labels + e->total, b.labels, b.count * sizeof *b.labels);
        memcpy(e->images[e->total], b.images, b.image_bytes);
        e->total += b.count;
        e->batches++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(e->batches, loader_num_batches(l));
    assert_int_equal(e->total, loader_epoch_samples(l));
    int64_t order[NSAMPLES + MAX_WORLD];
    loader_epoch_order(l, order);
    assert_memory_equal(order, e->indices, (size_t)e->total * sizeof *order);
    loader_destroy(l);
}

static void shards_match_one_loader(const Dataset *ds, int world)
{
    static Epoch single, rank_epoch[MAX_WORLD];
    int per_rank = (NSAMPLES + world - 1) / world;
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        LoaderConfig one = config(ds, LOCAL_BATCH * world, 1, 0, 0);
        read_epoch(&one, epoch, &single);
        assert_int_equal(single.total, NSAMPLES);
        int seen[NSAMPLES] = {0};
        for (int r = 0; r < world; r++) {
            // every rank its own workers: 2, 0, 1 (the batches may not depend on them)
            LoaderConfig c = config(ds, LOCAL_BATCH, (2 + 2 * r) % 3, world, r);
            Epoch *e = &rank_epoch[r];
            read_epoch(&c, epoch, e);
            assert_int_equal(e->total, per_rank);
            assert_int_equal(e->batches, rank_epoch[0].batches); // the same steps on every rank
            for (int i = 0; i < e->total; i++) {
                int p = (r + i * world) % NSAMPLES; // position in the single epoch (wrapped)
                assert_int_equal(e->indices[i], single.indices[p]);
                assert_int_equal(e->labels[i], single.labels[p]);
                assert_memory_equal(e->images[i], single.images[p], sizeof e->images[i]);
                seen[e->indices[i]]++;
            }
        }
        int padding = per_rank * world - NSAMPLES, twice = 0;
        for (int i = 0; i < NSAMPLES; i++) {
            assert_true(seen[i] == 1 || seen[i] == 2); // every sample of the epoch, once ...
            twice += seen[i] == 2;
        }
        assert_int_equal(twice, padding); // ... and the padding's samples twice
        for (int i = 0; i < padding; i++) assert_int_equal(seen[single.indices[i]], 2);
        printf("world %d, epoch %lld: %d batches of %d per rank, %d samples per rank (%d padding), "
               "the single loader's order and pixels\n",
               world, (long long)epoch, rank_epoch[0].batches, LOCAL_BATCH, per_rank, padding);
    }
    // the epochs differ (shuffled anew), so the comparison is not of a fixed order
    Epoch *e0 = &single;
    LoaderConfig one = config(ds, LOCAL_BATCH * world, 0, 0, 0);
    static Epoch first;
    read_epoch(&one, 0, &first);
    assert_memory_not_equal(first.indices, e0->indices, sizeof first.indices[0] * NSAMPLES);
}

static void test_two_ranks(void **state) { shards_match_one_loader(&((LoaderFixture *)*state)->ds, 2); }
static void test_three_ranks(void **state) { shards_match_one_loader(&((LoaderFixture *)*state)->ds, 3); }

static void test_bad_rank_or_world(void **state)
{
    const Dataset *ds = &((LoaderFixture *)*state)->ds;
    const int bad[][2] = {{2, 2}, {2, -1}, {-1, 0}, {0, 1}, {1, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        LoaderConfig c = config(ds, LOCAL_BATCH, 0, bad[i][0], bad[i][1]);
        Loader *l = NULL;
        assert_int_equal(loader_create(&c, &l), -1);
        assert_int_equal(error_kind(), ERROR_BAD_USAGE);
        assert_null(l);
    }
    // more ranks than one batch each with drop_last: no batch, said so
    LoaderConfig c = config(ds, 8, 0, 4, 3);
    c.drop_last = true;
    Loader *l = NULL;
    assert_int_equal(loader_create(&c, &l), -1);
    assert_non_null(strstr(error_message(), "per rank"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ranks),
        cmocka_unit_test(test_three_ranks),
        cmocka_unit_test(test_bad_rank_or_world),
    };
    return cmocka_run_group_tests(tests, testutil_fixture_setup, testutil_fixture_teardown);
}
