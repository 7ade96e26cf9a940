// test_harness.c: the C harness over Google Benchmark: registration, sweep axes (and
// --harness_axis replacing their values), program options (flag, environment alias,
// default), the skip and failure paths, the reference role, roles and timing in the
// label, curve points, the tidy CSV's columns, rows and context, and the JSON context.
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "bench/driver/context.h"
#include "bench/driver/harness.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"
#include "tests/support.h"

static char *tmp_dir;
static char *csv_text, *json_text;
static int main_status;

// A CPU benchmark: sums `n` integers per iteration.
static void bench_sum(HarnessState *st, void *user)
{
    (void)user;
    int64_t n = harness_axis_int(st, "n");
    volatile int64_t sink = 0;
    while (harness_keep_running(st))
        for (int64_t i = 0; i < n; i++) sink += i;
    harness_set_items_processed(st, harness_max_iterations(st) * n);
    harness_counter(st, "answer", 42.0, HARNESS_COUNTER_PLAIN);
}

static void bench_skipper(HarnessState *st, void *user)
{
    (void)user;
    harness_skip(st, "no CUDA device");
}

static void bench_quitter(HarnessState *st, void *user)
{
    (void)st;
    (void)user; // returns without running its loop: the harness must report it, not abort
}

// Asks for an axis it never declared: the run must fail, not abort the process.
static void bench_bad_param(HarnessState *st, void *user)
{
    (void)user;
    int64_t v = harness_axis_int(st, "nope");
    while (harness_keep_running(st)) v++;
}

// A yardstick with a string axis and a curve: role reference, never in a speedup.
static void bench_reference(HarnessState *st, void *user)
{
    (void)user;
    const char *kind = harness_axis_str(st, "kind");
    while (harness_keep_running(st)) {}
    for (int s = 1; s <= 3; s++) harness_curve_point(st, "accuracy", s, 10 * s, 0.5 * s, 0.25 * s);
    harness_counter(st, "level", (double)harness_option_int_value("level"), HARNESS_COUNTER_PLAIN);
    harness_set_label(st, kind);
}

static int run_harness(void **state)
{
    (void)state;
    tmp_dir = test_temp_dir();
    if (!tmp_dir) return -1;
    // Declared with one value of n; the command line below asks for two.
    harness_register(&(HarnessSpec){
        .practice = "unit", .variant = "slow", .role = HARNESS_BASELINE,
        .timing = HARNESS_TIMING_WALL, .fn = bench_sum, .axes = {{"n", "500"}}});
    harness_register(&(HarnessSpec){
        .practice = "unit", .variant = "fast", .role = HARNESS_TUNED,
        .timing = HARNESS_TIMING_WALL, .fn = bench_sum, .axes = {{"n", "500"}}});
    // its sweep from a shared list (harness_register_axes), as programs register families
    static const HarnessAxis kinds[] = {{"kind", "a,b", true}, {NULL, NULL, false}};
    assert_non_null(harness_register_axes(&(HarnessSpec){.practice = "unit_ref", .variant = "yardstick",
                                                         .role = HARNESS_REFERENCE, .timing = HARNESS_TIMING_WALL,
                                                         .fn = bench_reference, .iterations = 2},
                                          kinds));
    harness_register(&(HarnessSpec){.practice = "unit", .variant = "gpu_only", .role = HARNESS_TUNED,
                                     .timing = HARNESS_TIMING_CUDA_EVENTS, .fn = bench_skipper});
    harness_register(&(HarnessSpec){.practice = "unit", .variant = "broken", .role = HARNESS_TUNED,
                                     .timing = HARNESS_TIMING_WALL, .fn = bench_quitter});
    harness_register(&(HarnessSpec){.practice = "unit", .variant = "bad_param", .role = HARNESS_TUNED,
                                     .timing = HARNESS_TIMING_WALL, .fn = bench_bad_param});
    harness_add_context("test_key", "test, value");

    char csv[512], out[512], csvflag[600], outflag[600];
    snprintf(csv, sizeof csv, "%s/unit.csv", tmp_dir);
    snprintf(out, sizeof out, "%s/unit.json", tmp_dir);
    snprintf(csvflag, sizeof csvflag, "--harness_csv=%s", csv);
    snprintf(outflag, sizeof outflag, "--benchmark_out=%s", out);
    char *argv[] = {"test_harness", csvflag, outflag, "--benchmark_out_format=json",
                    "--benchmark_min_time=0.01", "--benchmark_repetitions=3",
                    "--harness_axis=n=1000:4000:*4", "--level=7", NULL};
    harness_option_int("level", 3, 0, 9, "TEST_HARNESS_LEVEL", "a test option");
    harness_option_str("name", "dflt", "TEST_HARNESS_NAME", "another");
    setenv("TEST_HARNESS_NAME", "from-env", 1);
    setenv("TEST_HARNESS_LEVEL", "5", 1);  // the flag wins over the environment
    main_status = harness_init(8, argv);
    if (main_status < 0) main_status = harness_run();
    csv_text = test_read_file(csv, NULL);
    json_text = test_read_file(out, NULL);
    return csv_text && json_text ? 0 : -1;
}

static int cleanup(void **state)
{
    (void)state;
    free(csv_text);
    free(json_text);
    test_remove_tree(tmp_dir);
    free(tmp_dir);
    return 0;
}

// The CSV row of variant/params, or NULL.
static const char *find_row(const char *variant, const char *params, char *line, size_t size)
{
    const char *p = strchr(csv_text, '\n');
    int vcol = test_csv_column(csv_text, "variant"), pcol = test_csv_column(csv_text, "params");
    char v[64], prm[64];
    while (p && *++p) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n >= size) n = size - 1;
        memcpy(line, p, n);
        line[n] = '\0';
        if (test_csv_field(line, vcol, v, sizeof v) && test_csv_field(line, pcol, prm, sizeof prm) &&
            strcmp(v, variant) == 0 && strcmp(prm, params) == 0)
            return line;
        p = end;
    }
    return NULL;
}

static void field_of(const char *line, const char *column, char *out, size_t size)
{
    int c = test_csv_column(csv_text, column);
    assert_true(c >= 0);
    assert_true(test_csv_field(line, c, out, size));
}

static void test_bad_spec_is_refused(void **state)
{
    (void)state;
    assert_null(harness_register(NULL));
    assert_null(harness_register(&(HarnessSpec){.practice = "x", .variant = "y"})); // no fn
    HarnessAxis many[HARNESS_MAX_AXES + 2] = {{NULL, NULL, false}};
    for (int i = 0; i <= HARNESS_MAX_AXES; i++) many[i] = (HarnessAxis){"a", "1", false};
    assert_null(harness_register_axes(&(HarnessSpec){.practice = "x", .variant = "y", .fn = bench_sum}, many));
    assert_null(harness_register_axes(NULL, many));
}

static void test_exit_status_reports_the_broken_benchmark(void **state)
{
    (void)state;
    assert_int_equal(main_status, 1);
}

static void test_csv_has_fixed_param_counter_and_context_columns(void **state)
{
    (void)state;
    const char *cols[] = {"practice", "variant", "role", "timing", "params", "status", "reason",
                          "repetitions", "iterations", "time", "cpu_time", "time_unit",
                          "time_median", "time_stddev", "time_min", "time_max", "param_n",
                          "answer", "items_per_second", "ctx_gpu_name",
                          "ctx_gpu_compute_capability", "ctx_gpu_sm_count", "ctx_gpu_memory_mib",
                          "ctx_gpu_sm_clock_mhz", "ctx_driver_version", "ctx_cuda_runtime",
                          "ctx_cublas_version", "ctx_cudnn_version", "ctx_nccl_version",
                          "ctx_host", "ctx_host_cpu", "ctx_run_date", "ctx_test_key"};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        if (test_csv_column(csv_text, cols[i]) < 0) fail_msg("tidy CSV lacks column %s", cols[i]);
    }
    // the fixed schema (tidy_columns.def) first, whatever this program reports: its axis,
    // counter and context key outside the schema come after the schema's last column
    int last = test_csv_column(csv_text, "ctx_tidy_schema");
    assert_true(last > 0);
    assert_true(test_csv_column(csv_text, "param_batch") < test_csv_column(csv_text, "items_per_second"));
    assert_true(test_csv_column(csv_text, "items_per_second") < test_csv_column(csv_text, "ctx_gpu_name"));
    assert_true(test_csv_column(csv_text, "param_n") > last);
    assert_true(test_csv_column(csv_text, "answer") > last);
    assert_true(test_csv_column(csv_text, "ctx_test_key") > last);
    assert_int_equal(test_csv_column(csv_text, "param_n") + 1, test_csv_column(csv_text, "answer"));
    char line[4096];
    assert_non_null(find_row("slow", "n:4000", line, sizeof line));
    char f[64];
    field_of(line, "ctx_tidy_schema", f, sizeof f);
    assert_string_equal(f, "2");  // TIDY_SCHEMA_VERSION
}

static void test_one_row_per_instance_with_role_and_aggregates(void **state)
{
    (void)state;
    // header, 2 variants x 2 values of n, 2 kinds of the reference, skipper, quitter, bad_param
    assert_int_equal(test_count_lines(csv_text), 1 + 4 + 2 + 3);
    char line[4096], f[128];
    assert_non_null(find_row("slow", "n:4000", line, sizeof line));
    field_of(line, "role", f, sizeof f);
    assert_string_equal(f, "baseline");
    field_of(line, "status", f, sizeof f);
    assert_string_equal(f, "ok");
    field_of(line, "param_n", f, sizeof f);
    assert_string_equal(f, "4000");
    field_of(line, "repetitions", f, sizeof f);
    assert_string_equal(f, "3");
    field_of(line, "timing", f, sizeof f);
    assert_string_equal(f, "wall");
    field_of(line, "time", f, sizeof f);
    double time = atof(f);
    assert_true(time > 0.0);
    field_of(line, "time_min", f, sizeof f);
    double tmin = atof(f);
    field_of(line, "time_max", f, sizeof f);
    assert_true(tmin > 0.0 && tmin <= time && time <= atof(f));
    field_of(line, "answer", f, sizeof f);
    assert_string_equal(f, "42");
    field_of(line, "items_per_second", f, sizeof f);
    // items/s = n / time-per-iteration (time in ns here)
    double expected = 4000.0 / (time * 1e-9);
    assert_true(atof(f) > 0.5 * expected && atof(f) < 2.0 * expected);
    assert_non_null(find_row("fast", "n:1000", line, sizeof line));
    field_of(line, "role", f, sizeof f);
    assert_string_equal(f, "tuned");
    field_of(line, "ctx_test_key", f, sizeof f);
    assert_string_equal(f, "test; value"); // commas never split a field
}

static void test_skip_and_failure_rows(void **state)
{
    (void)state;
    char line[4096], f[256];
    assert_non_null(find_row("gpu_only", "", line, sizeof line));
    field_of(line, "status", f, sizeof f);
    assert_string_equal(f, "skipped");
    field_of(line, "reason", f, sizeof f);
    assert_string_equal(f, "no CUDA device");
    field_of(line, "time", f, sizeof f);
    assert_string_equal(f, ""); // never a made-up time
    assert_non_null(find_row("broken", "", line, sizeof line));
    field_of(line, "status", f, sizeof f);
    assert_string_equal(f, "error");
    field_of(line, "reason", f, sizeof f);
    assert_non_null(strstr(f, "returned before finishing its loop"));
    assert_non_null(find_row("bad_param", "", line, sizeof line));
    field_of(line, "status", f, sizeof f);
    assert_string_equal(f, "error");
    field_of(line, "reason", f, sizeof f);
    assert_string_equal(f, "no integer axis 'nope' in this benchmark");
}

static void test_reference_role_string_axis_options_and_curves(void **state)
{
    (void)state;
    char line[4096], f[256];
    assert_non_null(find_row("yardstick", "kind:b", line, sizeof line));
    field_of(line, "role", f, sizeof f);
    assert_string_equal(f, "reference");
    field_of(line, "param_kind", f, sizeof f);
    assert_string_equal(f, "b");
    field_of(line, "iterations", f, sizeof f);
    assert_string_equal(f, "2");  // a fixed count holds whatever --benchmark_min_time says
    field_of(line, "level", f, sizeof f);
    assert_string_equal(f, "7");  // --level=7 over TEST_HARNESS_LEVEL=5 over the default 3
    assert_string_equal(harness_option_str_value("name"), "from-env");
    char path[600];
    snprintf(path, sizeof path, "%s/unit.curves.csv", tmp_dir);
    char *curves = test_read_file(path, NULL);
    assert_non_null(curves);
    // the schema's axes (20, tidy_columns.def), then this program's own
    assert_non_null(strstr(curves, "practice,variant,role,params,param_batch,"));
    assert_non_null(strstr(curves, ",param_sizes,param_optimizer,param_kind,param_n,run,metric,step,images,seconds,value\n"));
    assert_non_null(strstr(curves, "unit_ref,yardstick,reference,kind:a,,,,,,,,,,,,,,,,,,,,,a,,1,accuracy,2,20,1,0.5\n"));
    free(curves);
}

// Bad axis, option and common-flag values end the program at start-up, naming them.
static void test_bad_flags_are_refused(void **state)
{
    (void)state;
    char prog[600];
    snprintf(prog, sizeof prog, "%s/bench_pin_memory", test_build_dir());
    const char *cases[][2] = {{"--harness_axis=bytes", "need NAME=V1,V2"},
                              {"--harness_axis=bytes=1:100:*1", "not a range"},
                              {"--harness_axis=bytes=12x", "'12x' is not an integer"},
                              {"--harness_axis=nosuch=1", "no benchmark of this program has an axis 'nosuch'"},
                              {"--preset=tiny", "--preset does not apply here"},
                              {"--backend=gpu", "need auto, cpu, cpu-ref or cuda"},
                              {"--data=video", "need synthetic or images"},
                              {"--threads=0", "need an integer >= 1"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[700];
        snprintf(out, sizeof out, "%s/bad.txt", tmp_dir);
        int rc = test_run("'%s' %s --benchmark_list_tests >'%s' 2>&1", prog, cases[i][0], out);
        char *text = test_read_file(out, NULL);
        assert_non_null(text);
        if (rc != 2 || !strstr(text, cases[i][1]))
            fail_msg("%s: exit %d, output: %s", cases[i][0], rc, text);
        free(text);
    }
}

static void test_json_keeps_google_benchmark_format_and_context(void **state)
{
    (void)state;
    const char *keys[] = {"\"gpu_name\"", "\"gpu_compute_capability\"", "\"gpu_sm_count\"",
                          "\"gpu_memory_mib\"", "\"gpu_sm_clock_mhz\"", "\"driver_version\"",
                          "\"cuda_runtime\"", "\"cublas_version\"", "\"cudnn_version\"",
                          "\"nccl_version\"", "\"host_cpu\"", "\"test_key\"",
                          "\"unit/slow/n:1000/real_time\"", "\"repetition_index\": 2",
                          "\"label\": \"role=baseline timing=wall\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strstr(json_text, keys[i])) fail_msg("JSON lacks %s", keys[i]);
    // a skipped instance is left out (the tidy CSV has its row and reason); real errors
    // stay, every repetition of them
    assert_null(strstr(json_text, "unit/gpu_only"));
    assert_null(strstr(json_text, "skipped: "));
    // each repetition, not the aggregates derived from them (the tidy CSV has those)
    assert_null(strstr(json_text, "\"aggregate_name\""));
    int broken = 0;
    for (const char *p = strstr(json_text, "\"name\": \"unit/broken/"); p; p = strstr(p + 1, "\"name\": \"unit/broken/"))
        broken++;
    assert_int_equal(broken, 3);
}

static void test_context_library_versions_match_headers(void **state)
{
    (void)state;
    SuiteContext c;
    context_collect(&c);
    char want[32];
    snprintf(want, sizeof want, "%d.", CUDNN_MAJOR);
    assert_true(strncmp(context_get(&c, "cudnn_version"), want, strlen(want)) == 0);
    snprintf(want, sizeof want, "%d.", NCCL_MAJOR);
    assert_true(strncmp(context_get(&c, "nccl_version"), want, strlen(want)) == 0);
    snprintf(want, sizeof want, "%d.", CUDART_VERSION / 1000);
    assert_true(strncmp(context_get(&c, "cuda_runtime"), want, strlen(want)) == 0);
    bool gpu = gpu_device_available(NULL, 0);
    assert_int_equal(gpu, c.has_gpu);
    assert_int_equal(strcmp(context_get(&c, "gpu_name"), "none") == 0, !gpu);
    char slug[192];
    context_slug(&c, slug, sizeof slug);
    assert_true(gpu ? strncmp(slug, "cpu_", 4) != 0 : strncmp(slug, "cpu_", 4) == 0);
    for (const char *p = slug; *p; p++)
        assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("._-", *p));
}


// ---- child programs: this test run again as a benchmark program (--child=MODE) --------------

// Appends "<variant> <iterations>" to $TEST_HARNESS_LOG: what each finished run did.
static void log_run(const char *variant, int64_t iterations)
{
    FILE *f = fopen(getenv("TEST_HARNESS_LOG"), "a");
    if (!f) return;
    fprintf(f, "%s %lld\n", variant, (long long)iterations);
    fclose(f);
}

static void bench_sleeper(HarnessState *st, void *user)
{
    const char *variant = user;
    while (harness_keep_running(st)) usleep(2000);
    log_run(variant, harness_max_iterations(st));
}

// Its third run signals its own process and then works on, as a program cut at a deadline
// by `timeout --signal=INT`: the harness must keep every repetition finished before. The
// signal: TEST_HARNESS_CUT_SIGNAL's number, default SIGINT.
static void bench_cut_me(HarnessState *st, void *user)
{
    (void)user;
    static int calls;
    if (++calls == 3) {
        const char *sig = getenv("TEST_HARNESS_CUT_SIGNAL");
        kill(getpid(), sig ? atoi(sig) : SIGINT);
        sleep(20);  // never reached its end: the harness exits
    }
    while (harness_keep_running(st)) usleep(1000);
    log_run("cutter", harness_max_iterations(st));
}

// Fails its first repetition and skips its second: the row is an error.
static void bench_fail_then_skip(HarnessState *st, void *user)
{
    (void)user;
    static int calls;
    if (++calls == 1) harness_fail(st, "first repetition failed");
    else harness_skip(st, "second repetition skipped");
}

// Finishes its run but leaves an out-of-memory error in the store, as a library call that
// failed and was recovered from would.
static void bench_leaves_error(HarnessState *st, void *user)
{
    (void)user;
    error_set(ERROR_OUT_OF_MEMORY, "left over from an earlier run");
    while (harness_keep_running(st)) {}
}

// Must start with an empty error store.
static void bench_inherits(HarnessState *st, void *user)
{
    (void)user;
    if (error_kind() != ERROR_NONE) {
        char msg[2200];
        snprintf(msg, sizeof msg, "the run started with an earlier run's error: %s", error_message());
        harness_fail(st, msg);
        return;
    }
    while (harness_keep_running(st)) {}
}

// Kept between runs (harness_keep): how many runs used it; objects alive now.
static int kept_alive;

static void kept_release(void *obj)
{
    kept_alive--;
    free(obj);
}

// Takes what its previous run kept (a count of the runs that used it), else makes one, and
// keeps it for the next: counters runs_of_kept (1, 2, ... when each run gets the previous
// one's) and kept_alive (objects alive during the run: its own group's, none of an earlier
// group's, which the harness released when that group ended).
static void bench_keeper(HarnessState *st, void *user)
{
    (void)user;
    int *runs = harness_take_kept(st);
    if (!runs) {
        runs = calloc(1, sizeof *runs);
        if (!runs) {
            harness_fail(st, "out of memory");
            return;
        }
        kept_alive++;
    }
    (*runs)++;
    while (harness_keep_running(st)) {}
    harness_counter(st, "runs_of_kept", *runs, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "kept_alive", kept_alive, HARNESS_COUNTER_PLAIN);
    harness_keep(st, runs, kept_release);
}

static int child_main(const char *mode, int argc, char **argv)
{
    if (strcmp(mode, "cut") == 0) {
        harness_register(&(HarnessSpec){.practice = "cut", .variant = "auto", .role = HARNESS_BASELINE,
                                         .timing = HARNESS_TIMING_WALL, .fn = bench_sleeper, .user = "auto",
                                         .min_time = 0.2});
        harness_register(&(HarnessSpec){.practice = "cut", .variant = "fixed", .role = HARNESS_TUNED,
                                         .timing = HARNESS_TIMING_MANUAL, .fn = bench_sleeper, .user = "fixed",
                                         .iterations = 2});
        harness_register(&(HarnessSpec){.practice = "cut", .variant = "cutter", .role = HARNESS_TUNED,
                                         .timing = HARNESS_TIMING_WALL, .fn = bench_cut_me, .iterations = 1});
    } else if (strcmp(mode, "errors") == 0) {
        harness_register(&(HarnessSpec){.practice = "errors", .variant = "fail_then_skip", .role = HARNESS_TUNED,
                                         .timing = HARNESS_TIMING_WALL, .fn = bench_fail_then_skip, .iterations = 1});
        harness_register(&(HarnessSpec){.practice = "errors", .variant = "leaves_error", .role = HARNESS_BASELINE,
                                         .timing = HARNESS_TIMING_WALL, .fn = bench_leaves_error, .iterations = 1});
        harness_register(&(HarnessSpec){.practice = "errors", .variant = "inherits", .role = HARNESS_TUNED,
                                         .timing = HARNESS_TIMING_WALL, .fn = bench_inherits, .iterations = 1});
        harness_register(&(HarnessSpec){.practice = "errors", .variant = "gpu_only", .role = HARNESS_TUNED,
                                         .timing = HARNESS_TIMING_WALL, .fn = bench_skipper, .iterations = 1});
    } else if (strcmp(mode, "keep") == 0) {
        const char *names[][2] = {{"keep_a", "a_base"}, {"keep_a", "a_tuned"}, {"keep_b", "b_base"}, {"keep_b", "b_tuned"}};
        for (int i = 0; i < 4; i++)
            harness_register(&(HarnessSpec){.practice = names[i][0], .variant = names[i][1],
                                             .role = i % 2 ? HARNESS_TUNED : HARNESS_BASELINE,
                                             .timing = HARNESS_TIMING_WALL, .fn = bench_keeper, .iterations = 1});
    } else {
        fprintf(stderr, "test_harness: unknown --child=%s\n", mode);
        return 2;
    }
    return harness_main(argc, argv);
}

// Runs this test as child MODE with args; its CSV is tmp/MODE.csv. Returns the exit status.
static int run_child(const char *dir, const char *mode, const char *env, const char *args)
{
    return test_run("cd '%s' && %s TEST_HARNESS_LOG='%s/%s.log' /proc/%d/exe --child=%s --harness_csv='%s/%s.csv' %s "
                    ">'%s/%s.out' 2>&1",
                    dir, env, dir, mode, (int)getpid(), mode, dir, mode, args, dir, mode);
}

// Column `name` of the tidy row of variant in csv (a whole file), or "" when absent.
static void row_value(const char *csv, const char *variant, const char *name, char *out, size_t size)
{
    out[0] = '\0';
    int vcol = test_csv_column(csv, "variant"), col = test_csv_column(csv, name);
    const char *p = strchr(csv, '\n');
    char line[8192], v[128];
    while (p && *++p) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n >= sizeof line) n = sizeof line - 1;
        memcpy(line, p, n);
        line[n] = '\0';
        if (test_csv_field(line, vcol, v, sizeof v) && strcmp(v, variant) == 0) {
            test_csv_field(line, col, out, size);
            return;
        }
        p = end;
    }
}

// Rows of variant in a reps CSV.
static int reps_rows(const char *reps, const char *variant)
{
    int vcol = test_csv_column(reps, "variant"), n = 0;
    const char *p = strchr(reps, '\n');
    char line[8192], v[128];
    while (p && *++p) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, p, len);
        line[len] = '\0';
        if (test_csv_field(line, vcol, v, sizeof v) && strcmp(v, variant) == 0) n++;
        p = end;
    }
    return n;
}

// A program cut by SIGINT in the middle of its randomly interleaved repetitions keeps every
// repetition it finished (Google Benchmark 1.7.1 reports an instance only after its last
// one), marks the unfinished rows partial, writes FILE.partial and exits with 128 + 2.
static void test_cut_keeps_every_finished_repetition(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_non_null(dir);
    char args[700];
    snprintf(args, sizeof args, "--benchmark_repetitions=4 --benchmark_enable_random_interleaving=true "
             "--benchmark_out='%s/cut.json' --benchmark_out_format=json", dir);
    int rc = run_child(dir, "cut", "", args);
    char *out = test_read_in(dir, "cut.out");
    if (rc != 130) fprintf(stderr, "exit %d; output:\n%s\n", rc, out ? out : "(none)");
    assert_int_equal(rc, 130);
    char *csv = test_read_in(dir, "cut.csv"), *reps = test_read_in(dir, "cut.reps.csv");
    char *partial = test_read_in(dir, "cut.partial"), *log = test_read_in(dir, "cut.log");
    assert_non_null(csv);
    assert_non_null(reps);
    assert_non_null(partial);
    assert_non_null(log);
    // What finished, from the runs' own log: every run of the fixed-count instances is a
    // repetition; an auto-count run is one unless the next run is the same instance's
    // longer one (Google Benchmark's trial before it settles its count, in each round;
    // the cutter's call that signals commits the run before it: harness_state.cc).
    int fixed = 0, cutter = 0, auto_final = 0, lines = 0;
    char names[256][32];
    long long iters[256];
    for (const char *p = log; p && *p && lines < 256;) {
        if (sscanf(p, "%31s %lld", names[lines], &iters[lines]) == 2) lines++;
        p = strchr(p, '\n');
        if (p) p++;
    }
    for (int i = 0; i < lines; i++) {
        if (strcmp(names[i], "fixed") == 0) fixed++;
        if (strcmp(names[i], "cutter") == 0) cutter++;
        if (strcmp(names[i], "auto") == 0 &&
            !(i + 1 < lines && strcmp(names[i + 1], "auto") == 0 && iters[i + 1] > iters[i]))
            auto_final++;
    }
    // the JSON is closed, with the instances Google Benchmark had reported whole
    char *json = test_read_in(dir, "cut.json");
    assert_non_null(json);
    size_t n = strlen(json);
    while (n > 0 && (json[n - 1] == '\n' || json[n - 1] == ' ')) n--;
    assert_true(n > 0 && json[n - 1] == '}');
    assert_non_null(strstr(json, "\"benchmarks\": ["));
    free(json);
    assert_int_equal(cutter, 2);
    assert_int_equal(reps_rows(reps, "cutter"), 2);
    assert_int_equal(reps_rows(reps, "fixed"), fixed);
    assert_int_equal(reps_rows(reps, "auto"), auto_final);
    int done = -1, planned = -1;
    assert_int_equal(sscanf(partial, "%d %d", &done, &planned), 2);
    assert_int_equal(planned, 3 * 4);
    assert_int_equal(done, 2 + fixed + auto_final);
    char status[32], reps_col[32], time_col[64];
    row_value(csv, "cutter", "status", status, sizeof status);
    assert_string_equal(status, "partial");
    row_value(csv, "cutter", "repetitions", reps_col, sizeof reps_col);
    assert_string_equal(reps_col, "2");
    row_value(csv, "cutter", "time", time_col, sizeof time_col);
    assert_true(atof(time_col) > 0);
    for (const char *v = "fixed"; v; v = strcmp(v, "fixed") == 0 ? "auto" : NULL) {
        row_value(csv, v, "status", status, sizeof status);
        row_value(csv, v, "repetitions", reps_col, sizeof reps_col);
        // none done (the shuffle put them all after the cut): no row; else partial, even
        // with all 4 done: the cut came inside their row group, whose stopping rule had
        // not yet said its last word
        if (reps_rows(reps, v) == 0) {
            assert_string_equal(status, "");
        } else {
            assert_string_equal(status, "partial");
            assert_true(atoi(reps_col) <= 4);
            assert_int_equal(atoi(reps_col), reps_rows(reps, v));
        }
    }
    free(out); free(csv); free(reps); free(partial); free(log);
    test_remove_tree(dir);
    free(dir);
}

// SIGHUP (a closed terminal; run-suite sends on the signal that stopped it) cuts the run as
// SIGINT does: the repetitions done are kept, FILE.partial written, exit 128 + 1. It used
// to kill the program with nothing written.
static void test_sighup_cut_keeps_the_rows(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_non_null(dir);
    int rc = run_child(dir, "cut", "TEST_HARNESS_CUT_SIGNAL=1", "--benchmark_repetitions=3 --benchmark_filter=cut/cutter");
    char *csv = test_read_in(dir, "cut.csv"), *partial = test_read_in(dir, "cut.partial");
    if (rc != 129 || !csv || !partial) {
        char *out = test_read_in(dir, "cut.out");
        fail_msg("SIGHUP: exit %d, csv %s, partial %s; output:\n%s", rc, csv ? "written" : "none",
                 partial ? "written" : "none", out ? out : "");
    }
    char status[32];
    row_value(csv, "cutter", "status", status, sizeof status);
    assert_string_equal(status, "partial");
    assert_string_equal(partial, "2 3\n");
    free(csv);
    free(partial);
    test_remove_tree(dir);
    free(dir);
}

// A finished run leaves no FILE.partial and no partial rows.
static void test_finished_run_is_not_partial(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_non_null(dir);
    int rc = run_child(dir, "cut", "", "--benchmark_repetitions=2 --benchmark_filter='cut/(auto|fixed)'");
    assert_int_equal(rc, 0);
    char *csv = test_read_in(dir, "cut.csv"), *partial = test_read_in(dir, "cut.partial");
    assert_non_null(csv);
    assert_null(partial);
    assert_null(strstr(csv, ",partial,"));
    char status[32];
    row_value(csv, "auto", "status", status, sizeof status);
    assert_string_equal(status, "ok");
    free(csv);
    test_remove_tree(dir);
    free(dir);
}

// An error in any repetition makes the row an error (a later skip does not hide it); the
// error store is empty at the start of every run; SUITE_EXPECT_GPU=1 turns a skip on a
// machine without a GPU into a failure.
// The values of column `name` in the reps rows of variant, in the order they ran.
static int reps_values(const char *reps, const char *variant, const char *name, double *out, int max)
{
    int vcol = test_csv_column(reps, "variant"), col = test_csv_column(reps, name), n = 0;
    int scol = test_csv_column(reps, "sequence");
    const char *p = strchr(reps, '\n');
    char line[8192], v[128], x[64], seq[32];
    double order[64];
    while (p && *++p && n < max && n < 64) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, p, len);
        line[len] = '\0';
        if (test_csv_field(line, vcol, v, sizeof v) && strcmp(v, variant) == 0 && test_csv_field(line, col, x, sizeof x) &&
            test_csv_field(line, scol, seq, sizeof seq)) {
            int i = n++;  // insertion by sequence: the order the repetitions ran
            while (i > 0 && order[i - 1] > atof(seq)) {
                order[i] = order[i - 1];
                out[i] = out[i - 1];
                i--;
            }
            order[i] = atof(seq);
            out[i] = atof(x);
        }
        p = end;
    }
    return n;
}

// What a run keeps (harness_keep) its instance's next run takes, through every repetition
// of the row group; the harness releases it when the group ends, so that a later group's
// rows never run beside an earlier group's cores.
static void test_kept_between_runs_of_an_instance(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_non_null(dir);
    int rc = run_child(dir, "keep", "", "--benchmark_repetitions=4 --benchmark_enable_random_interleaving=true");
    assert_int_equal(rc, 0);
    char *reps = test_read_in(dir, "keep.reps.csv");
    assert_non_null(reps);
    const char *variants[] = {"a_base", "a_tuned", "b_base", "b_tuned"};
    for (int i = 0; i < 4; i++) {
        double runs[8], alive[8];
        assert_int_equal(reps_values(reps, variants[i], "runs_of_kept", runs, 8), 4);
        assert_int_equal(reps_values(reps, variants[i], "kept_alive", alive, 8), 4);
        for (int k = 0; k < 4; k++) {
            assert_true(runs[k] == k + 1);  // made once, then taken by each next run
            assert_true(alive[k] >= 1 && alive[k] <= 2);  // its group's two, never group a's in b
        }
    }
    free(reps);
    test_remove_tree(dir);
    free(dir);
}

static void test_errors_are_errors(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_non_null(dir);
    int rc = run_child(dir, "errors", "SUITE_EXPECT_GPU=0", "--benchmark_repetitions=2");  // the GPU check sets 1
    assert_int_equal(rc, 1);
    char *csv = test_read_in(dir, "errors.csv");
    assert_non_null(csv);
    char status[32], reason[256];
    row_value(csv, "fail_then_skip", "status", status, sizeof status);
    row_value(csv, "fail_then_skip", "reason", reason, sizeof reason);
    assert_string_equal(status, "error");
    assert_string_equal(reason, "first repetition failed");
    row_value(csv, "inherits", "status", status, sizeof status);
    assert_string_equal(status, "ok");
    row_value(csv, "gpu_only", "status", status, sizeof status);
    assert_string_equal(status, "skipped");
    free(csv);

    rc = run_child(dir, "errors", "SUITE_EXPECT_GPU=1", "--benchmark_filter=gpu_only");
    csv = test_read_in(dir, "errors.csv");
    assert_non_null(csv);
    row_value(csv, "gpu_only", "status", status, sizeof status);
    row_value(csv, "gpu_only", "reason", reason, sizeof reason);
    if (gpu_device_available(NULL, 0)) {
        assert_string_equal(status, "skipped");  // a GPU is here: the skip is the benchmark's own
        assert_int_equal(rc, 0);
    } else {
        assert_string_equal(status, "error");
        assert_non_null(strstr(reason, "SUITE_EXPECT_GPU=1"));
        assert_int_equal(rc, 1);
    }
    free(csv);
    test_remove_tree(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strncmp(argv[1], "--child=", 8) == 0) {
        const char *mode = argv[1] + 8;
        argv[1] = argv[0];  // the child's own arguments follow
        return child_main(mode, argc - 1, argv + 1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_spec_is_refused),
        cmocka_unit_test(test_exit_status_reports_the_broken_benchmark),
        cmocka_unit_test(test_csv_has_fixed_param_counter_and_context_columns),
        cmocka_unit_test(test_one_row_per_instance_with_role_and_aggregates),
        cmocka_unit_test(test_skip_and_failure_rows),
        cmocka_unit_test(test_reference_role_string_axis_options_and_curves),
        cmocka_unit_test(test_bad_flags_are_refused),
        cmocka_unit_test(test_json_keeps_google_benchmark_format_and_context),
        cmocka_unit_test(test_context_library_versions_match_headers),
        cmocka_unit_test(test_cut_keeps_every_finished_repetition),
        cmocka_unit_test(test_sighup_cut_keeps_the_rows),
        cmocka_unit_test(test_finished_run_is_not_partial),
        cmocka_unit_test(test_errors_are_errors),
        cmocka_unit_test(test_kept_between_runs_of_an_instance),
    };
    return cmocka_run_group_tests(tests, run_harness, cleanup);
}
