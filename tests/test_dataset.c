// test_dataset.c: ImageFolder scanning (classes, labels, order, bad layouts named in
// errors), the train / held-out split (stratified, disjoint, deterministic) and the
// synthetic dataset generator (deterministic, learnable, cached), and the usage errors
// of the build/datasets tool.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loaders/dataset.h"
#include "loaders/dataset_gen.h"
#include "loaders/jpeg.h"
#include "tests/loader_support.h"

#include <math.h>
#include <stdbool.h>

typedef struct {
    char *tmp;  // test_temp_dir's
    char root[128];
} DsFixture;

static int setup(void **state)
{
    DsFixture *f = calloc(1, sizeof *f);
    if (!f || !(f->tmp = test_temp_dir())) return -1;
    if (testutil_make_dataset(f->tmp, 4, 6, 48, 40, f->root, sizeof f->root) != 0) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    DsFixture *f = *state;
    test_remove_tree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

static void test_scan_finds_classes_and_labels(void **state)
{
    DsFixture *f = *state;
    Dataset ds;
    assert_int_equal(dataset_scan(f->root, &ds), 0);
    assert_int_equal(ds.num_classes, 4);
    assert_int_equal(ds.num_samples, 24);
    assert_string_equal(ds.class_names[0], "class_000");
    assert_string_equal(ds.class_names[3], "class_003");
    for (int64_t i = 0; i < ds.num_samples; i++) {
        assert_int_equal(ds.labels[i], i / 6);
        char want[256];
        snprintf(want, sizeof want, "%s/class_%03d/img_%05d.jpg", f->root, (int)(i / 6),
                 (int)(i % 6));
        assert_string_equal(ds.paths[i], want);
    }
    dataset_free(&ds);
}

static void test_scan_ignores_other_files_and_sorts(void **state)
{
    DsFixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/class_001/README.txt", f->root);
    assert_int_equal(testutil_write(path, "x", 1), 0);
    snprintf(path, sizeof path, "%s/class_001/.hidden.jpg", f->root);
    assert_int_equal(testutil_write(path, "x", 1), 0);
    snprintf(path, sizeof path, "%s/class_001/UPPER.JPEG", f->root);
    assert_int_equal(testutil_write(path, "x", 1), 0);
    Dataset ds;
    assert_int_equal(dataset_scan(f->root, &ds), 0);
    assert_int_equal(ds.num_samples, 25); // UPPER.JPEG counts; .txt and dot-files do not
    assert_non_null(strstr(ds.paths[6], "UPPER.JPEG")); // byte order: 'U' < 'i'
    assert_int_equal(ds.labels[6], 1);
    dataset_free(&ds);
    unlink(path);
}

static void test_missing_root_is_named(void **state)
{
    DsFixture *f = *state;
    char root[160];
    snprintf(root, sizeof root, "%s/no-such-root", f->tmp);
    Dataset ds;
    assert_int_equal(dataset_scan(root, &ds), -1);
    assert_non_null(strstr(error_message(), root));
    assert_non_null(strstr(error_message(), "does not exist"));
    assert_int_equal(ds.num_samples, 0);
}

static void test_empty_class_folder_is_named(void **state)
{
    DsFixture *f = *state;
    char dir[200];
    snprintf(dir, sizeof dir, "%s/zz_empty", f->root);
    assert_int_equal(mkdir(dir, 0755), 0);
    Dataset ds;
    assert_int_equal(dataset_scan(f->root, &ds), -1);
    assert_non_null(strstr(error_message(), dir));
    rmdir(dir);
}

// An empty folder that sorts first is scanned before any file list was allocated: the
// scan used to hand qsort a NULL array (undefined behaviour that UBSan reports).
static void test_empty_first_class_folder_is_named(void **state)
{
    DsFixture *f = *state;
    char dir[200];
    snprintf(dir, sizeof dir, "%s/aa_empty", f->root);
    assert_int_equal(mkdir(dir, 0755), 0);
    Dataset ds;
    assert_int_equal(dataset_scan(f->root, &ds), -1);
    assert_non_null(strstr(error_message(), dir));
    assert_non_null(strstr(error_message(), "has no .jpg/.jpeg files"));
    rmdir(dir);
}

static void test_root_without_classes_is_an_error(void **state)
{
    DsFixture *f = *state;
    char dir[160];
    snprintf(dir, sizeof dir, "%s/flat", f->tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    Dataset ds;
    assert_int_equal(dataset_scan(dir, &ds), -1);
    assert_non_null(strstr(error_message(), "no class folders"));
    rmdir(dir);
}

// Every file lands in exactly one part, each class gives round(0.35 * 6) = 2 files to
// held-out, both parts keep the scan order, and the same seed gives the same split.
static void test_split_is_stratified_disjoint_and_deterministic(void **state)
{
    DsFixture *f = *state;
    Dataset ds, tr, ho, tr2, ho2;
    assert_int_equal(dataset_scan(f->root, &ds), 0);
    assert_int_equal(dataset_split(&ds, 0.35, 7, &tr, &ho), 0);
    assert_int_equal(tr.num_classes, 4);
    assert_int_equal(ho.num_classes, 4);
    assert_string_equal(ho.class_names[2], "class_002");
    assert_int_equal(tr.num_samples, 16);
    assert_int_equal(ho.num_samples, 8);
    int per_class[4] = {0};
    for (int64_t i = 0; i < ho.num_samples; i++) per_class[ho.labels[i]]++;
    for (int c = 0; c < 4; c++) assert_int_equal(per_class[c], 2);
    int64_t it = 0, ih = 0;
    for (int64_t i = 0; i < ds.num_samples; i++) {
        // Walking the scan in order meets each part's files in their own order.
        bool in_t = it < tr.num_samples && strcmp(tr.paths[it], ds.paths[i]) == 0;
        bool in_h = ih < ho.num_samples && strcmp(ho.paths[ih], ds.paths[i]) == 0;
        assert_true(in_t != in_h);
        if (in_t) assert_int_equal(tr.labels[it++], ds.labels[i]);
        else assert_int_equal(ho.labels[ih++], ds.labels[i]);
    }
    assert_int_equal(dataset_split(&ds, 0.35, 7, &tr2, &ho2), 0);
    for (int64_t i = 0; i < ho.num_samples; i++) assert_string_equal(ho.paths[i], ho2.paths[i]);
    dataset_free(&tr2);
    dataset_free(&ho2);
    // Another seed picks other files (6 choose 2 per class: a clash is unlikely).
    assert_int_equal(dataset_split(&ds, 0.35, 8, &tr2, &ho2), 0);
    int same = 0;
    for (int64_t i = 0; i < ho.num_samples; i++) same += strcmp(ho.paths[i], ho2.paths[i]) == 0;
    assert_true(same < ho.num_samples);
    dataset_free(&tr2);
    dataset_free(&ho2);
    // Tiny fractions still hold one file out per class; bad fractions are refused.
    assert_int_equal(dataset_split(&ds, 0.01, 7, &tr2, &ho2), 0);
    assert_int_equal(ho2.num_samples, 4);
    dataset_free(&tr2);
    dataset_free(&ho2);
    assert_int_equal(dataset_split(&ds, 1.0, 7, &tr2, &ho2), -1);
    assert_non_null(strstr(error_message(), "fraction"));
    assert_int_equal(tr2.num_samples, 0);
    dataset_free(&tr);
    dataset_free(&ho);
    dataset_free(&ds);
}

static void test_generator_is_deterministic(void **state)
{
    DsFixture *f = *state;
    char other[160];
    snprintf(other, sizeof other, "%s/again", f->tmp);
    DatasetGenConfig cfg = {4, 6, 48, 40, 90, 77};
    assert_int_equal(dataset_generate(&cfg, other), 0);
    assert_int_equal(dataset_generate(&cfg, other), -1); // never overwrites
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < 6; i++) {
            char a[256], b[256];
            snprintf(a, sizeof a, "%s/class_%03d/img_%05d.jpg", f->root, c, i);
            snprintf(b, sizeof b, "%s/class_%03d/img_%05d.jpg", other, c, i);
            size_t na, nb;
            char *da = test_read_file(a, &na), *db = test_read_file(b, &nb);
            assert_non_null(da);
            assert_non_null(db);
            assert_int_equal(na, nb);
            assert_memory_equal(da, db, na);
            free(da);
            free(db);
        }
}

// Nearest-class-centroid on a coarse colour histogram, leave-one-out: the classes must
// be far easier than chance to tell apart.
static void test_generated_classes_are_learnable(void **state)
{
    (void)state;
    enum { C = 10, N = 12, W = 48, H = 48, BINS = 64 };
    DatasetGenConfig cfg = {C, N, W, H, 90, 3};
    static double hist[C][N][BINS];
    static uint8_t rgb[W * H * 3];
    for (int c = 0; c < C; c++)
        for (int i = 0; i < N; i++) {
            dataset_gen_render(&cfg, c, i, rgb);
            memset(hist[c][i], 0, sizeof hist[c][i]);
            // Only bright pixels: backgrounds stay below 141 in every channel.
            for (int p = 0; p < W * H; p++) {
                const uint8_t *px = rgb + 3 * p;
                if (px[0] < 150 && px[1] < 150 && px[2] < 150) continue;
                int bin = (px[0] >> 6) * 16 + (px[1] >> 6) * 4 + (px[2] >> 6);
                hist[c][i][bin] += 1.0 / (W * H);
            }
        }
    int correct = 0;
    for (int c = 0; c < C; c++)
        for (int i = 0; i < N; i++) {
            int best = -1;
            double best_d = 1e300;
            for (int k = 0; k < C; k++) {
                double d = 0;
                for (int b = 0; b < BINS; b++) {
                    double m = 0;
                    for (int j = 0; j < N; j++)
                        if (!(k == c && j == i)) m += hist[k][j][b];
                    m /= (k == c ? N - 1 : N);
                    d += (hist[c][i][b] - m) * (hist[c][i][b] - m);
                }
                if (d < best_d) best_d = d, best = k;
            }
            correct += best == c;
        }
    // Colour alone separates most classes (shape does the rest); chance is 10%.
    if (correct < C * N * 7 / 10) fail_msg("only %d of %d classified right", correct, C * N);
}

static void test_ensure_reuses_cache(void **state)
{
    DsFixture *f = *state;
    DatasetGenConfig cfg;
    assert_int_equal(dataset_gen_preset("tiny", &cfg), 0);
    char cache[160], root1[512], root2[512];
    snprintf(cache, sizeof cache, "%s/cache/datasets", f->tmp);
    assert_int_equal(dataset_gen_ensure(&cfg, cache, root1, sizeof root1), 0);
    char probe[600];
    snprintf(probe, sizeof probe, "%s/class_000/img_00000.jpg", root1);
    struct stat a, b;
    assert_int_equal(stat(probe, &a), 0);
    assert_int_equal(dataset_gen_ensure(&cfg, cache, root2, sizeof root2), 0);
    assert_string_equal(root1, root2);
    assert_int_equal(stat(probe, &b), 0);
    assert_int_equal(a.st_ino, b.st_ino); // not regenerated
    Dataset ds;
    assert_int_equal(dataset_scan(root1, &ds), 0);
    assert_int_equal(ds.num_samples, (int64_t)cfg.num_classes * cfg.images_per_class);
    dataset_free(&ds);
    assert_int_equal(dataset_gen_preset("nope", &cfg), -1);
    assert_non_null(strstr(error_message(), "nope"));
}

// The build/datasets tool: --help explains both commands and exits 0; a WORKERS that is
// not an integer in 0..256 is bad usage (exit status 2, naming it), not 0 workers.
static void test_datasets_tool_usage(void **state)
{
    DsFixture *f = *state;
    const char *build = getenv("SUITE_BUILD") ? getenv("SUITE_BUILD") : "build";
    char prog[512], cmd[2048], out[256];
    snprintf(prog, sizeof prog, "%s/datasets", build);
    if (access(prog, X_OK) != 0) fail_msg("%s is not built (make all builds it)", prog);
    snprintf(out, sizeof out, "%s/tool.txt", f->tmp);
    snprintf(cmd, sizeof cmd, "'%s' --help >'%s' 2>&1", prog, out);
    assert_int_equal(system(cmd), 0);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "generate"));
    assert_non_null(strstr(text, "WORKERS worker processes"));
    free(text);
    const char *bad[] = {"abc", "-3", "2x", "100000"};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "'%s' check '%s' '%s' >'%s' 2>&1", prog, f->root, bad[i], out);
        int rc = system(cmd);
        if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 2) fail_msg("check WORKERS=%s: status %d, want 2", bad[i], rc);
        text = test_read_file(out, NULL);
        assert_non_null(text);
        char want[64];
        snprintf(want, sizeof want, "bad WORKERS '%s'", bad[i]);
        if (!strstr(text, want)) fail_msg("check WORKERS=%s: output lacks \"%s\": %s", bad[i], want, text);
        free(text);
    }
    snprintf(cmd, sizeof cmd, "'%s' check '%s' 0 >'%s' 2>&1", prog, f->root, out);
    assert_int_equal(system(cmd), 0);
}

// `datasets check` on an empty root, and on a root whose only class folder is empty: a
// clear error (exit status 1) naming the folder. Both once passed qsort a NULL array, which
// the sanitized build (make test-sanitize) reports as undefined behaviour.
static void test_datasets_check_empty_folders(void **state)
{
    DsFixture *f = *state;
    const char *build = getenv("SUITE_BUILD") ? getenv("SUITE_BUILD") : "build";
    char prog[512], root[160], cls[200], cmd[2048], out[256];
    snprintf(prog, sizeof prog, "%s/datasets", build);
    if (access(prog, X_OK) != 0) fail_msg("%s is not built (make all builds it)", prog);
    snprintf(root, sizeof root, "%s/empty_root", f->tmp);
    snprintf(cls, sizeof cls, "%s/only_class", root);
    snprintf(out, sizeof out, "%s/check.txt", f->tmp);
    assert_int_equal(mkdir(root, 0755), 0);
    const char *folder[] = {root, cls}, *want[] = {"no class folders", "has no .jpg/.jpeg files"};
    for (int i = 0; i < 2; i++) {
        if (i == 1) assert_int_equal(mkdir(cls, 0755), 0);
        snprintf(cmd, sizeof cmd, "'%s' check '%s' 0 >'%s' 2>&1", prog, root, out);
        int rc = system(cmd);
        char *text = test_read_file(out, NULL);
        assert_non_null(text);
        if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 1)
            fail_msg("datasets check on %s: status %d, want exit 1: %s", folder[i], rc, text);
        if (!strstr(text, folder[i]) || !strstr(text, want[i]))
            fail_msg("datasets check: output lacks '%s' and '%s': %s", folder[i], want[i], text);
        free(text);
    }
    rmdir(cls);
    rmdir(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_finds_classes_and_labels),
        cmocka_unit_test(test_scan_ignores_other_files_and_sorts),
        cmocka_unit_test(test_missing_root_is_named),
        cmocka_unit_test(test_empty_class_folder_is_named),
        cmocka_unit_test(test_empty_first_class_folder_is_named),
        cmocka_unit_test(test_root_without_classes_is_an_error),
        cmocka_unit_test(test_split_is_stratified_disjoint_and_deterministic),
        cmocka_unit_test(test_generator_is_deterministic),
        cmocka_unit_test(test_generated_classes_are_learnable),
        cmocka_unit_test(test_ensure_reuses_cache),
        cmocka_unit_test(test_datasets_tool_usage),
        cmocka_unit_test(test_datasets_check_empty_folders),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
