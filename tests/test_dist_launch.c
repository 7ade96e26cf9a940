// test_dist_launch.c: dist/'s launch layer without MPI: the environment (torchrun, Open
// MPI and SLURM variables; bad WORLD_SIZE values), the TCP rendezvous (success across
// forked ranks, a port in use, a missing MASTER_ADDR, a peer that never arrives, a world
// size that disagrees), the local spawner (a failing rank stops the others), the
// DistributedSampler's global order, and a world that does not divide the batch.
// Every error must name the rank and what is wrong. Launcher variables a process inherited
// (an sbatch script's SLURM_*, a parent torchrun's, mpirun's) never reach the ranks the
// spawner starts, and the MPI refusal names the variables it saw and the fix.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/comm.h"
#include "dist/env.h"
#include "dist/rendezvous.h"
#include "dist/sampler.h"
#include "dist/spawn.h"
#include "kernels/error.h"

static const char *all_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID",
    "GROUP_RANK", "TORCHELASTIC_RUN_ID", "PMIX_RANK", "PMI_RANK", "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_btl",
};

static int clean_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++) unsetenv(all_vars[i]);
    error_clear();
    return 0;
}

static void assert_error_has(const char *a, const char *b)
{
    const char *m = error_message();
    if (!strstr(m, a) || (b && !strstr(m, b))) fail_msg("error '%s' lacks '%s' / '%s'", m, a, b ? b : "");
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
}

static void test_env_single_by_default(void **state)
{
    (void)state;
    DistEnv env;
    assert_int_equal(dist_env_detect(&env), 0);
    assert_int_equal(env.launch, DIST_LAUNCH_SINGLE);
    assert_int_equal(env.world, 1);
    assert_int_equal(env.rank, 0);
}

static void test_env_torchrun_then_mpi_then_slurm(void **state)
{
    (void)state;
    DistEnv env;
    setenv("SLURM_PROCID", "3", 1); setenv("SLURM_NTASKS", "4", 1); setenv("SLURM_LOCALID", "1", 1);
    assert_int_equal(dist_env_detect(&env), 0);
    assert_int_equal(env.launch, DIST_LAUNCH_SLURM);
    assert_int_equal(env.rank, 3); assert_int_equal(env.world, 4); assert_int_equal(env.local_rank, 1);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1); setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    assert_int_equal(dist_env_detect(&env), 0);
    assert_int_equal(env.launch, DIST_LAUNCH_MPI);
    assert_int_equal(env.rank, 1); assert_int_equal(env.world, 2);
    setenv("RANK", "0", 1); setenv("WORLD_SIZE", "5", 1); setenv("LOCAL_RANK", "0", 1);
    setenv("MASTER_ADDR", "10.0.0.1", 1); setenv("MASTER_PORT", "29501", 1);
    assert_int_equal(dist_env_detect(&env), 0);
    assert_int_equal(env.launch, DIST_LAUNCH_TORCHRUN);
    assert_int_equal(env.world, 5);
    assert_string_equal(env.master_addr, "10.0.0.1");
    assert_int_equal(env.master_port, 29501);
}

static void test_env_bad_world_size(void **state)
{
    (void)state;
    DistEnv env;
    const char *bad[] = {"0", "-2", "abc", "", "4x"};
    setenv("RANK", "0", 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("WORLD_SIZE", bad[i], 1);
        error_clear();
        assert_int_equal(dist_env_detect(&env), -1);
        assert_error_has("WORLD_SIZE", NULL);
    }
    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", "2", 1);
    assert_int_equal(dist_env_detect(&env), -1);
    assert_error_has("RANK=2", "out of range");
    unsetenv("WORLD_SIZE");
    assert_int_equal(dist_env_detect(&env), -1);
    assert_error_has("WORLD_SIZE is missing", NULL);
    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", "1", 1);
    setenv("MASTER_PORT", "70000", 1);
    assert_int_equal(dist_env_detect(&env), -1);
    assert_error_has("MASTER_PORT", NULL);
}

static void test_world_must_divide_the_batch(void **state)
{
    (void)state;
    int local = 0;
    assert_int_equal(dist_local_batch(12, 3, 0, &local), 0);
    assert_int_equal(local, 4);
    assert_int_equal(dist_local_batch(10, 3, 2, &local), -1);
    assert_error_has("rank 2", "not divisible by the world size 3");
}

static void test_sampler_keeps_the_global_order(void **state)
{
    (void)state;
    enum { N = 23, WORLD = 3, B = 6 };  // padded to 24: 8 per rank, local batch 2
    DistSampler s[WORLD];
    size_t mine[WORLD][8], all[24], other_epoch[24];
    for (int r = 0; r < WORLD; r++) {
        assert_int_equal(dist_sampler_init(&s[r], N, WORLD, r, true, false, 9), 0);
        assert_int_equal(s[r].per_rank, 8);
        assert_int_equal(dist_sampler_indices(&s[r], 1, mine[r]), 0);
    }
    assert_int_equal(dist_sampler_global(&s[0], 1, all), 0);
    assert_int_equal(dist_sampler_global(&s[0], 2, other_epoch), 0);
    assert_memory_not_equal(all, other_epoch, sizeof all);  // epochs reshuffle
    // global batch k (B = 6) is the union of every rank's local batch k (2 each)
    for (int k = 0; k < 4; k++) {
        int seen[N] = {0}, want[N] = {0};
        for (int j = 0; j < B; j++) want[all[k * B + j]]++;
        for (int r = 0; r < WORLD; r++)
            for (int j = 0; j < B / WORLD; j++) seen[mine[r][k * (B / WORLD) + j]]++;
        assert_memory_equal(seen, want, sizeof seen);
    }
    DistSampler d;
    assert_int_equal(dist_sampler_init(&d, N, WORLD, 0, false, true, 9), 0);
    assert_int_equal(d.per_rank, 7);  // drop_last: 21 of 23
}

// A port nobody listens on right now.
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static DistEnv make_env(int rank, int world, int port)
{
    DistEnv e = {.launch = DIST_LAUNCH_TORCHRUN, .rank = rank, .world = world, .local_rank = rank,
                 .local_world = world, .master_port = port};
    snprintf(e.master_addr, sizeof e.master_addr, "127.0.0.1");
    return e;
}

// Forks ranks first..world-1 (claiming world_seen as their world); each receives the id
// and exits 0 when it is the expected one.
static pid_t fork_peer(int rank, int world_seen, int port, const unsigned char *expect, size_t size)
{
    pid_t pid = fork();
    if (pid == 0) {
        DistEnv e = make_env(rank, world_seen, port);
        unsigned char id[128] = {0};
        if (dist_rendezvous_share(&e, id, size, 5000) != 0) {
            fprintf(stderr, "%s\n", error_message());
            _exit(2);
        }
        _exit(memcmp(id, expect, size) == 0 ? 0 : 3);
    }
    return pid;
}

static int wait_code(pid_t pid)
{
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

static void test_rendezvous_shares_the_id(void **state)
{
    (void)state;
    int port = free_port();
    unsigned char id[128];
    for (int i = 0; i < 128; i++) id[i] = (unsigned char)(i * 7 + 1);
    pid_t a = fork_peer(1, 3, port, id, sizeof id), b = fork_peer(2, 3, port, id, sizeof id);
    DistEnv e = make_env(0, 3, port);
    assert_int_equal(dist_rendezvous_share(&e, id, sizeof id, 5000), 0);
    assert_int_equal(wait_code(a), 0);
    assert_int_equal(wait_code(b), 0);
}

static void test_rendezvous_port_in_use(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    DistEnv e = make_env(0, 2, ntohs(a.sin_port));
    unsigned char id[16] = {0};
    assert_int_equal(dist_rendezvous_share(&e, id, sizeof id, 1000), -1);
    assert_error_has("rank 0", "in use");
    close(fd);
}

static void test_rendezvous_missing_master_addr(void **state)
{
    (void)state;
    DistEnv e = make_env(1, 2, 29500);
    e.master_addr[0] = '\0';
    unsigned char id[16];
    assert_int_equal(dist_rendezvous_share(&e, id, sizeof id, 1000), -1);
    assert_error_has("rank 1", "MASTER_ADDR is not set");
    e = make_env(1, 2, 0);
    assert_int_equal(dist_rendezvous_share(&e, id, sizeof id, 1000), -1);
    assert_error_has("rank 1", "MASTER_PORT is not set");
}

static void test_rendezvous_peer_never_arrives(void **state)
{
    (void)state;
    int port = free_port();
    unsigned char id[32] = {1};
    pid_t a = fork_peer(1, 3, port, id, sizeof id);  // rank 2 never comes
    DistEnv e = make_env(0, 3, port);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(dist_rendezvous_share(&e, id, sizeof id, 800), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_error_has("rank 0: only 1 of 2 peers", "missing ranks 2");
    assert_true(t1.tv_sec - t0.tv_sec < 5);
    assert_int_not_equal(wait_code(a), 0);  // the peer fails too (rank 0 closed on it)
    // no rank 0 at all: a peer gives up and says so
    e = make_env(1, 2, free_port());
    assert_int_equal(dist_rendezvous_share(&e, id, sizeof id, 300), -1);
    assert_error_has("rank 1: no rank 0 listening", NULL);
}

static void test_rendezvous_world_disagrees(void **state)
{
    (void)state;
    int port = free_port();
    unsigned char id[32] = {1};
    pid_t a = fork_peer(1, 3, port, id, sizeof id);  // says world 3; rank 0 has 2
    DistEnv e = make_env(0, 2, port);
    assert_int_equal(dist_rendezvous_share(&e, id, sizeof id, 3000), -1);
    assert_error_has("WORLD_SIZE=3", "rank 0 has 2");
    assert_int_equal(wait_code(a), 2);
}

static void test_spawner_sets_the_variables(void **state)
{
    (void)state;
    DistSpawnConfig cfg = {.nproc = 3, .master_addr = "127.0.0.1", .master_port = 29555, .grace_ms = 500};
    char *argv[] = {"/bin/sh", "-c",
                    "[ \"$WORLD_SIZE\" = 3 ] && [ \"$LOCAL_WORLD_SIZE\" = 3 ] && [ \"$RANK\" = \"$LOCAL_RANK\" ] && "
                    "[ \"$RANK\" -ge 0 ] && [ \"$RANK\" -lt 3 ] && [ \"$MASTER_PORT\" = 29555 ] && "
                    "[ \"$MASTER_ADDR\" = 127.0.0.1 ]", NULL};
    assert_int_equal(dist_spawn_local(&cfg, argv), 0);
}

static void test_spawner_stops_the_others_when_one_fails(void **state)
{
    (void)state;
    DistSpawnConfig cfg = {.nproc = 3, .grace_ms = 500};
    char *argv[] = {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 7; fi; exec sleep 30", NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(dist_spawn_local(&cfg, argv), 7);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(t1.tv_sec - t0.tv_sec < 5);  // the sleepers were stopped, not waited for
    DistSpawnConfig none = {.nproc = 0};
    assert_int_equal(dist_spawn_local(&none, argv), -1);
    assert_error_has("--nproc-per-node", NULL);
}

// CPU ranks' compute threads: unbound ranks split the machine's CPUs (at least 1 each); a
// rank bound to some CPUs uses those.
static void test_cpu_threads_per_rank(void **state)
{
    (void)state;
    cpu_set_t all;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    int cpus = CPU_COUNT(&all);
    if (cpus != sysconf(_SC_NPROCESSORS_ONLN)) {
        printf("skipped: this test runs bound to %d of %ld CPUs\n", cpus, sysconf(_SC_NPROCESSORS_ONLN));
        skip();
    }
    DistEnv env = {.world = 4, .local_world = 1};
    assert_int_equal(dist_cpus_per_rank(&env), cpus);
    env.local_world = 2;
    assert_int_equal(dist_cpus_per_rank(&env), cpus / 2 > 1 ? cpus / 2 : 1);
    env.local_world = 4 * cpus;
    assert_int_equal(dist_cpus_per_rank(&env), 1);
    if (cpus < 2) return;
    cpu_set_t one;  // bound to one CPU, as mpirun's default --bind-to core does
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++) if (CPU_ISSET(c, &all)) { CPU_SET(c, &one); break; }
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    env.local_world = 1;
    int bound = dist_cpus_per_rank(&env);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(bound, 1);
}

// The spawner's mpirun runs the ranks unbound (--bind-to none): each may use every CPU, so
// DDP's communication thread is not pinned to its rank's compute core.
static void test_spawner_mpirun_leaves_ranks_unbound(void **state)
{
    (void)state;
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("skipped: mpirun not found (install openmpi-bin)\n");
        skip();
    }
    char expect[64];
    snprintf(expect, sizeof expect, "[ \"$(nproc)\" = %ld ]", sysconf(_SC_NPROCESSORS_ONLN));
    DistSpawnConfig cfg = {.nproc = 2, .use_mpirun = true, .grace_ms = 500};
    char *argv[] = {"/bin/sh", "-c", expect, NULL};
    assert_int_equal(dist_spawn_local(&cfg, argv), 0);
}

// Which variables are a launcher's (scrubbed from the ranks' environment) and which are
// settings that stay (Open MPI's MCA parameters, CUDA's, anything else).
static void test_launcher_vars_are_named(void **state)
{
    (void)state;
    const char *launcher[] = {"SLURM_PROCID=0", "SLURM_JOB_ID", "RANK=1", "WORLD_SIZE", "LOCAL_RANK=0",
                              "LOCAL_WORLD_SIZE=2", "GROUP_RANK=0", "ROLE_WORLD_SIZE=2", "MASTER_ADDR=h",
                              "MASTER_PORT=1", "TORCHELASTIC_RUN_ID=x", "OMPI_COMM_WORLD_SIZE=2",
                              "OMPI_UNIVERSE_SIZE=2", "OMPI_MCA_orte_hnp_uri=x", "OMPI_MCA_ess_base_jobid=1",
                              "PMIX_RANK=0", "PMI_SIZE=2", "DIST_SPAWN_LAUNCHER=12"};
    const char *kept[] = {"OMPI_MCA_btl=self", "OMPI_MCA_mca_base_component_disable_dlclose=1", "PATH=/bin",
                          "CUDA_VISIBLE_DEVICES=0", "RANKING=1", "SLURMX=1", "OMP_NUM_THREADS=1", "MASTER=x"};
    for (size_t i = 0; i < sizeof launcher / sizeof launcher[0]; i++)
        if (!dist_env_is_launcher_var(launcher[i])) fail_msg("%s is not taken for a launcher's", launcher[i]);
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if (dist_env_is_launcher_var(kept[i])) fail_msg("%s is taken for a launcher's", kept[i]);
}

// What an sbatch script (no srun) and a parent torchrun, Open MPI and PMIx leave in the
// environment of the program that runs there.
static void set_inherited_launchers(void)
{
    setenv("SLURM_PROCID", "0", 1); setenv("SLURM_NTASKS", "4", 1); setenv("SLURM_LOCALID", "0", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    setenv("RANK", "7", 1); setenv("WORLD_SIZE", "9", 1); setenv("LOCAL_RANK", "7", 1); setenv("GROUP_RANK", "3", 1);
    setenv("MASTER_ADDR", "10.255.255.1", 1); setenv("MASTER_PORT", "29999", 1); setenv("TORCHELASTIC_RUN_ID", "x", 1);
    setenv("OMPI_COMM_WORLD_RANK", "5", 1); setenv("OMPI_COMM_WORLD_SIZE", "8", 1); setenv("PMIX_RANK", "5", 1);
    setenv("PMI_RANK", "5", 1); setenv("OMPI_MCA_orte_hnp_uri", "1.0;tcp://10.255.255.1:1", 1);
    setenv("OMPI_MCA_btl", "self,vader,tcp", 1);
}

// The spawner's ranks see only the variables it sets: none inherited from an sbatch
// script, a parent torchrun (its MASTER_ADDR/PORT neither), mpirun or PMIx; settings such
// as OMPI_MCA_btl stay. Forked ranks, and mpirun's ranks when mpirun is here.
static void test_spawner_gives_ranks_only_its_own_variables(void **state)
{
    (void)state;
    set_inherited_launchers();
    const char *none_inherited =
        "! env | grep -Eq '^(SLURM_|TORCHELASTIC_|GROUP_RANK=|PMI_RANK=|OMPI_MCA_orte_hnp_uri=1.0;)' && "
        "[ \"$OMPI_MCA_btl\" = self,vader,tcp ] && ";
    char check[1024];
    snprintf(check, sizeof check, "%s [ \"$WORLD_SIZE\" = 2 ] && [ \"$RANK\" = \"$LOCAL_RANK\" ] && [ \"$RANK\" -lt 2 ] && "
             "[ \"$MASTER_ADDR\" = 127.0.0.1 ] && [ \"$MASTER_PORT\" = 29500 ] && [ -z \"$OMPI_COMM_WORLD_SIZE\" ] && "
             "[ -z \"$PMIX_RANK\" ] || { env | sort >&2; exit 9; }", none_inherited);
    DistSpawnConfig cfg = {.nproc = 2, .grace_ms = 500};
    char *argv[] = {"/bin/sh", "-c", check, NULL};
    assert_int_equal(dist_spawn_local(&cfg, argv), 0);
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("skipped: mpirun not found (install openmpi-bin): the mpirun half\n");
        return;
    }
    // mpirun's ranks: Open MPI's own variables for this job of 2, none of the parent's
    snprintf(check, sizeof check, "%s [ \"$OMPI_COMM_WORLD_SIZE\" = 2 ] && [ -z \"$RANK$WORLD_SIZE$MASTER_ADDR\" ] "
             "|| { env | sort >&2; exit 9; }", none_inherited);
    DistSpawnConfig mpi = {.nproc = 2, .use_mpirun = true, .grace_ms = 500};
    assert_int_equal(dist_spawn_local(&mpi, argv), 0);
}

// MPI ranks need an MPI launcher; a process with only SLURM variables (inside an sbatch
// script, no srun) or torchrun-style ones is refused with the variables it saw and the
// fix (srun, mpirun or --nproc-per-node), not "not with srun variables alone".
static void test_mpi_refusal_names_the_variables_and_the_fix(void **state)
{
    (void)state;
    setenv("SLURM_PROCID", "0", 1); setenv("SLURM_NTASKS", "4", 1); setenv("SLURM_LOCALID", "0", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    DistEnv env;
    assert_int_equal(dist_env_detect(&env), 0);
    DistComm *comm = NULL;
    assert_int_equal(dist_comm_create(&env, DIST_COMM_MPI, 0, 1000, &comm), -1);
    assert_null(comm);
    const char *slurm[] = {"SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_JOB_ID=4242", "sbatch script",
                           "srun -n 4", "mpirun -np 4", "--nproc-per-node 4"};
    for (size_t i = 0; i < sizeof slurm / sizeof slurm[0]; i++) assert_error_has(slurm[i], NULL);
    printf("%s\n", error_message());
    clean_env(NULL);
    setenv("RANK", "0", 1); setenv("WORLD_SIZE", "2", 1); setenv("LOCAL_RANK", "0", 1);
    assert_int_equal(dist_env_detect(&env), 0);
    assert_int_equal(dist_comm_create(&env, DIST_COMM_MPI, 0, 1000, &comm), -1);
    const char *torchrun[] = {"RANK=0 WORLD_SIZE=2 LOCAL_RANK=0", "torchrun", "mpirun -np 2", "--nproc-per-node 2"};
    for (size_t i = 0; i < sizeof torchrun / sizeof torchrun[0]; i++) assert_error_has(torchrun[i], NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_env_single_by_default, clean_env),
        cmocka_unit_test_setup(test_env_torchrun_then_mpi_then_slurm, clean_env),
        cmocka_unit_test_setup(test_env_bad_world_size, clean_env),
        cmocka_unit_test_setup(test_world_must_divide_the_batch, clean_env),
        cmocka_unit_test_setup(test_sampler_keeps_the_global_order, clean_env),
        cmocka_unit_test_setup(test_rendezvous_shares_the_id, clean_env),
        cmocka_unit_test_setup(test_rendezvous_port_in_use, clean_env),
        cmocka_unit_test_setup(test_rendezvous_missing_master_addr, clean_env),
        cmocka_unit_test_setup(test_rendezvous_peer_never_arrives, clean_env),
        cmocka_unit_test_setup(test_rendezvous_world_disagrees, clean_env),
        cmocka_unit_test_setup(test_spawner_sets_the_variables, clean_env),
        cmocka_unit_test_setup(test_spawner_stops_the_others_when_one_fails, clean_env),
        cmocka_unit_test_setup(test_cpu_threads_per_rank, clean_env),
        cmocka_unit_test_setup(test_spawner_mpirun_leaves_ranks_unbound, clean_env),
        cmocka_unit_test_setup(test_launcher_vars_are_named, clean_env),
        cmocka_unit_test_setup_teardown(test_spawner_gives_ranks_only_its_own_variables, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_mpi_refusal_names_the_variables_and_the_fix, clean_env, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
