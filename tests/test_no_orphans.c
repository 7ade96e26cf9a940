// test_no_orphans.c: a distributed run stopped by pid leaves nothing running.
// `train --nproc-per-node 2` (CPU backend: mpirun and two MPI ranks) and bench_ddp (its
// benchmark process popen()s a launcher, which runs mpirun and the ranks) are started
// in a session of their own, with a marker in their environment that every process they
// start inherits; once both ranks are up, the top process alone gets SIGTERM or SIGINT
// (as `kill PID` or timeout(1) of a parent would send it), and within 5 s no process with
// the marker may be left. Also SIGKILL of the launcher: the ranks die with it
// (PR_SET_PDEATHSIG), and a forked-rank launch (the GPU path's spawner, here with
// `sleep` as the rank) forwards the signal to its ranks' process groups.
// Without mpirun (the GPU machine) the MPI cases skip there (SUITE_GPU_CHECK=1), and
// fail elsewhere.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/spawn.h"
#include "kernels/error.h"
#include "tests/support.h"

#define MARK_VAR "SUITE_ORPHAN_MARK"

// Reads /proc/PID/NAME (NUL-separated fields as spaces when `spaces`); "" if unreadable.
static void read_proc(int pid, const char *name, char *out, size_t size, bool spaces)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", pid, name);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t n = fread(out, 1, size - 1, f);
    fclose(f);
    out[n] = '\0';
    if (spaces)
        for (size_t i = 0; i + 1 < n; i++) if (out[i] == '\0') out[i] = ' ';
}

// Live (not zombie) processes whose environment holds MARK_VAR=mark and whose command
// line contains `has` (NULL: any) and none of `lacks` ("a|b"; NULL: none). Their pids go to pids.
static int find_marked(const char *mark, const char *has, const char *lacks, int *pids, int max)
{
    char want[128];
    int wlen = snprintf(want, sizeof want, MARK_VAR "=%s", mark);
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    struct dirent *e;
    static char env[1 << 16], cmd[4096], stat[512];
    while ((e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid == getpid()) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/environ", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(env, 1, sizeof env - 1, f);
        fclose(f);
        bool marked = false;
        for (size_t i = 0; i < len && !marked; i += strlen(env + i) + 1) {
            env[len] = '\0';
            marked = strncmp(env + i, want, (size_t)wlen) == 0 && env[i + (size_t)wlen] == '\0';
        }
        if (!marked) continue;
        read_proc(pid, "stat", stat, sizeof stat, false);
        const char *state = strrchr(stat, ')');
        if (state && state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X')) continue;  // dead
        read_proc(pid, "cmdline", cmd, sizeof cmd, true);
        if (has && !strstr(cmd, has)) continue;
        bool excluded = false;  // lacks: "a|b" excludes a command line with a or b
        for (const char *l = lacks; l && *l && !excluded;) {
            size_t k = strcspn(l, "|");
            char word[64];
            snprintf(word, sizeof word, "%.*s", (int)k, l);
            excluded = strstr(cmd, word) != NULL;
            l += k + (l[k] == '|');
        }
        if (excluded) continue;
        if (n < max) pids[n] = pid;
        n++;
    }
    closedir(d);
    return n;
}

// Starts argv in a session of its own (the test's signals stay the test's) with the
// marker set, output to log; returns its pid.
static pid_t start_marked(char *const argv[], const char *mark, const char *log)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setsid();
        setenv(MARK_VAR, mark, 1);
        if (!freopen(log, "w", stdout) || !freopen(log, "a", stderr)) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

// Kills everything still marked (so that a failing test leaves nothing either) and
// fails with the list when anything was left after `grace` seconds.
static void expect_none_left(const char *mark, double grace, const char *what)
{
    int pids[64];
    double until = test_now_s() + grace;
    int n;
    while ((n = find_marked(mark, NULL, NULL, pids, 64)) > 0 && test_now_s() < until) usleep(100 * 1000);
    if (n == 0) return;
    char list[4096] = "";
    size_t used = 0;
    for (int i = 0; i < n && i < 64; i++) {
        char cmd[512];
        read_proc(pids[i], "cmdline", cmd, sizeof cmd, true);
        used += (size_t)snprintf(list + used, used < sizeof list ? sizeof list - used : 0, "\n  pid %d: %s",
                                 pids[i], cmd);
        kill(pids[i], SIGKILL);
    }
    fail_msg("%s: %d process(es) still running %.0f s later:%s", what, n, grace, list);
}

static bool have_mpirun(void)
{
    if (test_run("command -v mpirun >/dev/null 2>&1") == 0) return true;
    if (error_in_gpu_check()) {
        printf("skipped: no mpirun on this machine (the CPU ranks need Open MPI)\n");
        return false;
    }
    fail_msg("mpirun is missing: install openmpi-bin (only the GPU check may skip this)");
    return false;
}

// Starts argv, waits for `ranks` processes matching has/lacks, sends sig to the top
// process alone, and expects nothing marked within 5 s.
static void kill_mid_run(char *const argv[], const char *has, const char *lacks, int ranks, int sig,
                         const char *what)
{
    char mark[64], log[128];
    snprintf(mark, sizeof mark, "%d-%ld", (int)getpid(), (long)(test_now_s() * 1e3));
    snprintf(log, sizeof log, "/tmp/test_no_orphans_%d.log", (int)getpid());
    pid_t top = start_marked(argv, mark, log);
    int pids[8];
    double until = test_now_s() + 90;  // mpirun's start on a loaded 2-core machine takes seconds
    while (find_marked(mark, has, lacks, pids, 8) < ranks && test_now_s() < until) {
        int status;
        if (waitpid(top, &status, WNOHANG) == top) {
            char *text = test_read_file(log, NULL);
            fail_msg("%s ended (status %d) before its %d ranks were up:\n%s", what, status, ranks, text ? text : "");
        }
        usleep(100 * 1000);
    }
    int up = find_marked(mark, has, lacks, pids, 8);
    if (up < ranks) {
        expect_none_left(mark, 0, what);
        fail_msg("%s: only %d of %d ranks came up in 90 s", what, up, ranks);
    }
    usleep(300 * 1000);  // let the ranks get into their work
    double t0 = test_now_s();
    assert_int_equal(kill(top, sig), 0);
    int status = 0;
    while (waitpid(top, &status, 0) < 0) {}
    printf("%s: %d ranks up; %s to pid %d alone: it ended after %.2f s (status %d)\n", what, up, strsignal(sig),
           (int)top, test_now_s() - t0, status);
    expect_none_left(mark, 5.0, what);
    printf("%s: no process left after %.2f s\n", what, test_now_s() - t0);
    unlink(log);
}

static void test_train_nproc_sigterm(void **state)
{
    (void)state;
    if (!have_mpirun()) { skip(); return; }
    char train[600];
    snprintf(train, sizeof train, "%s/train", test_build_dir());
    char *argv[] = {train, "--backend", "cpu", "--data", "tensor", "--preset", "tiny", "--steps", "1000000",
                    "--log-every", "100000", "--eval-batches", "0", "--nproc-per-node", "2", NULL};
    kill_mid_run(argv, "--ddp", "mpirun", 2, SIGTERM, "train --nproc-per-node 2 (SIGTERM)");
}

static void test_train_nproc_sigint(void **state)
{
    (void)state;
    if (!have_mpirun()) { skip(); return; }
    char train[600];
    snprintf(train, sizeof train, "%s/train", test_build_dir());
    char *argv[] = {train, "--backend", "cpu", "--data", "tensor", "--preset", "tiny", "--steps", "1000000",
                    "--log-every", "100000", "--eval-batches", "0", "--nproc-per-node", "2", NULL};
    kill_mid_run(argv, "--ddp", "mpirun", 2, SIGINT, "train --nproc-per-node 2 (SIGINT)");
}

// The launcher SIGKILLed: nothing can be forwarded; mpirun and the ranks die with it.
static void test_train_nproc_sigkill(void **state)
{
    (void)state;
    if (!have_mpirun()) { skip(); return; }
    char train[600];
    snprintf(train, sizeof train, "%s/train", test_build_dir());
    char *argv[] = {train, "--backend", "cpu", "--data", "tensor", "--preset", "tiny", "--steps", "1000000",
                    "--log-every", "100000", "--eval-batches", "0", "--nproc-per-node", "2", NULL};
    kill_mid_run(argv, "--ddp", "mpirun", 2, SIGKILL, "train --nproc-per-node 2 (SIGKILL)");
}

// bench_ddp's benchmark process (not the launcher it popen()s) gets the signal.
static void test_bench_ddp_sigterm(void **state)
{
    (void)state;
    if (!have_mpirun()) { skip(); return; }
    char bench[600];
    snprintf(bench, sizeof bench, "%s/bench_ddp", test_build_dir());
    char *argv[] = {bench, "--benchmark_filter=^ddp_scaling/ddp/.*devices:2/", "--steps=10000",
                    "--benchmark_repetitions=1", NULL};
    // the ranks: --ddp-worker without --nproc-per-node (the launcher) or mpirun
    kill_mid_run(argv, "--ddp-worker", "nproc-per-node|mpirun", 2, SIGTERM, "bench_ddp (SIGTERM)");
}

// The forked-rank spawner (the GPU path: each rank in a process group of its own),
// called here directly with a shell for the rank: `sleep & wait` gives the rank a child
// that only a signal to the rank's whole group reaches.
static pid_t start_spawner(const char *mark, const char *rank_script)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setsid();
        setenv(MARK_VAR, mark, 1);
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        char *argv[] = {"/bin/sh", "-c", (char *)rank_script, NULL};
        DistSpawnConfig cfg = {.nproc = 2, .master_port = 29999, .grace_ms = 1000};
        int rc = dist_spawn_local(&cfg, argv);
        _exit(rc < 0 ? 1 : rc);
    }
    return pid;
}

static void spawner_killed(int sig, const char *rank_script, int want_alive, const char *what)
{
    char mark[64];
    snprintf(mark, sizeof mark, "fork-%d-%ld", (int)getpid(), (long)(test_now_s() * 1e3));
    pid_t top = start_spawner(mark, rank_script);
    int pids[8];
    double until = test_now_s() + 20;
    while (find_marked(mark, "sleep", NULL, pids, 8) < want_alive && test_now_s() < until) usleep(50 * 1000);
    int up = find_marked(mark, "sleep", NULL, pids, 8);
    if (up < want_alive) {
        expect_none_left(mark, 0, what);
        fail_msg("%s: %d of %d sleeping processes came up", what, up, want_alive);
    }
    double t0 = test_now_s();
    assert_int_equal(kill(top, sig), 0);
    int status = 0;
    while (waitpid(top, &status, 0) < 0) {}
    printf("%s: %s to the spawner alone (exit %d)\n", what, strsignal(sig),
           WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    expect_none_left(mark, 5.0, what);
    if (sig != SIGKILL) assert_int_equal(WEXITSTATUS(status), 128 + sig);  // it says why it stopped
    printf("%s: no process left after %.2f s\n", what, test_now_s() - t0);
}

static void test_forked_ranks_get_the_signal(void **state)
{
    (void)state;
    // each rank (sh) and its child (sleep): 2 ranks x sh + sleep, the sleeps counted
    spawner_killed(SIGTERM, "sleep 1000 & wait", 2, "forked ranks (SIGTERM)");
    spawner_killed(SIGINT, "exec sleep 1000", 2, "forked ranks (SIGINT)");
}

static void test_forked_ranks_die_with_the_spawner(void **state)
{
    (void)state;
    spawner_killed(SIGKILL, "exec sleep 1000", 2, "forked ranks (SIGKILL)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_nproc_sigterm),
        cmocka_unit_test(test_train_nproc_sigint),
        cmocka_unit_test(test_train_nproc_sigkill),
        cmocka_unit_test(test_bench_ddp_sigterm),
        cmocka_unit_test(test_forked_ranks_get_the_signal),
        cmocka_unit_test(test_forked_ranks_die_with_the_spawner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
