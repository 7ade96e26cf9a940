// test_loader_bench.c: end to end, build/bench_workers on a tiny generated dataset in a
// temporary cache: the loader, raw-decode and loader+training rows come out "ok" with
// images/s > 0 and every epoch complete in the tidy CSV, and scripts/charts/workers.gp
// (while it exists) draws both charts from it (PNG and SVG); a bad BENCH_WORKERS_* value is refused at
// start-up and a missing dataset fails every run with the reason; a run stopped midway
// keeps its measured rows; the loader options (--loader-timeout, --max-image-pixels) are
// checked and reach every loader; the large-source family runs on its own preset, which
// only a run that selects it generates.
// Skipped when the program is not built.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/loader_support.h"
#include "tests/support.h"

typedef struct {
    char variant[64], practice[64], status[16], reason[256];
    double images_per_second, wrong_epochs;
    double ratio; // per_core_ratio_to_raw_decode; -1 when the row has none
} Row;

// Splits a CSV line in place (no quoting in the tidy CSV).
static int split(char *line, char **cols, int max)
{
    int n = 0;
    for (char *p = line; n < max;) {
        cols[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

static int read_rows(const char *csv, Row *rows, int max)
{
    FILE *f = fopen(csv, "r");
    if (!f) return -1;
    static char header[8192], line[8192];
    char *hc[256], *lc[256];
    if (!fgets(header, sizeof header, f)) return fclose(f), -1;
    header[strcspn(header, "\n")] = '\0';
    int nh = split(header, hc, 256), n = 0;
    int ip = -1, iv = -1, is = -1, iips = -1, iwe = -1, ir = -1, irat = -1;
    for (int i = 0; i < nh; i++) {
        if (!strcmp(hc[i], "practice")) ip = i;
        if (!strcmp(hc[i], "variant")) iv = i;
        if (!strcmp(hc[i], "status")) is = i;
        if (!strcmp(hc[i], "images_per_second")) iips = i;
        if (!strcmp(hc[i], "wrong_epochs")) iwe = i;
        if (!strcmp(hc[i], "reason")) ir = i;
        if (!strcmp(hc[i], "per_core_ratio_to_raw_decode")) irat = i;
    }
    while (n < max && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        int nl = split(line, lc, 256);
        if (ip < 0 || iv < 0 || is < 0 || nl < nh) continue;
        Row *r = &rows[n++];
        snprintf(r->practice, sizeof r->practice, "%s", lc[ip]);
        snprintf(r->variant, sizeof r->variant, "%s", lc[iv]);
        snprintf(r->status, sizeof r->status, "%s", lc[is]);
        snprintf(r->reason, sizeof r->reason, "%s", ir >= 0 ? lc[ir] : "");
        r->images_per_second = iips >= 0 ? atof(lc[iips]) : 0; // no counter when none ran
        r->wrong_epochs = iwe >= 0 ? atof(lc[iwe]) : 0;
        r->ratio = irat >= 0 && lc[irat][0] ? atof(lc[irat]) : -1;
    }
    fclose(f);
    return n;
}

static const Row *find(const Row *rows, int n, const char *practice, const char *variant)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].practice, practice) && !strcmp(rows[i].variant, variant)) return &rows[i];
    return NULL;
}

// Path of build/bench_workers in prog; fails the test when it is not built: `make all`
// builds it, so a missing program is a broken build, never a reason to pass.
static bool bench_workers_path(char *prog, size_t size)
{
    snprintf(prog, size, "%s/bench_workers", test_build_dir());
    if (access(prog, X_OK) != 0) fail_msg("%s is not built (make all builds it)", prog);
    return true;
}

static void test_bench_workers_end_to_end(void **state)
{
    (void)state;
    const char *root = test_suite_root();
    char prog[512];
    if (!bench_workers_path(prog, sizeof prog)) skip();
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd %s && BENCH_CACHE_DIR=%s/cache BENCH_WORKERS_PRESET=tiny BENCH_WORKERS_MAX=2 "
             "BENCH_WORKERS_BATCH=8 BENCH_WORKERS_SIZE=32 BENCH_WORKERS_TRAIN_SIZE=16 "
             "%s%s --benchmark_min_time=0.02 --harness_csv=%s/workers.csv "
             "--benchmark_filter='^num_workers/workers_[02]|decode_ref|train/workers_[02]' "
             ">%s/log.txt 2>&1",
             root, tmp, prog[0] == '/' ? "" : "$OLDPWD/", prog, tmp, tmp);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "tail -20 %s/log.txt >&2", tmp);
        (void)system(cmd);
        fail_msg("bench_workers exited with %d", rc);
    }
    char csv[128];
    snprintf(csv, sizeof csv, "%s/workers.csv", tmp);
    static Row rows[64];
    int n = read_rows(csv, rows, 64);
    assert_true(n >= 5);
    const char *want[][2] = {{"num_workers", "workers_0"}, {"num_workers", "workers_2"},
                             {"num_workers_decode_ref", "raw_turbojpeg_1core"},
                             {"num_workers_train", "workers_0"}, {"num_workers_train", "workers_2"}};
    for (int i = 0; i < 5; i++) {
        const Row *r = find(rows, n, want[i][0], want[i][1]);
        if (!r) fail_msg("no row %s/%s", want[i][0], want[i][1]);
        assert_string_equal(r->status, "ok");
        assert_true(r->images_per_second > 0);
        assert_true(r->wrong_epochs == 0);
    }
    // The old gnuplot script, while it exists (charts are moving to scripts/charts/
    // *.charts descriptions drawn by render.py, which has tests of its own).
    char gp[600];
    snprintf(gp, sizeof gp, "%s/scripts/charts/workers.gp", root);
    if (access(gp, R_OK) == 0 && system("command -v gnuplot >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s/charts && gnuplot -e \"csv='%s'; outdir='%s/charts'\" "
                 "%s/scripts/charts/workers.gp 2>%s/gnuplot.txt", tmp, csv, tmp, root, tmp);
        assert_int_equal(system(cmd), 0);
        const char *files[] = {"workers_images_per_second.png", "workers_images_per_second.svg",
                               "workers_wait_per_step.png", "workers_wait_per_step.svg"};
        for (int i = 0; i < 4; i++) {
            char path[256];
            struct stat sb;
            snprintf(path, sizeof path, "%s/charts/%s", tmp, files[i]);
            if (stat(path, &sb) != 0 || sb.st_size < 1000) fail_msg("chart %s missing or empty", path);
        }
    }
    test_remove_tree(tmp);
    free(tmp);
}

// Entries (not dot-files) in a folder: the generated datasets of a cache.
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

// The large-source family (num_workers_large_source: workers 0, 1, 2) is listed; a run
// that filters it out does not generate its dataset; run on a small generated preset
// (--large_dataset, --large_size) its rows come out "ok" with every epoch complete, and
// the 0-worker row carries its ratio to raw decode of the same files.
static void test_bench_workers_large_source(void **state)
{
    (void)state;
    char prog[512];
    if (!bench_workers_path(prog, sizeof prog)) skip();
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char cmd[2048], csv[128], log[128], cache[128];
    snprintf(log, sizeof log, "%s/log.txt", tmp);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    snprintf(cmd, sizeof cmd, "BENCH_WORKERS_MAX=2 %s --benchmark_list_tests >%s 2>&1", prog, log);
    assert_int_equal(system(cmd), 0);
    char *text = test_read_file(log, NULL);
    assert_non_null(text);
    for (int w = 0; w <= 2; w++) {
        char name[64];
        snprintf(name, sizeof name, "num_workers_large_source/workers_%d/", w);
        if (!strstr(text, name)) fail_msg("%s not listed: %s", name, text);
    }
    free(text);
    const char *env = "BENCH_WORKERS_PRESET=tiny BENCH_WORKERS_MAX=2 BENCH_WORKERS_BATCH=8 "
                      "BENCH_WORKERS_LARGE_PRESET=small BENCH_WORKERS_LARGE_SIZE=32 BENCH_WORKERS_SIZE=32";
    snprintf(csv, sizeof csv, "%s/other.csv", tmp);
    snprintf(cmd, sizeof cmd,
             "BENCH_CACHE_DIR=%s %s %s --benchmark_min_time=0.01 --harness_csv=%s "
             "--benchmark_filter='^num_workers/workers_0/' >%s 2>&1", cache, env, prog, csv, log);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(count_entries(cache), 1); // the tiny preset only
    snprintf(csv, sizeof csv, "%s/large.csv", tmp);
    snprintf(cmd, sizeof cmd,
             "BENCH_CACHE_DIR=%s %s %s --benchmark_min_time=0.01 --harness_csv=%s "
             "--benchmark_filter='^num_workers_large_source/' >%s 2>&1", cache, env, prog, csv, log);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "tail -20 %s >&2", log);
        (void)system(cmd);
        fail_msg("bench_workers exited with %d", rc);
    }
    assert_int_equal(count_entries(cache), 2); // and now the small one
    static Row rows[16];
    int n = read_rows(csv, rows, 16);
    if (n != 3) fail_msg("%d rows in %s, want 3", n, csv);
    for (int w = 0; w <= 2; w++) {
        char variant[32];
        snprintf(variant, sizeof variant, "workers_%d", w);
        const Row *r = find(rows, n, "num_workers_large_source", variant);
        if (!r) fail_msg("no row num_workers_large_source/%s", variant);
        assert_string_equal(r->status, "ok");
        assert_true(r->images_per_second > 0);
        assert_true(r->wrong_epochs == 0);
        if (w == 0 && !(r->ratio > 0)) fail_msg("workers_0: no per_core_ratio_to_raw_decode");
    }
    test_remove_tree(tmp);
    free(tmp);
}

// A bad BENCH_WORKERS_* value (an option's environment alias) is refused at start-up with
// exit status 2, naming the variable, before anything runs; a dataset folder that does not
// exist fails every selected run with an error row that names it (exit status 1).
static void test_bench_workers_bad_environment(void **state)
{
    (void)state;
    char prog[512];
    if (!bench_workers_path(prog, sizeof prog)) skip();
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    const char *cases[][2] = {{"BENCH_WORKERS_MAX=abc", "BENCH_WORKERS_MAX='abc'"},
                              {"BENCH_WORKERS_MAX=-3", "BENCH_WORKERS_MAX='-3'"},
                              {"BENCH_WORKERS_MAX=0", "BENCH_WORKERS_MAX='0'"},
                              {"BENCH_WORKERS_BATCH=0", "BENCH_WORKERS_BATCH='0'"},
                              {"BENCH_WORKERS_DATA=/nonexistent", "'/nonexistent' does not exist"}};
    for (int c = 0; c < 5; c++) {
        char cmd[2048], csv[128], log[128];
        snprintf(csv, sizeof csv, "%s/bad%d.csv", tmp, c);
        snprintf(log, sizeof log, "%s/log.txt", tmp);
        snprintf(cmd, sizeof cmd,
                 "BENCH_CACHE_DIR=%s/cache BENCH_WORKERS_PRESET=tiny %s %s "
                 "--benchmark_min_time=0.01 --harness_csv=%s "
                 "--benchmark_filter='^num_workers/workers_0/|decode_ref' >%s 2>&1",
                 tmp, cases[c][0], prog, csv, log);
        int rc = system(cmd);
        bool at_start = c < 4;
        if (!WIFEXITED(rc) || WEXITSTATUS(rc) != (at_start ? 2 : 1))
            fail_msg("%s: exit %d, want %d", cases[c][0], rc, at_start ? 2 : 1);
        if (at_start) {
            char *text = test_read_file(log, NULL);
            assert_non_null(text);
            if (!strstr(text, cases[c][1])) fail_msg("%s: message lacks it: %s", cases[c][0], text);
            free(text);
            assert_int_equal(access(csv, F_OK), -1);  // nothing ran, nothing written
            continue;
        }
        static Row rows[16];
        int n = read_rows(csv, rows, 16);
        if (n != 2) fail_msg("%s: %d rows in %s, want 2", cases[c][0], n, csv);
        for (int i = 0; i < n; i++) {
            assert_string_equal(rows[i].status, "error");
            if (!strstr(rows[i].reason, cases[c][1]))
                fail_msg("%s: reason '%s' lacks '%s'", cases[c][0], rows[i].reason, cases[c][1]);
        }
    }
    test_remove_tree(tmp);
    free(tmp);
}

// Stopped mid-run the way run-suite.sh stops a program at BENCH_TIMEOUT (SIGINT), the
// tidy CSV still holds the rows measured before: the fast raw-decode row is written while
// a CPU ResNet-18 training epoch (tens of seconds at 224x224) is still running.
static void test_bench_workers_keeps_rows_when_stopped(void **state)
{
    (void)state;
    char prog[512];
    if (!bench_workers_path(prog, sizeof prog)) skip();
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char cmd[2048], csv[128];
    snprintf(csv, sizeof csv, "%s/stopped.csv", tmp);
    snprintf(cmd, sizeof cmd,
             "BENCH_CACHE_DIR=%s/cache BENCH_WORKERS_PRESET=tiny BENCH_WORKERS_BATCH=8 "
             "BENCH_WORKERS_MODEL=resnet18 BENCH_WORKERS_TRAIN_SIZE=224 "
             "timeout --signal=INT --kill-after=10 4 %s --benchmark_min_time=0.01 "
             "--harness_csv=%s --benchmark_filter='decode_ref|^num_workers_train/workers_0/' "
             ">%s/log.txt 2>&1", tmp, prog, csv, tmp);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc));
    // With a GPU the training epoch is fast and the run may finish before the stop.
    if (WEXITSTATUS(rc) == 0) fprintf(stderr, "bench_workers finished before the stop (GPU?)\n");
    else assert_int_equal(WEXITSTATUS(rc), 124);
    static Row rows[16];
    int n = read_rows(csv, rows, 16);
    if (n < 1) fail_msg("no rows in %s after the stop", csv);
    const Row *r = find(rows, n, "num_workers_decode_ref", "raw_turbojpeg_1core");
    assert_non_null(r);
    assert_string_equal(r->status, "ok");
    assert_true(r->images_per_second > 0);
    test_remove_tree(tmp);
    free(tmp);
}

// The loader options every program on the practice driver has: a bad value is refused
// at start-up (exit status 2) naming the flag; --max-image-pixels reaches the loaders of
// the loader-alone rows (0 and 1 workers) and of the practice driver's training rows,
// which fail naming the limit.
static void test_bench_workers_loader_options(void **state)
{
    (void)state;
    char prog[512];
    if (!bench_workers_path(prog, sizeof prog)) skip();
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char cmd[2048], csv[128], log[128];
    snprintf(log, sizeof log, "%s/log.txt", tmp);
    const char *bad[][2] = {{"--loader-timeout=-1", "--loader-timeout='-1'"},
                            {"--loader-timeout=2m", "--loader-timeout='2m'"},
                            {"--max-image-pixels=abc", "--max-image-pixels='abc'"}};
    for (int c = 0; c < 3; c++) {
        snprintf(cmd, sizeof cmd, "%s %s --benchmark_filter=decode_ref >%s 2>&1", prog, bad[c][0], log);
        int rc = system(cmd);
        if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 2) fail_msg("%s: exit %d, want 2", bad[c][0], rc);
        char *text = test_read_file(log, NULL);
        assert_non_null(text);
        if (!strstr(text, bad[c][1])) fail_msg("%s: message lacks it: %s", bad[c][0], text);
        free(text);
    }
    snprintf(csv, sizeof csv, "%s/pixels.csv", tmp);
    snprintf(cmd, sizeof cmd,
             "BENCH_CACHE_DIR=%s/cache BENCH_WORKERS_PRESET=tiny BENCH_WORKERS_BATCH=8 "
             "BENCH_WORKERS_SIZE=32 BENCH_WORKERS_TRAIN_SIZE=16 %s --max-image-pixels=100 "
             "--loader-timeout=60 --benchmark_min_time=0.01 --harness_csv=%s "
             "--benchmark_filter='^num_workers/workers_[01]/|^num_workers_train/workers_1/' >%s 2>&1",
             tmp, prog, csv, log);
    int rc = system(cmd);
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 1) fail_msg("--max-image-pixels=100: exit %d, want 1", rc);
    static Row rows[16];
    int n = read_rows(csv, rows, 16);
    if (n != 3) fail_msg("%d rows in %s, want 3", n, csv);
    for (int i = 0; i < n; i++) {
        assert_string_equal(rows[i].status, "error");
        if (!strstr(rows[i].reason, "pixel limit of 100"))
            fail_msg("%s/%s: reason '%s' does not name the limit", rows[i].practice, rows[i].variant,
                     rows[i].reason);
    }
    test_remove_tree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_workers_end_to_end),
        cmocka_unit_test(test_bench_workers_large_source),
        cmocka_unit_test(test_bench_workers_bad_environment),
        cmocka_unit_test(test_bench_workers_keeps_rows_when_stopped),
        cmocka_unit_test(test_bench_workers_loader_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
