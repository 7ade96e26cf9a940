// spawn.h: the built-in local launcher (`--nproc-per-node N`, the seed's mp.spawn):
// forks N ranks of a command on this machine with the torchrun variables set (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and none of the
// launcher variables it inherited (dist_env_is_launcher_var: an sbatch script's SLURM_*, a
// parent torchrun's, mpirun's), a world of their own; and watches them:
// when one fails (non-zero exit or a signal), the others get SIGTERM, then SIGKILL
// after a grace period, so nothing hangs and nothing is orphaned. The launcher's own
// SIGINT, SIGTERM and SIGHUP go on to every rank (to mpirun for CPU ranks), every rank
// and mpirun die with the launcher (PR_SET_PDEATHSIG), and a launcher whose stdout pipe
// has no reader left (its caller is gone) stops them too.
#ifndef DIST_SPAWN_H
#define DIST_SPAWN_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DistSpawnConfig {
    int nproc;               // ranks to start (>= 1)
    const char *master_addr; // NULL: MASTER_ADDR from the environment (not a parent torchrun's,
                             // set beside RANK/WORLD_SIZE), else 127.0.0.1
    int master_port;         // 0: MASTER_PORT likewise, else 29500
    bool use_mpirun;         // CPU ranks: run `mpirun --bind-to none -np N` (MPI ranks need an
                             // MPI launcher; unbound: see spawn.c)
    int grace_ms;            // SIGTERM -> SIGKILL delay for the survivors of a failure
} DistSpawnConfig;

// Runs argv (argv[0] a path or a name on PATH) as cfg->nproc ranks and waits for all.
// Returns 0 when every rank exited 0, else the first failure's exit code (128 + signal
// for a rank killed by a signal, or for a signal the launcher forwarded), having stopped
// the others; -1 if nothing could start.
int dist_spawn_local(const DistSpawnConfig *cfg, char *const argv[]);

#ifdef __cplusplus
}
#endif
#endif
