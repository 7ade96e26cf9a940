// env.c: rank, world and local rank from the launcher's environment (see env.h).
#include "dist/env.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "kernels/error.h"

int dist_parse_int(const char *text, const char *what, int min, int max, int *out)
{
    if (!text || !*text)
        return error_set(ERROR_BAD_USAGE, "%s is empty: expected a whole number in [%d, %d]", what, min, max);
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end != '\0' || end == text)
        return error_set(ERROR_BAD_USAGE, "%s='%s' is not a whole number", what, text);
    if (v < min || v > max)
        return error_set(ERROR_BAD_USAGE, "%s=%ld is out of range [%d, %d]", what, v, min, max);
    *out = (int)v;
    return 0;
}

// One launcher's variable names.
typedef struct {
    DistLaunch launch;
    const char *rank, *world, *local_rank, *local_world;
} Names;

static const Names launchers[] = {
    {DIST_LAUNCH_TORCHRUN, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {DIST_LAUNCH_MPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {DIST_LAUNCH_SLURM, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

// Appends " NAME=value" (the first without the space) to env->vars when NAME is set.
static void note_var(DistEnv *env, const char *name)
{
    const char *v = getenv(name);
    size_t n = strlen(env->vars);
    if (v && n + 1 < sizeof env->vars)
        snprintf(env->vars + n, sizeof env->vars - n, "%s%s=%s", n ? " " : "", name, v);
}

static int read_var(const char *name, int min, int max, int def, int *out)
{
    const char *v = getenv(name);
    if (!v) { *out = def; return 0; }
    return dist_parse_int(v, name, min, max, out);
}

// A rank that our launcher started under mpirun (dist/spawn.c sets DIST_SPAWN_LAUNCHER to
// mpirun's pid) dies with its parent: a SIGKILLed mpirun must not leave ranks running.
// If that process is gone already, nobody would send the signal: stop now.
static void die_with_launcher(void)
{
    const char *v = getenv("DIST_SPAWN_LAUNCHER");
    char *end = NULL;
    long pid = v ? strtol(v, &end, 10) : 0;
    if (!v || *end != '\0' || pid <= 0 || pid > INT_MAX) return;  // not ours: leave it be
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) raise(SIGTERM);
}

int dist_env_detect(DistEnv *env)
{
    memset(env, 0, sizeof *env);
    env->world = env->local_world = 1;
    const Names *found = NULL;
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0] && !found; i++)
        if (getenv(launchers[i].world) || getenv(launchers[i].rank)) found = &launchers[i];
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    if (addr) snprintf(env->master_addr, sizeof env->master_addr, "%s", addr);
    if (port && dist_parse_int(port, "MASTER_PORT", 1, 65535, &env->master_port) != 0) return -1;
    if (!found) return 0;
    env->launch = found->launch;
    const char *seen[] = {found->rank, found->world, found->local_rank, found->local_world,
                          found->launch == DIST_LAUNCH_SLURM ? "SLURM_JOB_ID" : NULL,
                          found->launch == DIST_LAUNCH_SLURM ? "SLURM_STEP_ID" : NULL};
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++)
        if (seen[i]) note_var(env, seen[i]);
    if (found->launch == DIST_LAUNCH_MPI) die_with_launcher();
    if (!getenv(found->world))
        return error_set(ERROR_BAD_USAGE, "%s is set but %s is missing: set both (the rank and the world size)",
                         found->rank, found->world);
    if (!getenv(found->rank))
        return error_set(ERROR_BAD_USAGE, "%s is set but %s is missing: every process needs its rank",
                         found->world, found->rank);
    TRY(read_var(found->world, 1, 1 << 20, 1, &env->world));
    TRY(read_var(found->rank, 0, env->world - 1, 0, &env->rank));
    TRY(read_var(found->local_rank, 0, env->world - 1, env->rank, &env->local_rank));
    // SLURM_NTASKS_PER_NODE may read "2(x3)" on heterogeneous allocations: only a plain
    // number counts there; the local world is informative only.
    const char *lw = getenv(found->local_world);
    if (lw && (found->launch != DIST_LAUNCH_SLURM || strspn(lw, "0123456789") == strlen(lw)))
        TRY(read_var(found->local_world, 1, env->world, env->world, &env->local_world));
    else
        env->local_world = found->launch == DIST_LAUNCH_SLURM && !lw ? 1 : env->world;
    if (env->local_rank >= env->local_world && lw)
        return error_set(ERROR_BAD_USAGE, "rank %d: %s=%d is not below %s=%d", env->rank,
                         found->local_rank, env->local_rank, found->local_world, env->local_world);
    return 0;
}

bool dist_env_is_launcher_var(const char *entry)
{
    static const char *const names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                        "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
                                        "MASTER_ADDR", "MASTER_PORT", "DIST_SPAWN_LAUNCHER"};
    static const char *const prefixes[] = {"SLURM_", "TORCHELASTIC_", "OMPI_", "PMI_", "PMIX_"};
    // Open MPI's MCA settings are configuration (a container's, a test's), not a place in a
    // world; these are the ones mpirun sets for the job it runs (its daemon, its job id).
    static const char *const mca_of_a_job[] = {"OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_MCA_pmix",
                                               "OMPI_MCA_initial_wdir"};
    size_t len = strcspn(entry, "=");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == len && strncmp(entry, names[i], len) == 0) return true;
    if (strncmp(entry, "OMPI_MCA_", 9) == 0) {
        for (size_t i = 0; i < sizeof mca_of_a_job / sizeof mca_of_a_job[0]; i++)
            if (strncmp(entry, mca_of_a_job[i], strlen(mca_of_a_job[i])) == 0) return true;
        return false;
    }
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(entry, prefixes[i], strlen(prefixes[i])) == 0) return true;
    return false;
}

bool dist_env_has_mpi(const DistEnv *env)
{
    (void)env;
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL;
}

const char *dist_launch_name(DistLaunch launch)
{
    switch (launch) {
    case DIST_LAUNCH_SINGLE: return "single";
    case DIST_LAUNCH_TORCHRUN: return "torchrun";
    case DIST_LAUNCH_MPI: return "mpirun";
    case DIST_LAUNCH_SLURM: return "srun";
    }
    return "?";
}

int dist_cpus_per_rank(const DistEnv *env)
{
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    // bound by its launcher to part of the machine (mpirun --map-by slot:PE=k, srun
    // --cpus-per-task): those CPUs are this rank's alone
    if (online > 0 && cpus < online) return cpus;
    int ranks = env->local_world > 0 ? env->local_world : 1;
    return cpus / ranks > 1 ? cpus / ranks : 1;  // unbound: the local ranks share the machine
}
