// test_loader_bench.c: end to end, build/bench_workers on a tiny generated dataset in a
// temporary cache: the loader, raw-decode and loader+training rows come out "ok" with
// images/s > 0 and every epoch complete in the tidy CSV, and scripts/charts/workers.gp
// draws both charts from it (PNG and SVG). Skipped when the program is not built.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/loader_support.h"

typedef struct {
    char variant[64], practice[64], status[16];
    double images_per_second, wrong_epochs;
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
    int ip = -1, iv = -1, is = -1, iips = -1, iwe = -1;
    for (int i = 0; i < nh; i++) {
        if (!strcmp(hc[i], "practice")) ip = i;
        if (!strcmp(hc[i], "variant")) iv = i;
        if (!strcmp(hc[i], "status")) is = i;
        if (!strcmp(hc[i], "images_per_second")) iips = i;
        if (!strcmp(hc[i], "wrong_epochs")) iwe = i;
    }
    while (n < max && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        int nl = split(line, lc, 256);
        if (ip < 0 || iv < 0 || is < 0 || iips < 0 || nl < nh) continue;
        Row *r = &rows[n++];
        snprintf(r->practice, sizeof r->practice, "%s", lc[ip]);
        snprintf(r->variant, sizeof r->variant, "%s", lc[iv]);
        snprintf(r->status, sizeof r->status, "%s", lc[is]);
        r->images_per_second = atof(lc[iips]);
        r->wrong_epochs = iwe >= 0 ? atof(lc[iwe]) : 0;
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

static void test_bench_workers_end_to_end(void **state)
{
    (void)state;
    const char *build = getenv("SUITE_BUILD") ? getenv("SUITE_BUILD") : "build";
    const char *root = getenv("SUITE_ROOT") ? getenv("SUITE_ROOT") : ".";
    char prog[512];
    snprintf(prog, sizeof prog, "%s/bench_workers", build);
    if (access(prog, X_OK) != 0) {
        fprintf(stderr, "skipping: %s is not built\n", prog);
        skip();
    }
    char tmp[64];
    assert_int_equal(testutil_tmpdir(tmp), 0);
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
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
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
    testutil_rm_tree(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_workers_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
