// env.h: who this process is in a distributed run. The rank, world size and local rank
// come from, in this order: torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI's (OMPI_COMM_WORLD_RANK, _SIZE,
// _LOCAL_RANK, _LOCAL_SIZE), SLURM's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID); with
// none of them, a world of one. Every bad value is an ERROR_BAD_USAGE naming the variable.
// Such variables describe the process they were set for: a program that starts its own
// ranks (dist/spawn.h) gives them none of those it inherited (dist_env_is_launcher_var),
// only its own.
#ifndef DIST_ENV_H
#define DIST_ENV_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DIST_LAUNCH_SINGLE,   // no launcher: a world of one
    DIST_LAUNCH_TORCHRUN, // RANK/WORLD_SIZE (torchrun, or our --nproc-per-node spawner)
    DIST_LAUNCH_MPI,      // mpirun (Open MPI)
    DIST_LAUNCH_SLURM,    // srun
} DistLaunch;

typedef struct DistEnv {
    DistLaunch launch;
    int rank, world, local_rank, local_world;
    char master_addr[256]; // "" when not set (needed only by the TCP rendezvous)
    int master_port;       // 0 when not set
    char vars[320];        // the variables it was read from, for messages:
                           // "SLURM_PROCID=0 SLURM_NTASKS=4 ..."; "" for a world of one
} DistEnv;

// Reads the environment as described above.
int dist_env_detect(DistEnv *env);
// True when MPI started this process (mpirun, or srun with Open MPI's PMIx), so that
// MPI_Init joins the launcher's world.
bool dist_env_has_mpi(const DistEnv *env);
// CPU ranks: compute threads for this rank, for core_cpu_set_threads. Unbound ranks split
// the machine: its CPUs / local_world (>= 1), instead of each starting a thread per core
// (torchrun sets OMP_NUM_THREADS for the same reason). A rank that its launcher bound to
// part of the machine (mpirun's default --bind-to core for np <= 2, --map-by slot:PE=k,
// srun --cpus-per-task) gets the CPUs it is bound to.
int dist_cpus_per_rank(const DistEnv *env);
// "single", "torchrun", "mpirun", "srun".
const char *dist_launch_name(DistLaunch launch);
// True when `entry` ("NAME=value", or a NAME) is a variable by which a launcher tells a
// process its place in a world: SLURM_*; torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME,
// MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*; Open MPI's OMPI_* (but not the OMPI_MCA_*
// settings, other than those mpirun sets for the job it runs); PMI_*, PMIX_*; and
// DIST_SPAWN_LAUNCHER.
bool dist_env_is_launcher_var(const char *entry);
// Parses a whole decimal int in [min, max]; -1 (ERROR_BAD_USAGE naming `what`) otherwise.
int dist_parse_int(const char *text, const char *what, int min, int max, int *out);

#ifdef __cplusplus
}
#endif
#endif
