// test_run_suite.c: `make bench`'s console (scripts/run-suite.sh) with fake programs, so
// that it takes seconds:
// - without a terminal: the time plan, one line per program with its rows and time, the
//   plan against what ran, the digest; no escape codes, at most 200 lines for 13 programs
//   that each print 600 lines; every program's full console in logs/<name>.log.gz;
// - the second run's plan comes from the first (the newest folder of the same slug);
// - BENCH_VERBOSE=1 prints the full console; BENCH_PROGRESS=1 the in-place progress line;
// - BENCH_BUDGET cuts a slow program at its share: partial, its rows kept, within budget;
// - the quick pass (BENCH_PLAN=scripts/quick-pass.txt, as `make bench-quick`) passes each
//   program its filter and 4 repetitions, and its report says it is the quick pass;
// - a signal to `make bench`'s process group (timeout(1), scancel) or to run-suite stops
//   the running program too, keeps its finished rows (partial) and leaves nothing running;
// - two runs started at once (same slug, same second) write two folders;
// - the plan takes no estimate from an earlier run on other hardware with the same slug.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/support.h"

static const char *const fake_names[] = {"amp", "batch_size", "cuda_graphs", "cudnn_benchmark", "ddp",
                                         "fusion", "kernels", "layout", "on_device", "pin_memory",
                                         "sync", "workers", "zero_grad"};
enum { FAKE_COUNT = sizeof fake_names / sizeof fake_names[0] };

// A fake build in tmp/build: a context without a GPU and the programs named in `names`
// (bench_<name>). Each lists 6 rows, records its arguments in tmp/args/<name>, prints 600
// console lines, writes a repetition file and the fixture as its tidy CSV; bench_slow
// touches tmp/slow_started and sleeps (`sleep $SLOW_SLEEP`, default 300) until SIGINT,
// SIGTERM or SIGHUP first (keeping its rows, as the harness does).
static void fake_build(const char *tmp, const char *const *names, int n)
{
    char build[600], body[3000];
    snprintf(build, sizeof build, "%s/build", tmp);
    assert_int_equal(test_run("mkdir -p '%s' '%s/args' '%s/results'", build, tmp, tmp), 0);
    // the CPU model from tmp/cpu when there is one: another machine of the same slug
    char context[1200];
    snprintf(context, sizeof context,
             "if [ \"$1\" = --slug ]; then echo cpu_fake; else echo gpu_name=none; "
             "echo \"host_cpu=$(cat '%s/cpu' 2>/dev/null || echo 'Fake CPU')\"; echo host_cores=2; "
             "echo \"run_date=$(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ)\"; echo 'no_gpu_reason=no CUDA device (fake)'; fi",
             tmp);
    test_write_script(build, "context", context);
    snprintf(body, sizeof body,
             "case \"$*\" in *--benchmark_list_tests*) for i in 1 2 3 4 5 6; do echo \"p/row/$i/min_time:0.010\"; "
             "done; exit 0;; esac\n"
             "name=${0##*/}; name=${name#bench_}; echo \"$*\" > '%s/args/'$name\n"
             "csv=\n"
             "for a in \"$@\"; do case $a in --harness_csv=*) csv=${a#*=};; "
             "--benchmark_out=*) echo '{}' > \"${a#*=}\";; esac; done\n"
             "for i in $(seq 1 600); do echo \"p/row/$i/manual_time   SKIPPED (no CUDA device (fake))\"; done\n"
             "keep() { cp '%s/tests/fixtures/pin_memory_fixture.csv' \"$csv\"; }\n"
             "if [ $name = slow ]; then touch '%s/slow_started'; sleep ${SLOW_SLEEP:-300} & "
             "trap 'kill $!; keep; exit 130' INT; trap 'kill $!; keep; exit 143' TERM; "
             "trap 'kill $!; keep; exit 129' HUP; wait; fi\n"
             "keep\n",
             tmp, test_suite_root(), tmp);
    for (int i = 0; i < n; i++) {
        char file[64];
        snprintf(file, sizeof file, "bench_%s", names[i]);
        test_write_script(build, file, body);
    }
}

// Runs run-suite.sh on tmp/build into tmp/results/<folder> with `env`, output to tmp/out.txt;
// returns the exit status, the output in *text.
static int run_suite(const char *tmp, const char *env, const char *folder, char **text)
{
    int rc = test_run("cd '%s' && %s RESULTS_DIR='%s/results/%s' bash scripts/run-suite.sh '%s/build' "
                      ">'%s/out.txt' 2>&1 </dev/null",
                      test_suite_root(), env, tmp, folder, tmp, tmp);
    char path[700];
    snprintf(path, sizeof path, "%s/out.txt", tmp);
    *text = test_read_file(path, NULL);
    assert_non_null(*text);
    return rc;
}

static void test_console_without_a_terminal(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    fake_build(tmp, fake_names, FAKE_COUNT);
    char *text = NULL;
    int rc = run_suite(tmp, "BENCH_NO_CHARTS=1 BENCH_REPETITIONS=2", "cpu_fake_20260101-0001", &text);
    if (rc != 0) fail_msg("run-suite: exit %d:\n%s", rc, text);
    int lines = test_count_lines(text);
    printf("13 programs of 600 console lines each: %d lines on a non-terminal stdout\n", lines);
    if (lines > 200) fail_msg("%d lines:\n%s", lines, text);
    if (strchr(text, '\033') || strchr(text, '\r')) fail_msg("escape codes without a terminal:\n%s", text);
    if (strstr(text, "SKIPPED")) fail_msg("the programs' console reached the terminal:\n%s", text);
    const char *want[] = {"Time plan (2 repetitions each", "The plan against what ran", "Benchmarks: ",
                          "[13/13] zero_grad: ran, 42 rows (40 ran, 2 skipped), 0 failed, "};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("output lacks '%s':\n%s", want[i], text);
    // every practice named once on its own line, with its rows and time
    for (int i = 0; i < FAKE_COUNT; i++) {
        char line[200];
        snprintf(line, sizeof line, "] %s: ran, 42 rows", fake_names[i]);
        if (!strstr(text, line)) fail_msg("no line '%s':\n%s", line, text);
    }
    free(text);
    // the full console in the log, gzipped once the program ended
    char logs[700];
    snprintf(logs, sizeof logs, "%s/results/cpu_fake_20260101-0001/logs", tmp);
    assert_int_equal(test_run("test ! -e '%s/kernels.log' && gzip -dc '%s/kernels.log.gz' >'%s/kernels.txt'",
                              logs, logs, tmp), 0);
    char *log = test_read_in(tmp, "kernels.txt");
    assert_non_null(log);
    assert_int_equal(test_count_lines(log), 600);
    free(log);
    // The second run's plan comes from the first run's times.
    rc = run_suite(tmp, "BENCH_NO_CHARTS=1 BENCH_REPETITIONS=2", "cpu_fake_20260101-0002", &text);
    if (rc != 0) fail_msg("second run-suite: exit %d:\n%s", rc, text);
    if (!strstr(text, "estimates from the newest earlier run on this hardware") || !strstr(text, "cpu_fake_20260101-0001"))
        fail_msg("the second plan does not use the first run:\n%s", text);
    free(text);
    // A run made another way (other BENCH_ARGS, as the quick pass's 0.05 s rows) says nothing
    // of this one's times: the plan falls back to the rows' minimum times.
    rc = run_suite(tmp, "BENCH_NO_CHARTS=1 BENCH_REPETITIONS=2 BENCH_ARGS=--benchmark_min_time=0.01 BENCH_PLAN_ONLY=1",
                   "cpu_fake_20260101-0005", &text);
    if (rc != 0) fail_msg("plan-only run-suite: exit %d:\n%s", rc, text);
    if (strstr(text, "cpu_fake_20260101-000") && strstr(text, "from the newest earlier run"))
        fail_msg("a plan for other BENCH_ARGS took the earlier runs' times:\n%s", text);
    if (!strstr(text, "min times")) fail_msg("no estimate from the rows' minimum times:\n%s", text);
    free(text);
    // Nor does a run made before each repetition ran its whole minimum time (its
    // command.txt says "repetitions: 2", without "at least"): its times were a fraction of
    // what a repetition costs now.
    assert_int_equal(test_run("cd '%s/results' && for d in cpu_fake_20260101-000[12]; do "
                              "sed -i 's/^repetitions: .*/repetitions: 2/' $d/command.txt; done", tmp), 0);
    rc = run_suite(tmp, "BENCH_NO_CHARTS=1 BENCH_REPETITIONS=2 BENCH_PLAN_ONLY=1", "cpu_fake_20260101-0006", &text);
    if (rc != 0) fail_msg("plan-only run-suite: exit %d:\n%s", rc, text);
    if (strstr(text, "from the newest earlier run"))
        fail_msg("a plan took the times of runs made with the old repetitions:\n%s", text);
    free(text);
    // BENCH_VERBOSE=1: today's full console; BENCH_PROGRESS=1: the line updated in place.
    const char *one[] = {"kernels"};
    test_run("rm -f '%s'/build/bench_*", tmp);
    fake_build(tmp, one, 1);
    rc = run_suite(tmp, "BENCH_NO_CHARTS=1 BENCH_VERBOSE=1", "cpu_fake_20260101-0003", &text);
    assert_int_equal(rc, 0);
    if (!strstr(text, "p/row/600/manual_time   SKIPPED")) fail_msg("BENCH_VERBOSE=1 lacks the console:\n%s", text);
    free(text);
    rc = run_suite(tmp, "BENCH_NO_CHARTS=1 BENCH_PROGRESS=1", "cpu_fake_20260101-0004", &text);
    assert_int_equal(rc, 0);
    if (!strstr(text, "\r\033[K[1/1] kernels: ran, 42 rows")) fail_msg("BENCH_PROGRESS=1 output:\n%s", text);
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

static void test_budget_cuts_to_partial(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    const char *names[] = {"fast", "slow", "zlast"};
    fake_build(tmp, names, 3);
    const int budget = 25;
    char env[100];
    snprintf(env, sizeof env, "BENCH_NO_CHARTS=1 BENCH_BUDGET=%d", budget);
    double t0 = test_now_s();
    char *text = NULL;
    int rc = run_suite(tmp, env, "cpu_fake_20260101-0001", &text);
    double took = test_now_s() - t0;
    printf("BENCH_BUDGET=%d: exit %d after %.1f s\n", budget, rc, took);
    if (rc != 0) fail_msg("exit %d:\n%s", rc, text);
    if (took > budget + 2) fail_msg("overran its budget: %.1f s\n%s", took, text);
    const char *want[] = {"BENCH_BUDGET=25: ", "] slow: partial, 42 rows", "cut at the deadline"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("output lacks '%s':\n%s", want[i], text);
    // the last program ran in what was left, or is "not run" (as the machine's load has it)
    if (!strstr(text, "] zlast: ran, 42 rows") && !strstr(text, "zlast not run: no time left"))
        fail_msg("zlast neither ran nor was 'not run':\n%s", text);
    free(text);
    char dir[700];
    snprintf(dir, sizeof dir, "%s/results/cpu_fake_20260101-0001", tmp);
    text = test_read_in(dir, "suite-status.tsv");
    assert_non_null(text);
    if (!strstr(text, "slow\tpartial\t40\t2\t0\t")) fail_msg("suite-status.tsv:\n%s", text);
    free(text);
    text = test_read_in(dir, "command.txt");
    assert_non_null(text);
    assert_non_null(strstr(text, "budget: 25 s (BENCH_BUDGET)"));
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

static void test_quick_pass_is_the_shared_plan(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    const char *names[] = {"pin_memory", "zero_grad"};
    fake_build(tmp, names, 2);
    char *text = NULL;
    int rc = run_suite(tmp, "BENCH_NO_CHARTS=1 BENCH_PLAN=scripts/quick-pass.txt BENCH_COMMAND='make bench-quick'",
                       "cpu_fake_20260101-0001", &text);
    if (rc != 0) fail_msg("exit %d:\n%s", rc, text);
    assert_non_null(strstr(text, "Time plan (4 repetitions each"));
    free(text);
    // each program got the quick pass's filter from scripts/quick-pass.txt
    char args[700];
    snprintf(args, sizeof args, "%s/args", tmp);
    text = test_read_in(args, "pin_memory");
    assert_non_null(text);
    if (!strstr(text, "--benchmark_repetitions=4") || !strstr(text, "--benchmark_min_time=0.05") ||
        !strstr(text, "--benchmark_filter=^pin_memory/(pageable|pinned_async)/"))
        fail_msg("bench_pin_memory ran with: %s", text);
    free(text);
    // and the Makefile's bench-quick is that plan
    char *make = test_read_in(test_suite_root(), "Makefile");
    assert_non_null(make);
    assert_non_null(strstr(make, "bench-quick: all\n\t@BENCH_PLAN=scripts/quick-pass.txt "));
    free(make);
    char dir[700];
    snprintf(dir, sizeof dir, "%s/results/cpu_fake_20260101-0001", tmp);
    text = test_read_in(dir, "report.md");
    assert_non_null(text);
    if (!strstr(text, "**The quick pass** (`make bench-quick`")) fail_msg("report.md:\n%s", text);
    free(text);
    char summary[800];
    snprintf(summary, sizeof summary, "%s/summary.csv", dir);
    assert_true(test_file_at_least(summary, 10));
    test_remove_tree(tmp);
    free(tmp);
}

// True when no process's command line matches the extended regex `pattern` within
// `seconds`; otherwise kills those left (SIGKILL) and returns false.
static bool none_left_within(const char *pattern, double seconds)
{
    double end = test_now_s() + seconds;
    while (test_run("pgrep -f '%s' >/dev/null", pattern) == 0) {
        if (test_now_s() > end) {
            test_run("for p in $(pgrep -f '%s'); do kill -KILL $p; done", pattern);
            return false;
        }
        usleep(100 * 1000);
    }
    return true;
}

// `timeout 40 make bench`: timeout(1) sends SIGTERM to make's whole process group (as CI
// systems, scancel and container runtimes do), which never reached the running program:
// its timeout(1) puts it in a group of its own. It ran on to its own limit, writing into
// the results folder, and was missing from suite-status.tsv. Now run-suite sends the
// signal on: the program keeps its finished rows (partial), the rest is not run, the
// summary and report are written, and within 10 s nothing is left. The same for a SIGHUP
// to run-suite alone, which exits 128 + 1.
static void test_signal_stops_the_running_program(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    const char *names[] = {"fast", "slow", "zlast"};
    fake_build(tmp, names, 3);
    char sleeper[32], sleeper_re[64], suite_re[700];
    snprintf(sleeper, sizeof sleeper, "%d.25", 700 + (int)(getpid() % 1000));
    snprintf(sleeper_re, sizeof sleeper_re, "^sleep %s$", sleeper);
    snprintf(suite_re, sizeof suite_re, "^bash .*/run-suite[.]sh %s/build$", tmp);
    // The Makefile's own `make bench` (-o all: the fake build is not rebuilt), in a process
    // group of its own (setsid) as timeout(1) makes one; the signal once bench_slow runs, to
    // the whole group.
    int rc = test_run("cd '%s' && { SLOW_SLEEP=%s RESULTS_DIR='%s/results/make' setsid make -s -o all bench "
                      "BUILD='%s/build' >'%s/out.txt' 2>&1 </dev/null & p=$!; i=0; "
                      "while [ ! -e '%s/slow_started' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; "
                      "t0=$(date +%%s%%N); kill -TERM -$p; wait $p; s=$?; "
                      "echo $((($(date +%%s%%N) - t0) / 1000000)) >'%s/stop_ms'; exit $s; }",
                      test_suite_root(), sleeper, tmp, tmp, tmp, tmp, tmp);
    char *stop_ms = test_read_in(tmp, "stop_ms");
    assert_non_null(stop_ms);
    double took = atof(stop_ms) / 1000, waited_from = test_now_s();
    free(stop_ms);
    double rest = took < 9.5 ? 10 - took : 0.5;
    bool suite_left = !none_left_within(suite_re, rest);
    bool sleeper_left = !none_left_within(sleeper_re, rest - (test_now_s() - waited_from) > 0.2
                                                          ? rest - (test_now_s() - waited_from) : 0.2);
    char *text = test_read_in(tmp, "out.txt");
    assert_non_null(text);
    printf("make bench, SIGTERM to its group: make's exit %d after %.1f s; run-suite's output:\n%s", rc, took, text);
    if (took > 10 || sleeper_left || suite_left)
        fail_msg("10 s after the SIGTERM: make %s, bench_slow %s, run-suite %s", took > 10 ? "ran on" : "ended",
                 sleeper_left ? "ran on" : "ended", suite_left ? "ran on" : "ended");
    assert_true(rc != 0);
    const char *want[] = {"[1/3] fast: ran, 42 rows", "[2/3] slow: partial, 42 rows", "cut by SIGTERM",
                          "zlast not run: run-suite was stopped (SIGTERM)", "stopped by SIGTERM: the summary and report"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("output lacks '%s':\n%s", want[i], text);
    free(text);
    char dir[700];
    snprintf(dir, sizeof dir, "%s/results/make", tmp);
    text = test_read_in(dir, "suite-status.tsv");
    assert_non_null(text);
    if (!strstr(text, "\nfast\tran\t") || !strstr(text, "\nslow\tpartial\t40\t2\t0\t") ||
        !strstr(text, "\nzlast\tnot run\t"))
        fail_msg("suite-status.tsv:\n%s", text);
    free(text);
    char path[800];
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    assert_true(test_file_at_least(path, 10));
    snprintf(path, sizeof path, "%s/report.md", dir);
    assert_true(test_file_at_least(path, 10));

    // SIGHUP to run-suite alone (a closed terminal): the same, and its exit status says so.
    test_run("rm -f '%s/slow_started'", tmp);
    rc = test_run("cd '%s' && { SLOW_SLEEP=%s BENCH_NO_CHARTS=1 RESULTS_DIR='%s/results/hup' setsid bash "
                  "scripts/run-suite.sh '%s/build' >'%s/out.txt' 2>&1 </dev/null & p=$!; i=0; "
                  "while [ ! -e '%s/slow_started' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; "
                  "kill -HUP $p; wait $p; }",
                  test_suite_root(), sleeper, tmp, tmp, tmp, tmp);
    text = test_read_in(tmp, "out.txt");
    assert_non_null(text);
    if (!none_left_within(sleeper_re, 10)) fail_msg("bench_slow still ran 10 s after the SIGHUP:\n%s", text);
    if (rc != 129 || !strstr(text, "[2/3] slow: partial, 42 rows")) fail_msg("SIGHUP: exit %d:\n%s", rc, text);
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

// Two `make bench` started together (two terminals; two nodes of a job array on a shared
// file system, the same host slug) used to write one folder, results/<slug>_<minute>, and
// mix their rows. Each now makes its own (seconds and a unique suffix, mkdir without -p)
// and says which; the newest run is found among old and new names alike.
static void test_two_runs_at_once_write_two_folders(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    const char *names[] = {"kernels", "slow"};
    fake_build(tmp, names, 2);
    // an older run under the old name, which the newest-run lookup must rank below today's
    assert_int_equal(test_run("mkdir -p '%s/results/cpu_fake_20200101-0000' && "
                              "echo run_date=2020-01-01T00:00:00Z >'%s/results/cpu_fake_20200101-0000/context.txt'",
                              tmp, tmp), 0);
    // in tmp, where results/ is the default root; bench_slow ends after 1 s, so the two overlap
    int rc = test_run("cd '%s' && { export BENCH_NO_CHARTS=1 SLOW_SLEEP=1; bash '%s/scripts/run-suite.sh' build "
                      ">a.txt 2>&1 </dev/null & a=$!; bash '%s/scripts/run-suite.sh' build >b.txt 2>&1 </dev/null & "
                      "b=$!; wait $a; ra=$?; wait $b; exit $((ra + $?)); }",
                      tmp, test_suite_root(), test_suite_root());
    char *a = test_read_in(tmp, "a.txt"), *b = test_read_in(tmp, "b.txt");
    assert_non_null(a);
    assert_non_null(b);
    if (rc != 0) fail_msg("exit %d:\n%s\n---\n%s", rc, a, b);
    char folder_a[200] = "", folder_b[200] = "";
    const char *wa = strstr(a, "run-suite: writing "), *wb = strstr(b, "run-suite: writing ");
    if (!wa || !wb) fail_msg("a run did not say which folder it wrote:\n%s\n---\n%s", a, b);
    sscanf(wa, "run-suite: writing %199s", folder_a);
    sscanf(wb, "run-suite: writing %199s", folder_b);
    printf("two runs at once: %s and %s\n", folder_a, folder_b);
    if (strcmp(folder_a, folder_b) == 0) fail_msg("both runs wrote %s", folder_a);
    free(a);
    free(b);
    const char *folders[] = {folder_a, folder_b};
    for (int i = 0; i < 2; i++) {
        // results/cpu_fake_<yyyymmdd-hhmmss>-<4 hex>, each with its own rows once
        assert_int_equal(test_run("echo '%s' | grep -Eq '^results/cpu_fake_[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$'", folders[i]), 0);
        char dir[800];
        snprintf(dir, sizeof dir, "%s/%s", tmp, folders[i]);
        char *status = test_read_in(dir, "suite-status.tsv");
        assert_non_null(status);
        if (test_count_lines(status) != 3 || !strstr(status, "\nkernels\tran\t") || !strstr(status, "\nslow\tran\t"))
            fail_msg("%s/suite-status.tsv:\n%s", folders[i], status);
        free(status);
    }
    // the newest run is one of today's, not the old name's
    assert_int_equal(test_run("cd '%s' && n=$(bash '%s/scripts/results-dir.sh' newest results) && "
                              "{ [ \"$n\" = '%s' ] || [ \"$n\" = '%s' ]; }",
                              tmp, test_suite_root(), folder_a, folder_b), 0);
    test_remove_tree(tmp);
    free(tmp);
}

// The plan estimated 2,793 s on a 2-core AMD machine from a committed run of a 2-core
// Intel one with the same slug (cpu_vm); the run took 843 s. Estimates now come only from
// a run on the same hardware (CPU model, cores; GPU name, count, clocks), else from the
// rows' minimum times, saying so.
static void test_plan_ignores_other_hardware_of_the_same_slug(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    const char *names[] = {"kernels"};
    fake_build(tmp, names, 1);
    assert_true(test_write_file(tmp, "cpu", "Intel(R) Xeon(R) Processor\n"));
    char *text = NULL;
    int rc = run_suite(tmp, "BENCH_NO_CHARTS=1 BENCH_REPETITIONS=2", "cpu_fake_20260101-0001", &text);
    if (rc != 0) fail_msg("first run: exit %d:\n%s", rc, text);
    free(text);
    // another machine, the same slug: not the Intel run's times
    assert_true(test_write_file(tmp, "cpu", "AMD EPYC\n"));
    rc = run_suite(tmp, "BENCH_REPETITIONS=2 BENCH_PLAN_ONLY=1", "cpu_fake_20260101-0002", &text);
    if (rc != 0) fail_msg("plan on AMD: exit %d:\n%s", rc, text);
    if (strstr(text, "cpu_fake_20260101-0001") || !strstr(text, "min times") ||
        !strstr(text, "No earlier run on this hardware (") || !strstr(text, "host_cpu=AMD EPYC"))
        fail_msg("the plan on AMD took the Intel run's times or did not say why not:\n%s", text);
    free(text);
    // the same hardware again: its times
    assert_true(test_write_file(tmp, "cpu", "Intel(R) Xeon(R) Processor\n"));
    rc = run_suite(tmp, "BENCH_REPETITIONS=2 BENCH_PLAN_ONLY=1", "cpu_fake_20260101-0003", &text);
    if (rc != 0 || !strstr(text, "cpu_fake_20260101-0001") || strstr(text, "No earlier run"))
        fail_msg("the plan on the Intel machine again: exit %d:\n%s", rc, text);
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_console_without_a_terminal),
        cmocka_unit_test(test_budget_cuts_to_partial),
        cmocka_unit_test(test_quick_pass_is_the_shared_plan),
        cmocka_unit_test(test_signal_stops_the_running_program),
        cmocka_unit_test(test_two_runs_at_once_write_two_folders),
        cmocka_unit_test(test_plan_ignores_other_hardware_of_the_same_slug),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
