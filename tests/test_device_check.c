// test_device_check.c: the parts of the GPU check that a CPU can check.
// - scripts/with-gpu-libs.sh finds cuDNN and NCCL in a (fake) Python site-packages tree
//   as the GPU machine has them, accepts only regular files (a *directory* named
//   libcublas.so.13, as perf leaves under ~/.debug, is passed over), and runs the command;
// - the chart tests skip, visibly, under a PATH without gnuplot (the GPU machine has none);
// - scripts/device-check.sh keeps one deadline for everything: a test program that hangs
//   is stopped at the tests' share, a practice program that overruns is stopped at the
//   deadline, one with no time left is "not run", the summary is printed, and the archive
//   holds what finished - all within the budget. Fake programs stand in for the real
//   ones so that the test takes seconds.
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

static void test_wrapper_finds_libraries_in_site_packages(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    // site-packages/nvidia/{cudnn,nccl}/lib as pip installs them; a directory where
    // libcublas.so.13 should be; no toolkit at CUDA_HOME.
    assert_int_equal(test_run("cd '%s' && mkdir -p bin sp/nvidia/cudnn/lib sp/nvidia/nccl/lib "
                              "sp/nvidia/cublas/lib/libcublas.so.13 nocuda && "
                              "echo x > sp/nvidia/cudnn/lib/libcudnn.so.9.1.0 && "
                              "ln -s libcudnn.so.9.1.0 sp/nvidia/cudnn/lib/libcudnn.so.9 && "
                              "echo x > sp/nvidia/nccl/lib/libnccl.so.2", tmp), 0);
    char body[1024];
    // A python3 and a python that report these site-packages (and hide the real ones,
    // which may hold pip's CUDA libraries, e.g. torch's).
    snprintf(body, sizeof body, "echo '%s/sp'", tmp);
    test_write_script(tmp, "bin/python3", body);
    test_write_script(tmp, "bin/python", body);
    char out[1200];
    snprintf(out, sizeof out, "%s/print.txt", tmp);
    assert_int_equal(test_run("PATH='%s/bin':\"$PATH\" CUDA_HOME='%s/nocuda' GPU_LIBS_NO_SEARCH=1 "
                              "bash '%s/scripts/with-gpu-libs.sh' --print >'%s'", tmp, tmp,
                              test_suite_root(), out), 0);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    printf("%s", text);
    char want[1200];
    snprintf(want, sizeof want, "libcudnn.so.9      %s/sp/nvidia/cudnn/lib/libcudnn.so.9", tmp);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof want, "libnccl.so.2       %s/sp/nvidia/nccl/lib/libnccl.so.2", tmp);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "libcublas.so.13    NOT FOUND"));  // the directory is no library
    snprintf(want, sizeof want, "%s/sp/nvidia/cublas", tmp);
    assert_null(strstr(text, want));
    free(text);
    // It runs the command with that LD_LIBRARY_PATH (the caller's kept at the end); a
    // cuDNN in GPU_LIBS_DIRS wins over the one in site-packages.
    assert_int_equal(test_run("mkdir -p '%s/forced' && echo x > '%s/forced/libcudnn.so.9'", tmp, tmp), 0);
    assert_int_equal(test_run("PATH='%s/bin':\"$PATH\" CUDA_HOME='%s/nocuda' GPU_LIBS_NO_SEARCH=1 "
                              "GPU_LIBS_DIRS='%s/forced' LD_LIBRARY_PATH=/keep "
                              "bash '%s/scripts/with-gpu-libs.sh' sh -c 'echo \"$LD_LIBRARY_PATH\"' >'%s'",
                              tmp, tmp, tmp, test_suite_root(), out), 0);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    snprintf(want, sizeof want, "%s/forced:%s/sp/nvidia/nccl/lib:/keep\n", tmp, tmp);
    if (!strstr(text, want)) fail_msg("LD_LIBRARY_PATH %s, want it to end with %s", text, want);
    free(text);
    // No command is a usage error, not a silent success.
    assert_int_not_equal(test_run("bash '%s/scripts/with-gpu-libs.sh' >/dev/null 2>&1", test_suite_root()), 0);
    // The real programs say which library files they loaded.
    assert_int_equal(test_run("bash '%s/scripts/with-gpu-libs.sh' '%s/context' >'%s'",
                              test_suite_root(), test_build_dir(), out), 0);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "cudnn_library=/"));
    assert_non_null(strstr(text, "cublas_library=/"));
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

// The staged C++ runtime and zlib (device-stage/lib/fallback/<name>/) go on the path only
// where the machine's own copy lacks a symbol version the programs need
// (device-stage/lib/needs.txt): here this machine's libstdc++ has GLIBCXX_3.4 and CXXABI_1.3,
// so Python and torch keep it; no libz has ZLIB_99.0, so the staged one is used; a C
// library without a needed version is named before anything fails to start.
static void test_wrapper_stages_runtime_only_where_needed(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    assert_int_equal(test_run("cd '%s' && mkdir -p stage/lib/fallback/libstdc++ stage/lib/fallback/libz && "
                              "echo x > stage/lib/fallback/libstdc++/libstdc++.so.6 && "
                              "echo x > stage/lib/fallback/libz/libz.so.1 && "
                              "printf 'libstdc++.so.6 CXXABI_1.3 GLIBCXX_3.4\\nlibz.so.1 ZLIB_99.0\\n"
                              "libc.so.6 GLIBC_99.0\\n' > stage/lib/needs.txt", tmp), 0);
    char out[700];
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    assert_int_equal(test_run("GPU_LIBS_STAGE='%s/stage' GPU_LIBS_NO_SEARCH=1 LD_LIBRARY_PATH= "
                              "bash '%s/scripts/with-gpu-libs.sh' --print >'%s' && "
                              "GPU_LIBS_STAGE='%s/stage' GPU_LIBS_NO_SEARCH=1 LD_LIBRARY_PATH= "
                              "bash '%s/scripts/with-gpu-libs.sh' sh -c 'echo \"path=$LD_LIBRARY_PATH\"' >>'%s'",
                              tmp, test_suite_root(), out, tmp, test_suite_root(), out), 0);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    printf("%s", text);
    char want[800];
    snprintf(want, sizeof want, "%s/stage/lib/fallback/libz", tmp);
    if (!strstr(text, want)) fail_msg("the staged libz is not on the path:\n%s", text);
    snprintf(want, sizeof want, "%s/stage/lib/fallback/libstdc++", tmp);
    if (strstr(text, want)) fail_msg("the staged libstdc++ is on the path though the machine's has all:\n%s", text);
    assert_non_null(strstr(text, "libstdc++.so.6     the machine's own "));
    assert_non_null(strstr(text, "lacks ZLIB_99.0"));
    assert_non_null(strstr(text, "WARNING: the machine's "));
    assert_non_null(strstr(text, "lacks GLIBC_99.0: the staged programs will not start"));
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

static void test_chart_tests_skip_without_gnuplot(void **state)
{
    (void)state;
    if (test_run("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("gnuplot is missing here already: test_scripts itself shows the skip\n");
        return;
    }
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char bin[600];
    snprintf(bin, sizeof bin, "%s/bin", tmp);
    test_path_without(bin, "gnuplot");
    char out[600];
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    int rc = test_run("PATH='%s/bin' '%s/tests/test_scripts' >'%s' 2>&1", tmp, test_build_dir(), out);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    if (rc != 0) fail_msg("test_scripts without gnuplot: exit %d:\n%s", rc, text);
    assert_non_null(strstr(text, "skipped: gnuplot is not installed"));
    assert_non_null(strstr(text, "[  SKIPPED ] test_charts_are_non_empty_svgs"));
    assert_non_null(strstr(text, "[       OK ] test_report_embeds_charts_and_speedups"));
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

// The GPU check runs the tests in an environment of its own: SUITE_GPU_CHECK=1 (a missing
// tool such as mpirun is a skip there), TESTS_STATUS, TESTS_SKIP, TEST_TIMEOUT and TEST_JOBS
// for its run-tests.sh, on a machine without gnuplot; a user's shell may hold BENCH_* and
// RESULTS_DIR. The tests that used to take their expectations from that environment pass
// in it (test_dist_ddp's missing mpirun, test_stats' charts of a cut run, test_device_check's
// own run-tests.sh runs), and none writes into the caller's TESTS_STATUS (the check's rerun
// line once named "test_g", a fake test of test_run_tests_runs_two_at_once).
static void test_tests_pass_in_the_checks_environment(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char bin[600], status[600], out[600];
    snprintf(bin, sizeof bin, "%s/bin", tmp);
    snprintf(status, sizeof status, "%s/status", tmp);
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    test_path_without(bin, "gnuplot");
    const char *runs[][2] = {{"test_dist_ddp", "test_bench_ddp_missing_mpirun_is_a_failure"},
                             {"test_stats", "test_cut_run_is_summarized"},
                             {"test_device_check", "test_run_tests_runs_two_at_once"}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        assert_true(test_write_file(tmp, "status", "the check's own line\n"));
        int rc = test_run("cd '%s' && PATH='%s' SUITE_GPU_CHECK=1 TEST_JOBS=1 TEST_TIMEOUT=300 "
                          "TESTS_SKIP='test_core_gpu test_practice' TESTS_STATUS='%s' BENCH_REPETITIONS=1 "
                          "BENCH_FILTER=none RESULTS_DIR=/nonexistent SUITE_TEST_FILTER='%s' '%s/tests/%s' >'%s' 2>&1",
                          test_suite_root(), bin, status, runs[i][1], test_build_dir(), runs[i][0], out);
        char *text = test_read_file(out, NULL);
        assert_non_null(text);
        if (rc != 0 || !strstr(text, "[  PASSED  ] 1 test(s)."))
            fail_msg("%s %s in the check's environment: exit %d:\n%s", runs[i][0], runs[i][1], rc, text);
        free(text);
        text = test_read_file(status, NULL);
        assert_non_null(text);
        if (strcmp(text, "the check's own line\n") != 0)
            fail_msg("%s wrote into the caller's TESTS_STATUS:\n%s", runs[i][0], text);
        free(text);
    }
    test_remove_tree(tmp);
    free(tmp);
}

// What every run of scripts/device-check.sh gets here: no NVIDIA evidence from this machine
// (a PATH without nvidia-smi in tmp/bin, no device file, SUITE_EXPECT_GPU=0: the GPU check
// itself runs these tests with SUITE_EXPECT_GPU=1 on a machine with nvidia-smi and
// /dev/nvidia0) and the shares that the test's expectations rest on. Returns a static buffer.
static const char *check_env(const char *tmp)
{
    static char env[1200];
    char bin[700];
    snprintf(bin, sizeof bin, "%s/bin", tmp);
    if (test_run("test -d '%s'", bin) != 0) test_path_without(bin, "nvidia-smi");
    snprintf(env, sizeof env, "PATH='%s' DEVICE_CHECK_NVIDIA_DEVICE=/nonexistent SUITE_EXPECT_GPU=0 "
             "DEVICE_CHECK_TEST_SHARE=25 DEVICE_CHECK_TWIN_SHARE=20 DEVICE_CHECK_CPU_TEST_SHARE=10", bin);
    return env;
}

// A fake build's context: a GPU named Fake, or (gpu false) none, as build/context says.
static void fake_context(const char *build, bool gpu)
{
    test_write_script(build, "context",
                      gpu ? "if [ \"$1\" = --slug ]; then echo fake-gpu_0.0; else echo gpu_name=Fake; fi"
                          : "if [ \"$1\" = --slug ]; then echo cpu_fake; else echo gpu_name=none; "
                            "echo 'no_gpu_reason=no CUDA device (fake)'; fi");
}

static void test_device_check_keeps_one_deadline(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char build[600], fixture[600];
    snprintf(build, sizeof build, "%s/build", tmp);
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/pin_memory_fixture.csv", test_suite_root());
    assert_int_equal(test_run("mkdir -p '%s/tests' '%s/out' '%s/results'", build, tmp, tmp), 0);
    fake_context(build, true);
    // the tests say what the check exported; test_orphan leaves a process of the suite
    // behind (its own session, its command line in the build folder), as a rank would
    test_write_script(build, "tests/test_quick", "echo \"expect_gpu=${SUITE_EXPECT_GPU:-unset} gpu_check=${SUITE_GPU_CHECK:-unset}\"; "
                                      "echo '[==========] 1 test(s) run.'; echo '[  PASSED  ] 1 test(s).'");
    test_write_script(build, "tests/test_stuck", "exec sleep 300");  // a hung test
    test_write_script(build, "tests/helper_orphan", "exec -a \"$0\" sleep 120");
    test_write_script(build, "tests/test_orphan", "setsid \"$(dirname \"$0\")/helper_orphan\" </dev/null >/dev/null 2>&1 &\n"
                                       "echo '[  PASSED  ] 1 test(s).'");
    // A practice program writes its tidy CSV (here the fixture) and its JSON, then either
    // ends or overruns.
    char body[2048];
    snprintf(body, sizeof body,
             "case \"$*\" in *--benchmark_list_tests*) echo p/x; echo p/y; exit 0;; esac\n"
             "for a in \"$@\"; do case $a in --harness_csv=*) cp '%s' \"${a#*=}\";; "
             "--benchmark_out=*) echo '{}' > \"${a#*=}\";; esac; done\n"
             "[ \"${0##*/}\" = bench_b ] && exec sleep 300\ntrue", fixture);
    test_write_script(build, "bench_a", body);
    test_write_script(build, "bench_b", body);
    test_write_script(build, "bench_c", body);
    const int budget = 30;
    char log[600];
    snprintf(log, sizeof log, "%s/check.txt", tmp);
    double t0 = test_now_s();
    // no twin here (no steptime); the quick pass ends 10% of the budget before the end,
    // where the other tests get the rest
    int rc = test_run("cd '%s' && %s OUT='%s/out' BUILD='%s' RESULTS_ROOT='%s/results' "
                      "bash scripts/device-check.sh %d >'%s' 2>&1",
                      test_suite_root(), check_env(tmp), tmp, build, tmp, budget, log);
    double took = test_now_s() - t0;
    char *text = test_read_file(log, NULL);
    assert_non_null(text);
    printf("device-check with a %d s budget: exit %d after %.1f s\n", budget, rc, took);
    if (took > budget + 1.5) fail_msg("overran its budget: %.1f s\n%s", took, text);
    assert_int_not_equal(rc, 0);  // a test hung and a process was left behind
    const char *want[] = {"GPU run: SUITE_EXPECT_GPU=1", "expect_gpu=1 gpu_check=1",
                          "b: partial, ", "cut at the deadline after ",
                          "== other tests (at most ", "test_stuck (timed out after ",
                          "== device-check summary", "benchmarks: ",
                          "leftover processes: 1 found and killed", "helper_orphan",
                          "rerun what failed or did not finish, at once (",
                          "bash scripts/device-check.sh 60 --only test_stuck,b",
                          "check margins: no checked rows", "results: "};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("device-check output lacks '%s':\n%s", want[i], text);
    // c either had time left after b's cut or is "not run" (as the machine's load has it)
    if (!strstr(text, "c not run: no time left before BENCH_DEADLINE") && !strstr(text, "] c: ran"))
        fail_msg("c neither ran nor was 'not run':\n%s", text);
    // the quick pass comes before the other tests
    if (strstr(text, "== other tests") < strstr(text, "[1/3] a")) fail_msg("wrong order:\n%s", text);
    free(text);
    assert_int_not_equal(test_run("pgrep -f '%s/tests/[h]elper_orphan' >/dev/null", build), 0);
    // The archive has the log and the results of what finished, summary included.
    char list[600];
    snprintf(list, sizeof list, "%s/list.txt", tmp);
    assert_int_equal(test_run("tar -tzf '%s/out/device-check.tar.gz' >'%s'", tmp, list), 0);
    text = test_read_file(list, NULL);
    assert_non_null(text);
    const char *files[] = {"device-check.log", "/a.csv", "/b.csv", "/suite-status.tsv", "/suite-plan.tsv",
                           "/summary.csv", "/report.md", "/check-margins.tsv"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!strstr(text, files[i])) fail_msg("archive lacks %s:\n%s", files[i], text);
    free(text);
    assert_int_equal(test_run("test ! -e '%s/out/.device-check.tar.gz.tmp'", tmp), 0);
    // A rerun (--only) runs just the named test and program, in a dry run (the context
    // says there is no GPU: SUITE_EXPECT_GPU stays unset).
    fake_context(build, false);
    rc = test_run("cd '%s' && %s OUT='%s/out3' BUILD='%s' RESULTS_ROOT='%s/results' "
                  "bash scripts/device-check.sh 40 --only test_quick,a >'%s' 2>&1",
                  test_suite_root(), check_env(tmp), tmp, build, tmp, log);
    text = test_read_file(log, NULL);
    assert_non_null(text);
    if (rc != 0) fail_msg("--only test_quick,a: exit %d:\n%s", rc, text);
    const char *want_only[] = {"DRY RUN (no CUDA device (fake);", "expect_gpu=unset gpu_check=1", "=== test_quick",
                               "[1/1] a", "leftover processes: none"};
    for (size_t i = 0; i < sizeof want_only / sizeof want_only[0]; i++)
        if (!strstr(text, want_only[i])) fail_msg("--only output lacks '%s':\n%s", want_only[i], text);
    const char *not_run[] = {"test_stuck", "test_orphan", "] b ", "] c ", "== twin"};
    for (size_t i = 0; i < sizeof not_run / sizeof not_run[0]; i++)
        if (strstr(text, not_run[i])) fail_msg("--only test_quick,a ran '%s':\n%s", not_run[i], text);
    free(text);
    assert_int_equal(test_run("tar -tzf '%s/out3/device-check.tar.gz' | grep -q '/a.csv$'", tmp), 0);
    // each run wrote a folder of its own, named by scripts/results-dir.sh (to the second,
    // with a unique suffix)
    assert_int_equal(test_run("test $(ls '%s/results' | grep -c '_[0-9]\\{8\\}-[0-9]\\{6\\}-[0-9a-f]\\{4\\}$') = 2",
                              tmp), 0);
    // A budget that is not a number of seconds is refused before anything runs.
    assert_int_equal(test_run("cd '%s' && OUT='%s/out2' bash scripts/device-check.sh 5m >/dev/null 2>&1",
                              test_suite_root(), tmp), 2);
    test_remove_tree(tmp);
    free(tmp);
}

// The rerun line names only tests and programs of the build, with a budget for a fresh
// machine: a test that runs run-tests.sh itself may write its own "failing NAME" into the
// check's account (TESTS_STATUS), as test_device_check once did ("--only test_g,...").
static void test_device_check_reruns_only_real_names(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char build[600], log[600];
    snprintf(build, sizeof build, "%s/build", tmp);
    snprintf(log, sizeof log, "%s/check.txt", tmp);
    assert_int_equal(test_run("mkdir -p '%s/tests'", build), 0);
    fake_context(build, false);
    test_write_script(build, "tests/test_leaks", "echo 'failing test_g' >>\"$TESTS_STATUS\"; echo '[  PASSED  ] 1 test(s).'");
    test_write_script(build, "tests/test_fails", "echo '[  FAILED  ] 1 test(s), listed below:'; exit 1");
    int rc = test_run("cd '%s' && %s OUT='%s/out' BUILD='%s' RESULTS_ROOT='%s/results' "
                      "bash scripts/device-check.sh 60 --only test_leaks,test_fails >'%s' 2>&1",
                      test_suite_root(), check_env(tmp), tmp, build, tmp, log);
    char *text = test_read_file(log, NULL);
    assert_non_null(text);
    printf("%s", strstr(text, "== device-check summary") ? strstr(text, "== device-check summary") : text);
    assert_int_equal(rc, 1);
    const char *line = strstr(text, "rerun what failed or did not finish");
    if (!line) fail_msg("no rerun line:\n%s", text);
    if (!strstr(line, "bash scripts/device-check.sh 60 --only test_fails\n"))
        fail_msg("the rerun line is not 'bash scripts/device-check.sh 60 --only test_fails':\n%s", line);
    assert_non_null(strstr(text, "'test_g' is no test or program of "));
    assert_non_null(strstr(line, "a fresh one takes ~120s to start"));
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

// Whether a GPU is expected does not rest on the CUDA probe alone: with nvidia-smi listing an
// H200 (a fake one on PATH, no GPU behind it), the real build's probe finding none fails the
// check at once, naming both; so do a device file and SUITE_EXPECT_GPU=1. Without any such
// evidence, the dry run passes.
static void test_device_check_fails_when_the_probe_and_the_evidence_disagree(void **state)
{
    (void)state;
    if (test_run("'%s/context' | grep -q '^no_gpu_reason='", test_build_dir()) != 0) {
        printf("skipped: this machine's CUDA probe finds a GPU (the test needs one that finds none)\n");
        return;
    }
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char fake[600], log[600];
    snprintf(fake, sizeof fake, "%s/fake", tmp);
    snprintf(log, sizeof log, "%s/check.txt", tmp);
    assert_int_equal(test_run("mkdir -p '%s'", fake), 0);
    test_write_script(fake, "nvidia-smi", "case \"$*\" in -L) echo 'GPU 0: NVIDIA H200 (UUID: GPU-00000000-fake)';; "
                                          "*) echo 'name, driver_version'; echo 'NVIDIA H200, 580.00';; esac");
    const char *env = check_env(tmp);
    // the evidence: a fake nvidia-smi first on PATH, the device file, the caller's word
    char with_smi[1400];
    snprintf(with_smi, sizeof with_smi, "%s PATH='%s':\"$PATH\"", env, fake);
    const char *evidence[][2] = {{with_smi, "nvidia-smi -L lists 'GPU 0: NVIDIA H200 (UUID: GPU-00000000-fake)'"},
                                 {"DEVICE_CHECK_NVIDIA_DEVICE=/dev/null", "/dev/null exists"},
                                 {"SUITE_EXPECT_GPU=1", "the caller set SUITE_EXPECT_GPU=1"}};
    for (size_t i = 0; i < sizeof evidence / sizeof evidence[0]; i++) {
        double t0 = test_now_s();
        int rc = test_run("cd '%s' && %s %s OUT='%s/out' BUILD='%s' RESULTS_ROOT='%s/results' "
                          "bash scripts/device-check.sh 120 >'%s' 2>&1",
                          test_suite_root(), env, evidence[i][0], tmp, test_build_dir(), tmp, log);
        double took = test_now_s() - t0;
        char *text = test_read_file(log, NULL);
        assert_non_null(text);
        printf("with %s: exit %d after %.1f s\n", evidence[i][1], rc, took);
        if (rc == 0 || !strstr(text, "FAILED: a GPU is expected (") || !strstr(text, evidence[i][1]) ||
            !strstr(text, "but the CUDA probe finds none (no CUDA device") || strstr(text, "== tests on the GPU"))
            fail_msg("device-check with %s: exit %d:\n%s", evidence[i][1], rc, text);
        free(text);
        assert_int_equal(test_run("tar -tzf '%s/out/device-check.tar.gz' | grep -q device-check.log", tmp), 0);
    }
    // no evidence at all: a dry run, which passes
    char build[600];
    snprintf(build, sizeof build, "%s/build", tmp);
    assert_int_equal(test_run("mkdir -p '%s/tests'", build), 0);
    fake_context(build, false);
    test_write_script(build, "tests/test_quick", "echo '[  PASSED  ] 1 test(s).'");
    int rc = test_run("cd '%s' && %s OUT='%s/out' BUILD='%s' RESULTS_ROOT='%s/results' "
                      "bash scripts/device-check.sh 120 --only test_quick >'%s' 2>&1",
                      test_suite_root(), env, tmp, build, tmp, log);
    char *text = test_read_file(log, NULL);
    assert_non_null(text);
    if (rc != 0 || !strstr(text, "DRY RUN (no CUDA device (fake)")) fail_msg("the dry run: exit %d:\n%s", rc, text);
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

// `device-check.sh --plan BUDGET` prints the plan on an H200, each phase and programme with
// its estimate, every practice program of the build among them, and says whether it fits:
// the default 490 s does, 200 s does not (exit 1).
static void test_device_check_plan_fits_its_budget(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char out[600];
    snprintf(out, sizeof out, "%s/plan.txt", tmp);
    int rc = test_run("cd '%s' && env -u DEVICE_CHECK_TEST_SHARE -u DEVICE_CHECK_TWIN_SHARE "
                      "-u DEVICE_CHECK_CPU_TEST_SHARE -u TWIN_CONFIGS bash scripts/device-check.sh --plan 490 >'%s' 2>&1",
                      test_suite_root(), out);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    printf("%s", text);
    assert_int_equal(rc, 0);
    const char *want[] = {"1. GPU tests (", "     test_core_infer ", "2. twin (2 configs x 2 rounds)",
                          "3. quick pass (", "     checkpoint ", "4. other tests", "a rerun on a fresh machine",
                          "the plan fits: "};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("the plan lacks '%s':\n%s", want[i], text);
    assert_null(strstr(text, "DOES NOT FIT"));
    // the new core-level tests right after the graph test, the heavy program tests last
    const char *graph = strstr(text, "     test_core_graph "), *infer = strstr(text, "     test_core_infer "),
               *fold = strstr(text, "     test_core_fold "), *fusion = strstr(text, "     test_fusion "),
               *last = strstr(text, "     test_bench_checkpoint "), *twin = strstr(text, "2. twin");
    assert_true(graph && infer && fold && fusion && last && twin);
    assert_true(graph < infer && infer < fold && fold < fusion && last < twin);
    assert_null(strstr(last + 1, "     test_"));
    // every practice program of the build has its estimate in the quick pass
    assert_int_equal(test_run("cd '%s' && for p in '%s'/bench_*; do n=${p##*/bench_}; "
                              "grep -q \"^     $n  *[0-9]*s \" '%s' || { echo \"no estimate for $n\"; exit 1; }; done",
                              test_suite_root(), test_build_dir(), out), 0);
    free(text);
    rc = test_run("cd '%s' && bash scripts/device-check.sh --plan 200 >'%s' 2>&1", test_suite_root(), out);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    if (rc != 1 || !strstr(text, "the plan DOES NOT FIT a budget of 200s")) fail_msg("--plan 200: exit %d:\n%s", rc, text);
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

// A signal to the check's process group (as timeout(1), a scheduler or Ctrl-C sends it)
// goes on to what runs, here a GPU test that hangs with a child of its own: the check
// writes its summary and archive of what finished within a few seconds, exits 128 + 15,
// and leaves nothing behind.
static void test_device_check_stops_on_a_signal(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char build[600], log[600], marker[600], sleeper[64], body[1200];
    snprintf(build, sizeof build, "%s/build", tmp);
    snprintf(log, sizeof log, "%s/check.txt", tmp);
    snprintf(marker, sizeof marker, "%s/hung", tmp);
    snprintf(sleeper, sizeof sleeper, "sleep %d.125", 700 + (int)(getpid() % 1000));
    assert_int_equal(test_run("mkdir -p '%s/tests'", build), 0);
    fake_context(build, true);
    // two of the GPU tests: the first passes, the second hangs
    test_write_script(build, "tests/test_core_gpu", "echo '[  PASSED  ] 3 test(s).'");
    snprintf(body, sizeof body, "touch '%s'; %s & wait", marker, sleeper);
    test_write_script(build, "tests/test_layers_gpu", body);
    test_write_script(build, "bench_a", "true");
    const char *env = check_env(tmp);
    double t0 = 0, took = 0;
    int rc = test_run("cd '%s' && { %s OUT='%s/out' BUILD='%s' RESULTS_ROOT='%s/results' "
                      "setsid bash scripts/device-check.sh 120 >'%s' 2>&1 & p=$!; i=0; "
                      "while [ ! -e '%s' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; "
                      "date +%%s.%%N >'%s/signalled'; kill -TERM -$p; wait $p; }",
                      test_suite_root(), env, tmp, build, tmp, log, marker, tmp);
    char *when = test_read_in(tmp, "signalled");
    assert_non_null(when);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    t0 = atof(when);
    took = ts.tv_sec + ts.tv_nsec * 1e-9 - t0;
    free(when);
    char *text = test_read_file(log, NULL);
    assert_non_null(text);
    printf("device-check: exit %d %.1f s after SIGTERM to its group\n", rc, took);
    assert_int_equal(rc, 143);
    if (took > 10) fail_msg("took %.1f s after the signal:\n%s", took, text);
    const char *want[] = {"device-check: SIGTERM: stopping what runs", "=== test_core_gpu: exit 0",
                          "tests stopped: test_layers_gpu (SIGTERM", "stopped by SIGTERM",
                          "twin: not run (stopped by SIGTERM)", "quick pass: not run (stopped by SIGTERM)",
                          "leftover processes: none", "--only test_layers_gpu,twin,a", "results: "};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("device-check output lacks '%s':\n%s", want[i], text);
    free(text);
    // nothing of the suite is left: the hung test's child went with it
    if (test_run("pgrep -f '^%s$' >/dev/null", sleeper) == 0) {
        test_run("for p in $(pgrep -f '^%s$'); do kill -KILL $p; done", sleeper);
        fail_msg("'%s' of the stopped test still runs", sleeper);
    }
    // the archive holds the log, summary included
    assert_int_equal(test_run("tar -xzOf '%s/out/device-check.tar.gz' device-check.log | "
                              "grep -q '^== device-check summary'", tmp), 0);
    test_remove_tree(tmp);
    free(tmp);
}

// scripts/run-tests.sh stopped from outside (the GPU check's deadline: timeout(1) sends
// SIGTERM to run-tests.sh alone) stops the running test's whole process group, which
// used to run on until TEST_TIMEOUT beside what came next; it names that test and those
// not reached. It also runs named programs in the order given, or all but TESTS_SKIP.
static void test_run_tests_stops_the_running_test(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char build[600], out[700], sleeper[64];
    snprintf(build, sizeof build, "%s/build", tmp);
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    snprintf(sleeper, sizeof sleeper, "sleep %d.25", 700 + (int)(getpid() % 1000));
    assert_int_equal(test_run("mkdir -p '%s/tests'", build), 0);
    char tests_dir[700], body[200];
    snprintf(tests_dir, sizeof tests_dir, "%s/tests", build);
    test_write_script(tests_dir, "test_a", "echo '[  PASSED  ] 2 test(s).'");
    snprintf(body, sizeof body, "%s & wait", sleeper);  // the test's own child: only its group stops it
    test_write_script(tests_dir, "test_b", body);
    test_write_script(tests_dir, "test_c", "echo '[  PASSED  ] 1 test(s).'");
    int rc = test_run("cd '%s' && TEST_JOBS=1 TESTS_STATUS='%s/status' timeout 3 bash scripts/run-tests.sh '%s' "
                      ">'%s' 2>&1", test_suite_root(), tmp, build, out);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    printf("%s", text);
    assert_int_equal(rc, 124);
    const char *want[] = {"tests stopped: test_b (SIGTERM", "tests not reached: test_c", "tests: 2 passed, 0 failed"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("run-tests output lacks '%s':\n%s", want[i], text);
    free(text);
    // the caller's own account, apart from the tests' output
    char status[700];
    snprintf(status, sizeof status, "%s/status", tmp);
    text = test_read_file(status, NULL);
    assert_non_null(text);
    if (strcmp(text, "stopped test_b\nnot_reached test_c\n") != 0) fail_msg("TESTS_STATUS holds:\n%s", text);
    free(text);
    // Nothing of test_b may be left (5 s: the group's SIGTERM is immediate).
    int left = 1;
    for (int i = 0; i < 50 && left; i++) {
        left = test_run("pgrep -f '^%s$' >/dev/null", sleeper) == 0;
        if (left) usleep(100 * 1000);
    }
    if (left) {
        test_run("for p in $(pgrep -f '^%s$'); do kill $p; done", sleeper);
        fail_msg("'%s' of the stopped test still runs 5 s after the deadline", sleeper);
    }
    // Named programs, in that order; TESTS_SKIP leaves some out.
    assert_int_equal(test_run("cd '%s' && TEST_JOBS=1 bash scripts/run-tests.sh '%s' test_c test_a >'%s' 2>&1",
                              test_suite_root(), build, out), 0);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    char *c = strstr(text, "=== test_c"), *a = strstr(text, "=== test_a");
    if (!c || !a || c > a || strstr(text, "test_b") || !strstr(text, "tests: 3 passed"))
        fail_msg("run-tests test_c test_a:\n%s", text);
    free(text);
    assert_int_equal(test_run("cd '%s' && TESTS_SKIP='test_b' bash scripts/run-tests.sh '%s' >'%s' 2>&1",
                              test_suite_root(), build, out), 0);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    if (strstr(text, "test_b") || !strstr(text, "tests: 3 passed")) fail_msg("TESTS_SKIP=test_b:\n%s", text);
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

// With TEST_JOBS=2, two test programs run at once, each one's output whole at its end, and
// the counts are those of them all; stopped from outside, both running ones stop (their
// groups too) and the rest are named as not reached.
static void test_run_tests_runs_two_at_once(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);
    char tests_dir[600], out[700], marker[700], seen[700], sleeper_b[64], sleeper_d[64], body[2400];
    snprintf(tests_dir, sizeof tests_dir, "%s/build/tests", tmp);
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    snprintf(marker, sizeof marker, "%s/a_running", tmp);
    snprintf(seen, sizeof seen, "%s/b_saw_a", tmp);
    int salt = 700 + (int)(getpid() % 1000);
    snprintf(sleeper_b, sizeof sleeper_b, "sleep %d.5", salt);
    snprintf(sleeper_d, sizeof sleeper_d, "sleep %d.75", salt);
    assert_int_equal(test_run("mkdir -p '%s'", tests_dir), 0);
    // a and b meet: a holds a marker until b has seen it (5 s at most each), and b passes
    // only when it saw the marker, that is when the two ran at the same time (one after the
    // other, b would find no marker and exit 5), however busy the machine is.
    snprintf(body, sizeof body, "touch '%s'; i=0; while [ ! -e '%s' ] && [ $i -lt 50 ]; do sleep 0.1; "
             "i=$((i + 1)); done; rm -f '%s'; echo '[  PASSED  ] 2 test(s).'", marker, seen, marker);
    test_write_script(tests_dir, "test_a", body);
    snprintf(body, sizeof body, "i=0; while [ ! -e '%s' ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; "
             "[ -e '%s' ] || exit 5; touch '%s'; echo '[  PASSED  ] 3 test(s).'", marker, marker, seen);
    test_write_script(tests_dir, "test_b", body);
    test_write_script(tests_dir, "test_c", "echo '[  PASSED  ] 1 test(s).'");
    test_write_script(tests_dir, "test_e", "echo '[  PASSED  ] 1 test(s).'");
    test_write_script(tests_dir, "test_d", "exit 3");  // (a FAILED line would count in this test's own log)
    int rc = test_run("cd '%s' && TEST_JOBS=2 bash scripts/run-tests.sh '%s/build' test_a test_b test_c test_d "
                      ">'%s' 2>&1", test_suite_root(), tmp, out);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    printf("%s", text);
    assert_int_equal(rc, 1);  // test_d failed
    const char *want[] = {"=== test_a\n[  PASSED  ] 2 test(s).\n=== test_a: exit 0",
                          "=== test_b\n[  PASSED  ] 3 test(s).\n=== test_b: exit 0", "failing: test_d (exit status 3)",
                          "tests: 6 passed, 1 failed, 0 skipped"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("run-tests output lacks '%s':\n%s", want[i], text);
    free(text);
    // Stopped from outside while b and d sleep: both named, both groups gone, e not reached.
    // b ignores SIGTERM, so the stop waits its 3 s for b and then kills b's group; a second
    // SIGTERM comes during that wait, as timeout(1) sends one to run-tests and then one to its
    // whole group (a second one used to end run-tests unprinted: 7 in 25 runs on a busy machine).
    test_write_script(tests_dir, "test_a", "echo '[  PASSED  ] 2 test(s).'");
    snprintf(body, sizeof body, "trap '' TERM; %s", sleeper_b);
    test_write_script(tests_dir, "test_b", body);
    snprintf(body, sizeof body, "%s & wait", sleeper_d);
    test_write_script(tests_dir, "test_d", body);
    rc = test_run("cd '%s' && { TEST_JOBS=2 TESTS_STATUS='%s/status' bash scripts/run-tests.sh '%s/build' "
                  "test_a test_b test_c test_d test_e >'%s' 2>&1 & p=$!; sleep 3; kill -TERM $p; sleep 1; "
                  "kill -TERM $p 2>/dev/null; wait $p; }",
                  test_suite_root(), tmp, tmp, out);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    printf("%s", text);
    assert_int_equal(rc, 143);
    const char *stopped[] = {"tests stopped: test_b (SIGTERM", "tests stopped: test_d (SIGTERM",
                             "tests not reached: test_e", "tests: 3 passed, 0 failed"};
    for (size_t i = 0; i < sizeof stopped / sizeof stopped[0]; i++)
        if (!strstr(text, stopped[i])) fail_msg("run-tests output lacks '%s':\n%s", stopped[i], text);
    free(text);
    int left = 1;
    for (int i = 0; i < 50 && left; i++) {
        left = test_run("pgrep -f '^(%s|%s)$' >/dev/null", sleeper_b, sleeper_d) == 0;
        if (left) usleep(100 * 1000);
    }
    if (left) {
        test_run("for p in $(pgrep -f '^(%s|%s)$'); do kill -KILL $p; done", sleeper_b, sleeper_d);  // b's ignores TERM
        fail_msg("a sleeper of the stopped tests still runs 5 s after the deadline");
    }
    // A sanitizer report (what tests/sanitizer/report_hook.c writes) fails the program that
    // made it, not the one running beside it.
    test_write_script(tests_dir, "test_g", "echo 'SUMMARY: AddressSanitizer: fake' >>\"$SUITE_SANITIZER_REPORTS/summaries\"; "
                                           "echo '[  PASSED  ] 1 test(s).'");
    test_write_script(tests_dir, "test_h", "sleep 0.5; echo '[  PASSED  ] 1 test(s).'");
    rc = test_run("cd '%s' && TEST_JOBS=2 bash scripts/run-tests.sh '%s/build' test_h test_g >'%s' 2>&1",
                  test_suite_root(), tmp, out);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    printf("%s", text);
    assert_int_equal(rc, 1);
    if (!strstr(text, "failing: test_g (sanitizer reports above)") || strstr(text, "failing: test_h") ||
        !strstr(text, "tests: 2 passed, 1 failed"))
        fail_msg("a report of test_g beside test_h:\n%s", text);
    free(text);
    test_remove_tree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrapper_finds_libraries_in_site_packages),
        cmocka_unit_test(test_wrapper_stages_runtime_only_where_needed),
        cmocka_unit_test(test_chart_tests_skip_without_gnuplot),
        cmocka_unit_test(test_tests_pass_in_the_checks_environment),
        cmocka_unit_test(test_device_check_keeps_one_deadline),
        cmocka_unit_test(test_device_check_reruns_only_real_names),
        cmocka_unit_test(test_device_check_fails_when_the_probe_and_the_evidence_disagree),
        cmocka_unit_test(test_device_check_plan_fits_its_budget),
        cmocka_unit_test(test_device_check_stops_on_a_signal),
        cmocka_unit_test(test_run_tests_stops_the_running_test),
        cmocka_unit_test(test_run_tests_runs_two_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
