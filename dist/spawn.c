// spawn.c: the local launcher (see spawn.h).
#include "dist/spawn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/env.h"
#include "kernels/error.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int exit_code(int status)
{
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

// CPU ranks: mpirun is the launcher (the children are MPI ranks). --bind-to none: Open
// MPI binds each rank to one core by default (np <= 2), which puts DDP's communication
// thread on the core its backward runs on, so the "overlap" only time-slices; unbound,
// the ranks' threads (dist_cpus_per_rank each, plus the communication thread) spread over
// the machine's cores as the scheduler sees fit.
static int run_mpirun(const DistSpawnConfig *cfg, char *const argv[])
{
    int argc = 0;
    while (argv[argc]) argc++;
    char np[16];
    snprintf(np, sizeof np, "%d", cfg->nproc);
    const char *head[] = {"mpirun", "--oversubscribe", "--bind-to", "none", "-np", np, NULL, NULL};
    int h = 6;
    if (geteuid() == 0) head[h++] = "--allow-run-as-root";
    char **args = calloc((size_t)(h + argc + 1), sizeof *args);
    if (!args) return error_set(ERROR_OUT_OF_MEMORY, "spawn: out of memory");
    for (int i = 0; i < h; i++) args[i] = (char *)head[i];
    for (int i = 0; i < argc; i++) args[h + i] = argv[i];
    pid_t pid = fork();
    if (pid < 0) { free(args); return error_set(ERROR_LIBRARY, "spawn: fork: %s", strerror(errno)); }
    if (pid == 0) {
        execvp("mpirun", args);
        fprintf(stderr, "spawn: cannot run mpirun (install openmpi-bin): %s\n", strerror(errno));
        _exit(127);
    }
    free(args);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return exit_code(status);
}

int dist_spawn_local(const DistSpawnConfig *cfg, char *const argv[])
{
    if (cfg->nproc < 1) return error_set(ERROR_BAD_USAGE, "--nproc-per-node must be >= 1 (got %d)", cfg->nproc);
    if (!argv || !argv[0]) return error_set(ERROR_BAD_USAGE, "spawn: no command");
    if (cfg->use_mpirun) return run_mpirun(cfg, argv);
    const char *addr = cfg->master_addr ? cfg->master_addr : getenv("MASTER_ADDR");
    if (!addr) addr = "127.0.0.1";
    int port = cfg->master_port;
    if (port == 0 && getenv("MASTER_PORT") && dist_parse_int(getenv("MASTER_PORT"), "MASTER_PORT", 1, 65535, &port) != 0)
        return -1;
    if (port == 0) port = 29500;
    pid_t pids[cfg->nproc];
    int started = 0;
    for (; started < cfg->nproc; started++) {
        pid_t pid = fork();
        if (pid < 0) break;
        if (pid == 0) {
            char v[32];
            int r = started;
            setpgid(0, 0);  // SIGTERM reaches the rank's own children too
            snprintf(v, sizeof v, "%d", r); setenv("RANK", v, 1); setenv("LOCAL_RANK", v, 1);
            snprintf(v, sizeof v, "%d", cfg->nproc); setenv("WORLD_SIZE", v, 1); setenv("LOCAL_WORLD_SIZE", v, 1);
            snprintf(v, sizeof v, "%d", port); setenv("MASTER_PORT", v, 1);
            setenv("MASTER_ADDR", addr, 1);
            execvp(argv[0], argv);
            fprintf(stderr, "rank %d: cannot run %s: %s\n", r, argv[0], strerror(errno));
            _exit(127);
        }
        setpgid(pid, pid);  // as the child does: no window where a kill misses it
        pids[started] = pid;
    }
    int first_failure = 0, alive = started;
    double kill_at = 0;
    if (started < cfg->nproc) {
        first_failure = 1;
        error_set(ERROR_LIBRARY, "spawn: fork of rank %d failed: %s", started, strerror(errno));
        for (int i = 0; i < started; i++) kill(-pids[i], SIGTERM);
        kill_at = now_ms() + cfg->grace_ms;
    }
    while (alive > 0) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, kill_at > 0 ? WNOHANG : 0);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) break;
        if (pid == 0) {  // survivors during the grace period
            if (now_ms() >= kill_at) {
                for (int i = 0; i < started; i++) if (pids[i] > 0) kill(-pids[i], SIGKILL);
                kill_at = now_ms() + 1e9;
            }
            usleep(20 * 1000);
            continue;
        }
        int rank = -1;
        for (int i = 0; i < started; i++) if (pids[i] == pid) { rank = i; pids[i] = -1; }
        if (rank < 0) continue;
        alive--;
        int code = exit_code(status);
        if (code != 0 && first_failure == 0) {
            first_failure = code;
            fprintf(stderr, "spawn: rank %d %s %d; stopping the other ranks\n", rank,
                    WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : code);
            for (int i = 0; i < started; i++) if (pids[i] > 0) kill(-pids[i], SIGTERM);
            kill_at = now_ms() + (cfg->grace_ms > 0 ? cfg->grace_ms : 3000);
        }
    }
    return first_failure;
}
