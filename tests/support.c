// support.c: helpers shared by the tests (see support.h); built into build/libtests.a.
#include "tests/support.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "kernels/error.h"
#include "kernels/gpu_device.h"
#include "kernels/synth.h"

// The variables through which a caller steers the suite's scripts (run-tests.sh, run-suite.sh,
// device-check.sh, charts.sh) and the bench programs' BENCH_* options. A test program starts
// without them, so that each test runs what it starts with what it sets itself: the GPU
// check runs the tests with TESTS_STATUS and TESTS_SKIP set for its own run-tests.sh, and a
// test that ran run-tests.sh itself wrote its "failing" lines into the check's account.
// What the GPU check or CI says of the machine stays (SUITE_GPU_CHECK, SUITE_EXPECT_GPU,
// SUITE_REQUIRE_TORCH: a test that depends on one sets it), as do SUITE_ROOT, SUITE_BUILD,
// the sanitizers' options and BENCH_CACHE_DIR (where generated datasets are kept).
static const char *const caller_variables[] = {"TESTS_STATUS", "TESTS_SKIP", "TEST_JOBS", "TEST_TIMEOUT",
                                               "RESULTS_DIR", "RESULTS_ROOT", "OUT", "BUILD", "TWIN_CONFIGS",
                                               "TWIN_PRACTICES", "CHARTS_OUT", "CHART_FORMATS",
                                               "CHARTS_DESCRIPTIONS", "CLAIMS_CSV"};
static const char *const caller_prefixes[] = {"BENCH_", "DEVICE_CHECK_"};

static bool is_caller_variable(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof caller_variables / sizeof caller_variables[0]; i++)
        if (strlen(caller_variables[i]) == len && strncmp(name, caller_variables[i], len) == 0) return true;
    if (len == strlen("BENCH_CACHE_DIR") && strncmp(name, "BENCH_CACHE_DIR", len) == 0) return false;
    for (size_t i = 0; i < sizeof caller_prefixes / sizeof caller_prefixes[0]; i++)
        if (strncmp(name, caller_prefixes[i], strlen(caller_prefixes[i])) == 0) return true;
    return false;
}

// Runs before main in every test program (support.h): clears the caller's variables above and
// takes SUITE_TEST_FILTER, which it also clears so that the programs a test runs do not see it.
__attribute__((constructor)) static void test_environment_of_its_own(void)
{
    extern char **environ;
    const char *filter = getenv("SUITE_TEST_FILTER");
    if (filter && *filter) {
        char *pattern = strdup(filter);  // cmocka keeps the pointer
        if (pattern) cmocka_set_test_filter(pattern);
    }
    unsetenv("SUITE_TEST_FILTER");
    char *names[256];
    int n = 0;
    for (char **e = environ; *e && n < 256; e++) {
        size_t len = strcspn(*e, "=");
        if (is_caller_variable(*e, len)) names[n++] = strndup(*e, len);
    }
    for (int i = 0; i < n; i++) {  // after the walk: unsetenv moves environ's entries
        if (names[i]) unsetenv(names[i]);
        free(names[i]);
    }
}

bool test_gpu_missing(void)
{
    char why[256];
    if (gpu_device_available(why, sizeof why)) return false;
    // The GPU check sets SUITE_EXPECT_GPU=1: there a missing device (a driver that does
    // not match the runtime) fails the test instead of passing it with no GPU coverage.
    if (error_expect_gpu()) fail_msg("SUITE_EXPECT_GPU=1 but %s", why);
    printf("skipped: %s\n", why);
    return true;
}

bool test_gpu_present(void)
{
    char why[256];
    if (gpu_device_available(why, sizeof why)) return true;
    if (error_expect_gpu()) fail_msg("SUITE_EXPECT_GPU=1 but %s", why);
    return false;
}

const char *test_suite_root(void)
{
    const char *r = getenv("SUITE_ROOT");
    if (r && *r) return r;
    // Run by hand from the repository root: an absolute path, so that tests which cd
    // elsewhere still find the scripts.
    static char cwd[4096];
    if (!cwd[0] && !realpath(".", cwd)) snprintf(cwd, sizeof cwd, ".");
    return cwd;
}

const char *test_build_dir(void)
{
    const char *b = getenv("SUITE_BUILD");
    return b && *b ? b : "build";
}

char *test_temp_dir(void)
{
    char *path = strdup("/tmp/suite-test-XXXXXX");
    if (!path || !mkdtemp(path)) {
        free(path);
        return NULL;
    }
    return path;
}

void test_remove_tree(const char *path)
{
    if (path && strncmp(path, "/tmp/", 5) == 0) test_run("rm -rf '%s'", path);
}

char *test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (size) *size = (size_t)n;
    return buf;
}

char *test_read_in(const char *folder, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    return test_read_file(path, NULL);
}

int test_run(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int status = system(cmd);
    if (status == -1 || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

void test_path_without(const char *dir, const char *names)
{
    if (test_run("mkdir -p '%s' && IFS=: && for d in $PATH; do for f in \"$d\"/*; do n=${f##*/}; "
                 "case ' %s ' in *\" $n \"*) continue;; esac; "
                 "[ -x \"$f\" ] && [ ! -e '%s/'\"$n\" ] && ln -s \"$f\" '%s/'\"$n\"; done; done; true",
                 dir, names, dir, dir) != 0)
        fail_msg("cannot make a PATH without %s in %s", names, dir);
}

bool test_file_at_least(const char *path, size_t min_size)
{
    struct stat st;
    return stat(path, &st) == 0 && (size_t)st.st_size >= min_size;
}

int test_csv_column(const char *header, const char *name)
{
    size_t len = strlen(name);
    int index = 0;
    for (const char *p = header; *p; index++) {
        const char *end = p + strcspn(p, ",\n");
        if ((size_t)(end - p) == len && strncmp(p, name, len) == 0) return index;
        if (*end != ',') break;
        p = end + 1;
    }
    return -1;
}

double test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void test_write_script(const char *dir, const char *name, const char *body)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) fail_msg("cannot write %s", path);
    fprintf(f, "#!/usr/bin/env bash\n%s\n", body);
    if (fclose(f) != 0) fail_msg("cannot write %s", path);
    assert_int_equal(test_run("chmod +x '%s'", path), 0);
}

bool test_csv_field(const char *line, int index, char *out, size_t out_size)
{
    const char *p = line;
    for (int i = 0; i < index; i++) {
        p = strchr(p, ',');
        if (!p) return false;
        p++;
    }
    size_t n = strcspn(p, ",\n");
    if (n >= out_size) n = out_size - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

void test_csv_named_field(const char *csv, const char *line, const char *name, char *out,
                          size_t out_size)
{
    int col = test_csv_column(csv, name);
    if (col < 0) fail_msg("no column %s", name);
    if (!test_csv_field(line, col, out, out_size)) fail_msg("no field %s in %s", name, line);
}

bool test_write_file(const char *folder, const char *name, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    FILE *f = fopen(path, "w");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

int test_count_lines(const char *text)
{
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    return lines;
}

char *test_bench_list(const char *program)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/%s' --benchmark_list_tests 2>/dev/null", test_build_dir(), program);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t size = 0, cap = 4096;
    char *text = malloc(cap);
    size_t n;
    while (text && (n = fread(text + size, 1, cap - size - 1, p)) > 0) {
        size += n;
        if (cap - size - 1 == 0) {
            char *bigger = realloc(text, cap *= 2);
            if (!bigger) free(text);
            text = bigger;
        }
    }
    int status = pclose(p);
    if (!text || status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("%s --benchmark_list_tests: exit status %d\n", program,
               status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        free(text);
        return NULL;
    }
    text[size] = '\0';
    return text;
}

// NULL, with the output printed, when the program reported a column the tidy-CSV schema
// (bench/driver/tidy_columns.def) does not have: every CSV a test reads checks the schema.
static char *schema_checked(char *csv, const char *tmp, const char *program, const char *args)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/out.txt", tmp);
    char *out = test_read_file(path, NULL);
    if (csv && out && strstr(out, "not in the tidy-CSV schema")) {
        printf("%s %s: a column outside the tidy-CSV schema, output:\n%s\n", program, args, out);
        free(csv);
        csv = NULL;
    }
    free(out);
    return csv;
}

char *test_bench_csv(const char *program, const char *args)
{
    char *tmp = test_temp_dir();
    if (!tmp) return NULL;
    int rc = test_run("'%s/%s' %s --harness_csv='%s/out.csv' >'%s/out.txt' 2>&1", test_build_dir(), program, args,
                      tmp, tmp);
    char path[4096];
    snprintf(path, sizeof path, "%s/out.csv", tmp);
    char *csv = rc == 0 ? test_read_file(path, NULL) : NULL;
    if (!csv) {
        snprintf(path, sizeof path, "%s/out.txt", tmp);
        char *out = test_read_file(path, NULL);
        printf("%s %s: exit status %d%s, output:\n%s\n", program, args, rc, rc == 0 ? " but no CSV" : "",
               out ? out : "");
        free(out);
    }
    csv = schema_checked(csv, tmp, program, args);
    test_remove_tree(tmp);
    free(tmp);
    return csv;
}

int test_rows_ok_or_skipped(const char *csv, bool gpu, char *why, size_t why_size)
{
    int status = test_csv_column(csv, "status"), reason = test_csv_column(csv, "reason"), rows = 0;
    for (const char *row = strchr(csv, '\n'); row && row[1]; row = strchr(row + 1, '\n'), rows++) {
        char st[32], r[256];
        if (!test_csv_field(row + 1, status, st, sizeof st) || !test_csv_field(row + 1, reason, r, sizeof r)) {
            snprintf(why, why_size, "row %d has no status or reason", rows + 1);
            return -1;
        }
        bool good = gpu ? strcmp(st, "ok") == 0 : strcmp(st, "skipped") == 0 && strncmp(r, "no CUDA device", 14) == 0;
        if (!good) {
            snprintf(why, why_size, "row %d is %s: %s", rows + 1, st, r);
            return -1;
        }
    }
    return rows;
}

char *test_dir;

int test_setup_dir(void **state)
{
    (void)state;
    test_dir = test_temp_dir();
    return test_dir ? 0 : -1;
}

int test_teardown_dir(void **state)
{
    (void)state;
    test_remove_tree(test_dir);
    free(test_dir);
    test_dir = NULL;
    return 0;
}

void test_bad_options_refused(const char *program, const char *const *bad, size_t n,
                              const char *args)
{
    char *tmp = test_temp_dir();
    if (!tmp) {
        fail_msg("no temporary folder");
        return;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/err.txt", tmp);
    for (size_t i = 0; i < n; i++) {
        int rc = test_run("'%s/%s' '%s' %s >/dev/null 2>'%s'", test_build_dir(), program, bad[i],
                          args, path);
        if (rc != 2) fail_msg("%s: exit status %d, want 2", bad[i], rc);
        char *err = test_read_file(path, NULL);
        assert_non_null(err);
        const char *name = strncmp(bad[i], "--", 2) == 0 ? bad[i] + 2 : bad[i];
        char flag[64];
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(name, "="), name);
        if (!strstr(err, flag)) fail_msg("%s: the message does not name it: %s", bad[i], err);
        free(err);
    }
    test_remove_tree(tmp);
    free(tmp);
}

bool test_csv_row_value(const char *csv, const char *practice_variant, const char *params,
                        const char *name, char *out, size_t size)
{
    int col = test_csv_column(csv, name), pcol = test_csv_column(csv, "params");
    if (col < 0 || pcol < 0) return false;
    size_t pv = strlen(practice_variant);
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char field[256];
        if (strncmp(line + 1, practice_variant, pv) != 0 || line[1 + pv] != ',') continue;
        if (!test_csv_field(line + 1, pcol, field, sizeof field) || strcmp(field, params) != 0) continue;
        return test_csv_field(line + 1, col, out, size);
    }
    return false;
}

int test_selftest_fails(const char *program, const char *args, const char *mode, const char *practice,
                        const char *baseline, const char *const *tuned, int n_tuned, const char *reason)
{
    if (n_tuned < 1) fail_msg("test_selftest_fails: no tuned variant to check");
    char all[1024];
    snprintf(all, sizeof all, "%s --practice_selftest=%s", args, mode);
    int status = -1;
    char *csv = test_bench_csv_exit(program, all, &status);
    if (!csv) fail_msg("%s %s: no CSV", program, all);
    printf("%s --practice_selftest=%s: exit status %d\n", program, mode, status);
    if (status != 1) fail_msg("%s --practice_selftest=%s: exit status %d, want 1", program, mode, status);
    int baselines = 0, failed = 0;
    for (int i = 0; i < n_tuned; i++) {
        int rows = 0;
        for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
            char p[128], v[128], status_text[32], why[1024];
            test_csv_named_field(csv, line + 1, "practice", p, sizeof p);
            test_csv_named_field(csv, line + 1, "variant", v, sizeof v);
            if (strcmp(p, practice) != 0) continue;
            test_csv_named_field(csv, line + 1, "status", status_text, sizeof status_text);
            if (i == 0 && strcmp(v, baseline) == 0) {
                if (strcmp(status_text, "ok") != 0) fail_msg("%s,%s: status %s, want ok", p, v, status_text);
                baselines++;
            }
            if (strcmp(v, tuned[i]) != 0) continue;
            test_csv_named_field(csv, line + 1, "reason", why, sizeof why);
            if (rows++ == 0) printf("  %s: %s\n", v, why);
            if (strcmp(status_text, "error") != 0)
                fail_msg("%s,%s: status %s, want error", p, v, status_text);
            if (!strstr(why, reason)) fail_msg("%s,%s: reason '%s' does not contain '%s'", p, v, why, reason);
        }
        if (rows == 0) fail_msg("no row of %s,%s", practice, tuned[i]);
        failed += rows;
    }
    if (baselines == 0) fail_msg("no row of %s,%s", practice, baseline);
    free(csv);
    return failed;
}

double test_csv_number(const char *csv, const char *line, const char *name)
{
    char text[64];
    test_csv_named_field(csv, line, name, text, sizeof text);
    return atof(text);
}

void test_keep_mpi_leaks_nameable(void)
{
    setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);
    const char *asan = getenv("ASAN_OPTIONS");
    char *more = NULL;
    if (asan && asprintf(&more, "%s:fast_unwind_on_malloc=0", asan) > 0) setenv("ASAN_OPTIONS", more, 1);
    free(more);
}

float *test_random_floats(Rng *r, size_t n, float scale)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = scale * rng_normal_float(r);
    return p;
}

float *test_copy_floats(const float *src, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

double test_rel_l2(const float *got, const float *want, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

Core *test_core_create(const CoreConfig *cfg)
{
    Core *core = NULL;
    if (core_create(cfg, &core) != 0) fail_msg("core_create: %s", error_message());
    return core;
}

int test_conv_algos(Core *core, bool backward, CoreConvAlgoInfo *info, int max)
{
    int n = core_conv_algos(core, info, max);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
        const char *bwd[] = {info[i].bwd_data, info[i].bwd_filter};
        assert_string_not_equal(info[i].fwd, "?");
        for (int k = 0; k < 2; k++) {
            if (!backward) {
                assert_string_equal(bwd[k], "none");
            } else {
                assert_string_not_equal(bwd[k], "none");
                assert_string_not_equal(bwd[k], "?");
            }
        }
    }
    return n;
}

void test_batch_open(TestBatch *b, const CoreConfig *cfg, int n, uint64_t index)
{
    const CoreModelConfig *m = &cfg->model;
    b->task = (SynthTask){m->in_channels, m->image_size, m->num_classes, 0.5f, 1};
    b->images = malloc((size_t)n * m->in_channels * m->image_size * m->image_size * sizeof(float));
    b->labels = malloc((size_t)n * sizeof(int32_t));
    assert_true(b->images && b->labels);
    b->b = (CoreBatch){.images = b->images, .labels = b->labels, .n = n, .memory = CORE_MEMORY_HOST};
    synth_batch(&b->task, index, n, b->images, b->labels);
}

void test_batch_close(TestBatch *b)
{
    free(b->images);
    free(b->labels);
}

TestRun test_run_model(const CoreConfig *cfg, int steps)
{
    Core *core = test_core_create(cfg);
    const CoreModelConfig *m = &cfg->model;
    int n = cfg->batch_size;
    size_t img = (size_t)m->in_channels * m->image_size * m->image_size;
    float *images = malloc((size_t)n * img * sizeof *images);
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    TestRun run = {.np = core_param_count(core)};
    run.grad = malloc(run.np * sizeof(float));
    run.params = malloc(run.np * sizeof(float));
    assert_true(images && labels && run.grad && run.params);
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, 0.5f, 1};
    CoreBatch b = {.images = images, .labels = labels, .n = n, .memory = CORE_MEMORY_HOST};
    synth_batch(&task, 0, n, images, labels);
    assert_int_equal(core_loss_grad(core, &b, &run.loss, run.grad), 0);
    for (int s = 0; s < steps; s++) {
        synth_batch(&task, (uint64_t)s, n, images, labels);
        assert_int_equal(core_step(core, &b, NULL), 0);
    }
    CoreEvalResult ev;
    assert_int_equal(core_eval(core, &b, &ev), 0);
    run.eval_loss = ev.loss;
    assert_int_equal(core_params_get(core, run.params, run.np), 0);
    assert_int_equal(core_stats(core, &run.stats), 0);
    core_free(core);
    free(images);
    free(labels);
    return run;
}

void test_run_free(TestRun *r)
{
    free(r->grad);
    free(r->params);
    *r = (TestRun){0};
}

char *test_bench_csv_exit(const char *program, const char *args, int *exit_status)
{
    char *tmp = test_temp_dir();
    if (!tmp) return NULL;
    *exit_status = test_run("'%s/%s' %s --harness_csv='%s/out.csv' >'%s/out.txt' 2>&1", test_build_dir(),
                            program, args, tmp, tmp);
    char path[4096];
    snprintf(path, sizeof path, "%s/out.csv", tmp);
    char *csv = test_read_file(path, NULL);
    if (!csv) {
        snprintf(path, sizeof path, "%s/out.txt", tmp);
        char *out = test_read_file(path, NULL);
        printf("%s %s: exit status %d and no CSV, output:\n%s\n", program, args, *exit_status, out ? out : "");
        free(out);
    }
    csv = schema_checked(csv, tmp, program, args);
    test_remove_tree(tmp);
    free(tmp);
    return csv;
}
