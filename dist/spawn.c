// spawn.c: the local launcher (see spawn.h).
//
// Nothing the launcher starts may outlive it. Three ways a run used to leave ranks behind,
// and what closes each:
// - SIGINT/SIGTERM to the launcher's pid alone (a `kill PID`, timeout(1) of a parent): the
//   GPU ranks sit in process groups of their own, and mpirun was never told. The launcher
//   catches both and forwards them to every rank's group (or to mpirun, which stops its
//   ranks), then waits for them as after a failure: SIGKILL after the grace period.
// - SIGKILL of the launcher (nothing to catch): every rank, and mpirun, is started with
//   PR_SET_PDEATHSIG, so the kernel sends it SIGTERM when the launcher dies; MPI ranks
//   (mpirun's children) do the same with mpirun as their parent (dist/env.c, through
//   DIST_SPAWN_LAUNCHER in their environment).
// - The program that started the launcher is gone (bench_ddp popen()s `sh -c launcher`;
//   a kill of bench_ddp leaves sh and the launcher running): when the launcher's stdout is
//   a pipe and nobody reads it any more, it stops its ranks as SIGPIPE would stop a
//   program that wrote there.
//
// The ranks get only the launcher variables the launcher sets: inherited SLURM, torchrun,
// Open MPI and PMI(x) ones (dist_env_is_launcher_var) describe the process that inherited
// them. Inside an sbatch script (SLURM_PROCID=0, SLURM_NTASKS=4 for the script itself) or
// under a parent torchrun (RANK, WORLD_SIZE) they made every rank take itself for rank 0 of
// that world, and mpirun for a job step of the allocation.
#include "dist/spawn.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/env.h"
#include "kernels/error.h"

extern char **environ;

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

// ---- forwarding the launcher's signals -----------------------------------------------
// The handler reads what the main code writes: the targets are set before the handlers
// are installed and each slot is one aligned pid_t, cleared (0) once that child is reaped.
#define FORWARD_MAX 1024
static volatile pid_t forward_to[FORWARD_MAX];  // >0: the pid of a child to signal
static volatile sig_atomic_t forward_count;
static volatile sig_atomic_t forward_as_group;  // 1: each target leads its own process group
static volatile sig_atomic_t forwarded_signal;

// Sends sig to every child not yet reaped (async-signal-safe: the handler uses it).
static void signal_children(int sig)
{
    for (int i = 0; i < forward_count; i++) {
        pid_t p = forward_to[i];
        if (p > 0) kill(forward_as_group ? -p : p, sig);
    }
}

static void forward_signal(int sig)
{
    int saved = errno;
    forwarded_signal = sig;
    signal_children(sig);
    errno = saved;
}

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_FORWARDED (int)(sizeof forwarded_signals / sizeof forwarded_signals[0])

typedef struct {
    struct sigaction old[N_FORWARDED];
    bool installed[N_FORWARDED];
} Forwarding;

// Catches SIGINT, SIGTERM and SIGHUP, except one the launcher was started with ignored
// (a background job's SIGINT): its ranks inherit that choice. No SA_RESTART: a blocked
// wait returns, so the grace period starts at once.
static void forwarding_start(Forwarding *f)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    forwarded_signal = 0;
    for (int i = 0; i < N_FORWARDED; i++) {
        f->installed[i] = false;
        if (sigaction(forwarded_signals[i], NULL, &f->old[i]) != 0 || f->old[i].sa_handler == SIG_IGN) continue;
        f->installed[i] = sigaction(forwarded_signals[i], &sa, NULL) == 0;
    }
}

static void forwarding_stop(Forwarding *f)
{
    for (int i = 0; i < N_FORWARDED; i++)
        if (f->installed[i]) sigaction(forwarded_signals[i], &f->old[i], NULL);
    forward_count = 0;
}

// In a forked child before exec: default dispositions for the caught signals (exec would
// reset them too, but a signal in between must not run the launcher's handler here), and
// die with the launcher. Returns false if the launcher is already gone.
static bool child_die_with_launcher(pid_t launcher)
{
    for (int i = 0; i < N_FORWARDED; i++) {
        struct sigaction old;
        if (sigaction(forwarded_signals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            signal(forwarded_signals[i], SIG_DFL);
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    return getppid() == launcher;  // it died before the prctl: nobody would tell us
}

// The environment of a child: ours without launcher variables, then `extra` (n "NAME=value"
// strings, the caller's). A malloc'd NULL-terminated array (the strings are not copied);
// NULL when out of memory.
static char **child_environ(char *const extra[], int n)
{
    int count = 0;
    for (char **e = environ; *e; e++) count++;
    char **env = malloc((size_t)(count + n + 1) * sizeof *env);
    if (!env) return NULL;
    int k = 0;
    for (char **e = environ; *e; e++)
        if (!dist_env_is_launcher_var(*e)) env[k++] = *e;
    for (int i = 0; i < n; i++) env[k++] = extra[i];
    env[k] = NULL;
    return env;
}

// MASTER_ADDR or MASTER_PORT from the environment for our ranks, unless it belongs to a
// world this process is a rank of (torchrun sets both beside RANK and WORLD_SIZE): NULL then.
static const char *own_master_var(const char *name)
{
    if (getenv("RANK") || getenv("WORLD_SIZE") || getenv("TORCHELASTIC_RUN_ID")) return NULL;
    return getenv(name);
}

// True when stdout is a pipe with no reader left: whoever started us has gone.
static bool output_abandoned(bool stdout_is_pipe)
{
    if (!stdout_is_pipe) return false;
    struct pollfd p = {.fd = STDOUT_FILENO, .events = 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

static bool stdout_is_pipe(void)
{
    struct stat st;
    return fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode);
}

// Waits for the n children in forward_to (their slots are cleared as they are reaped);
// stops the rest (SIGTERM to each, SIGKILL after grace_ms) at the first failure, at a
// forwarded signal or when our output is abandoned. Returns the first failure's exit code,
// 128 + the forwarded signal when that came first, or 0.
static int wait_for_children(int n, int grace_ms, const char *what, int first_failure)
{
    int alive = n;
    double kill_at = first_failure ? now_ms() + grace_ms : 0;
    bool pipe_out = stdout_is_pipe(), stopping = first_failure != 0;
    while (alive > 0) {
        if (!stopping && (forwarded_signal || output_abandoned(pipe_out))) {
            stopping = true;
            if (!forwarded_signal) {
                fprintf(stderr, "spawn: nobody reads our output any more; stopping the %s\n", what);
                signal_children(SIGTERM);
            }
            if (first_failure == 0) first_failure = 128 + (forwarded_signal ? forwarded_signal : SIGPIPE);
            kill_at = now_ms() + grace_ms;
        }
        // A short poll, not a blocking wait: a signal can land between a check and the
        // wait, and the abandoned pipe has no event of its own to wake us.
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) break;  // ECHILD: nothing left
        if (pid == 0) {
            if (stopping && now_ms() >= kill_at) {
                signal_children(SIGKILL);
                kill_at = now_ms() + 1e9;
            }
            struct timespec nap = {0, 20 * 1000 * 1000};
            nanosleep(&nap, NULL);  // a signal cuts it short
            continue;
        }
        int slot = -1;
        for (int i = 0; i < n; i++) if (forward_to[i] == pid) slot = i;
        if (slot < 0) continue;
        forward_to[slot] = 0;
        alive--;
        int code = exit_code(status);
        if (code != 0 && first_failure == 0) {
            first_failure = code;
            if (n > 1 && !stopping) {
                fprintf(stderr, "spawn: rank %d %s %d; stopping the other ranks\n", slot,
                        WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                        WIFSIGNALED(status) ? WTERMSIG(status) : code);
                stopping = true;
                signal_children(SIGTERM);
                kill_at = now_ms() + grace_ms;
            }
        }
    }
    return first_failure;
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
    char launcher_var[48] = "DIST_SPAWN_LAUNCHER=";  // the child writes its pid in (after fork)
    char *extra[] = {launcher_var};
    char **env = child_environ(extra, 1);
    if (!env) {
        free(args);
        return error_set(ERROR_OUT_OF_MEMORY, "spawn: out of memory");
    }
    pid_t launcher = getpid();
    Forwarding fw;
    forward_as_group = 0;  // mpirun stops its own ranks (they sit in groups of their own)
    forward_to[0] = 0;
    forward_count = 1;
    forwarding_start(&fw);
    pid_t pid = fork();
    if (pid < 0) {
        forwarding_stop(&fw);
        free(args);
        free(env);
        return error_set(ERROR_LIBRARY, "spawn: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        if (!child_die_with_launcher(launcher)) _exit(143);
        // the ranks die with mpirun (dist/env.c)
        snprintf(launcher_var, sizeof launcher_var, "DIST_SPAWN_LAUNCHER=%d", (int)getpid());
        execvpe("mpirun", args, env);
        fprintf(stderr, "spawn: cannot run mpirun (install openmpi-bin): %s\n", strerror(errno));
        _exit(127);
    }
    forward_to[0] = pid;
    free(args);
    free(env);
    // a signal that came between forwarding_start and now found no target: send it on
    if (forwarded_signal) kill(pid, forwarded_signal);
    int grace = cfg->grace_ms > 0 ? cfg->grace_ms : 3000;
    int rc = wait_for_children(1, grace, "MPI ranks (mpirun)", 0);
    forwarding_stop(&fw);
    return rc;
}

int dist_spawn_local(const DistSpawnConfig *cfg, char *const argv[])
{
    if (cfg->nproc < 1) return error_set(ERROR_BAD_USAGE, "--nproc-per-node must be >= 1 (got %d)", cfg->nproc);
    if (cfg->nproc > FORWARD_MAX)
        return error_set(ERROR_BAD_USAGE, "--nproc-per-node %d: at most %d local ranks", cfg->nproc, FORWARD_MAX);
    if (!argv || !argv[0]) return error_set(ERROR_BAD_USAGE, "spawn: no command");
    if (cfg->use_mpirun) return run_mpirun(cfg, argv);
    const char *addr = cfg->master_addr ? cfg->master_addr : own_master_var("MASTER_ADDR");
    if (!addr) addr = "127.0.0.1";
    int port = cfg->master_port;
    const char *port_var = own_master_var("MASTER_PORT");
    if (port == 0 && port_var && dist_parse_int(port_var, "MASTER_PORT", 1, 65535, &port) != 0) return -1;
    if (port == 0) port = 29500;
    // each rank's variables: the rank written in before each fork
    char rank_var[32], local_rank_var[32], world_var[32], local_world_var[32], port_str[32], addr_var[300];
    snprintf(world_var, sizeof world_var, "WORLD_SIZE=%d", cfg->nproc);
    snprintf(local_world_var, sizeof local_world_var, "LOCAL_WORLD_SIZE=%d", cfg->nproc);
    snprintf(port_str, sizeof port_str, "MASTER_PORT=%d", port);
    snprintf(addr_var, sizeof addr_var, "MASTER_ADDR=%s", addr);
    char *extra[] = {rank_var, local_rank_var, world_var, local_world_var, port_str, addr_var};
    char **env = child_environ(extra, 6);
    if (!env) return error_set(ERROR_OUT_OF_MEMORY, "spawn: out of memory");
    pid_t launcher = getpid();
    Forwarding fw;
    forward_as_group = 1;  // a rank's own children (loader workers) get what it gets
    for (int i = 0; i < cfg->nproc; i++) forward_to[i] = 0;
    forward_count = cfg->nproc;
    forwarding_start(&fw);
    int started = 0;
    for (; started < cfg->nproc && !forwarded_signal; started++) {
        snprintf(rank_var, sizeof rank_var, "RANK=%d", started);
        snprintf(local_rank_var, sizeof local_rank_var, "LOCAL_RANK=%d", started);
        pid_t pid = fork();
        if (pid < 0) break;
        if (pid == 0) {
            setpgid(0, 0);  // SIGTERM reaches the rank's own children too
            if (!child_die_with_launcher(launcher)) _exit(143);
            execvpe(argv[0], argv, env);
            fprintf(stderr, "rank %d: cannot run %s: %s\n", started, argv[0], strerror(errno));
            _exit(127);
        }
        setpgid(pid, pid);  // as the child does: no window where a kill misses it
        forward_to[started] = pid;
    }
    int grace = cfg->grace_ms > 0 ? cfg->grace_ms : 3000;
    int first_failure = 0;
    if (forwarded_signal) {  // it came while we forked: the ranks started so far get it too
        first_failure = 128 + forwarded_signal;
        signal_children(forwarded_signal);
    } else if (started < cfg->nproc) {
        first_failure = 1;
        error_set(ERROR_LIBRARY, "spawn: fork of rank %d failed: %s", started, strerror(errno));
        signal_children(SIGTERM);
    }
    int rc = wait_for_children(started, grace, "ranks", first_failure);
    forwarding_stop(&fw);
    free(env);
    return rc;
}
