// bench_cpu_threads.c: the CPU section of PyTorch's tuning guide ("CPU specific
// optimizations": OpenMP threads, core binding, NUMA controls) on the fast CPU backend. These
// are CPU practices: every row runs on the fast CPU backend (CORE_BACKEND_CPU), whatever
// --backend says and whether or not a GPU is there. Wall clock over the timed steps.
// cpu_threads/*: training steps of each preset with the compute threads of the core
//   (CoreConfig.cpu_threads, torch.set_num_threads / OMP_NUM_THREADS) 1 (baseline threads_1)
//   vs N (tuned threads_N: N = 2..8, then powers of two, and every CPU this process may use).
// cpu_threads_loader/*: training from JPEGs through the loader with 1 worker process, the
//   compute threads as many as the CPUs (baseline: the default; the worker competes with
//   them) vs the CPUs less the worker's (tuned: the guide's advice to leave cores to the
//   data loader).
// cpu_affinity/*: the same loader training with the tuned thread count, compute threads and
//   the worker left to the scheduler (baseline unpinned) vs bound to disjoint CPUs (tuned
//   pinned: compute threads one per CPU on the lowest CPUs - 1, CoreConfig.cpu_affinity as
//   GOMP_CPU_AFFINITY; the worker on the rest, LoaderConfig.worker_cpus as a launcher's core
//   binding). Counters: compute_cpus and worker_cpus (bit i: CPU i) and cpus_shared.
// numa/*: training steps with the compute threads and their memory bound to one NUMA node
//   (tuned node_bound: numactl --cpunodebind --membind) vs not (baseline unbound), on a
//   machine with two nodes or more; on one node its rows are skips that say so.
// Check: binding and node change where work runs, never a number (the pool gives a task the
//   same work whichever thread runs it): cpu_affinity and numa's update after 3 steps must be
//   bit-identical to the baseline's (tolerance 0). The thread count does change numbers: the
//   fast convolutions split a batch into one run of images per thread and sum their
//   weight-gradient parts, so another count sums in another order (THREADS_TOL);
//   --practice_selftest=frozen|half_lr|drop_step breaks the tuned rows, which the check catches.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cpu_threads/cpu_topology.h"
#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/cpu_pool.h"
#include "kernels/error.h"

// The thread count's change of summation order (the convolutions' weight gradients): the
// update after 3 steps measured 1.7e-6 (tiny, 1 vs 2 threads; worst tensor 5.9e-6) and
// 2.1e-4 (small; worst tensor, a BN beta, 1.1e-3) of the baseline's on the 2-core VM, 0 on
// mlp (no convolution); asserted at bench_fusion's and bench_conv_bias's tolerance for a
// change of summation order. half_lr (0.5), drop_step (1/3) and frozen (1) are far above.
#define THREADS_TOL 1e-2

#define LOADER_WORKERS 1
// Loader rows: 20 steps per timed iteration and 1 s repetitions, as bench_workers' training rows.
#define LOADER_STEPS 20
#define LOADER_MIN_TIME 1.0

static struct {
    uint64_t usable;        // the CPUs this process may use, at start
    int cpus;               // how many (of the first 64)
    uint64_t compute_cpus;  // cpu_affinity's tuned compute CPUs
    int node;               // numa: the node bound to (the lowest with usable CPUs)
    uint64_t node_cpus;     // its usable CPUs
} machine;

// ---- the variants' changes: always the fast CPU backend ------------------------------------

static void on_cpu(CoreConfig *c) { c->backend = CORE_BACKEND_CPU; }

#define THREADS(n) \
    static void threads_##n(CoreConfig *c) { on_cpu(c); c->cpu_threads = n; }
THREADS(1) THREADS(2) THREADS(3) THREADS(4) THREADS(5) THREADS(6) THREADS(7) THREADS(8)
THREADS(16) THREADS(32) THREADS(64)
#undef THREADS

static void threads_all(CoreConfig *c) { on_cpu(c); c->cpu_threads = machine.cpus; }

static void threads_left(CoreConfig *c)
{
    on_cpu(c);
    c->cpu_threads = machine.cpus - LOADER_WORKERS;
}

static void threads_pinned(CoreConfig *c)
{
    threads_left(c);
    c->cpu_affinity = machine.compute_cpus;
}

static void node_unbound(CoreConfig *c)
{
    on_cpu(c);
    c->cpu_threads = __builtin_popcountll(machine.node_cpus);
}

static void node_bound(CoreConfig *c)
{
    node_unbound(c);
    c->cpu_affinity = machine.node_cpus;
}

static const struct { int n; PracticeChange change; } thread_counts[] = {
    {2, threads_2}, {3, threads_3}, {4, threads_4}, {5, threads_5}, {6, threads_6},
    {7, threads_7}, {8, threads_8}, {16, threads_16}, {32, threads_32}, {64, threads_64},
};

// ---- counters -------------------------------------------------------------------------------

static int forget_cpus_used(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                            const PracticeVariant *v)
{
    (void)v;
    (void)ctx, (void)st, (void)core, (void)cfg;
    cpu_pool_cpus_used();  // the timed core is made last: from here on, its steps
    return 0;
}

// A CPU mask as a counter: exact for the first 52 CPUs (a double's integers).
static double mask_counter(uint64_t mask) { return (double)(mask & ((UINT64_C(1) << 52) - 1)); }

// The thread count, and the CPUs the compute tasks ran on since the timed core was made (or
// the kept core's previous run ended).
static void threads_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                           const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx, (void)core, (void)v, (void)o;
    harness_counter(st, "compute_threads", cfg->cpu_threads, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "compute_cpus", mask_counter(cpu_pool_cpus_used()), HARNESS_COUNTER_PLAIN);
}

// Where each side ran: the CPUs the compute tasks ran on, those the loader's workers may run
// on (and last ran on), and how many CPUs both sides may share.
static void affinity_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                            const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx, (void)core, (void)v, (void)o;
    uint64_t compute = cpu_pool_cpus_used(), allowed = 0, last = 0;
    cpu_children(&allowed, &last);
    harness_counter(st, "compute_threads", cfg->cpu_threads, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "compute_cpus", mask_counter(compute), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "worker_cpus", mask_counter(allowed), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "worker_last_cpus", mask_counter(last), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "cpus_shared", __builtin_popcountll(compute & allowed), HARNESS_COUNTER_PLAIN);
}

// numa: the memory of the run's thread follows its CPUs (bound: the node's; else the default).
static int numa_core_created(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                             const PracticeVariant *v)
{
    forget_cpus_used(ctx, st, core, cfg, v);
    if (numa_bind_memory(cfg->cpu_affinity ? machine.node : -1) != 0)
        return error_set(ERROR_LIBRARY, "set_mempolicy (node %d): %s", machine.node, strerror(errno));
    return 0;
}

// The policy only matters while the core's memory is first touched (its creation and first
// passes, the warm-up right after): the thread goes back to the default after every run.
static void numa_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                        const PracticeVariant *v, const PracticeOutcome *o)
{
    threads_finish(ctx, st, core, cfg, v, o);
    numa_bind_memory(-1);
}

static const PracticeHooks threads_hooks = {.core_created = forget_cpus_used, .finish = threads_finish};
static const PracticeHooks affinity_hooks = {.core_created = forget_cpus_used, .finish = affinity_finish};
static const PracticeHooks numa_hooks = {.core_created = numa_core_created, .finish = numa_finish};

// ---- rows that cannot run here ----------------------------------------------------------------

static void skip_row(HarnessState *st, void *reason) { harness_skip(st, reason); }

// A visible skip for `variant` of `practice` over the presets, naming why.
static void register_skip(const char *practice, const char *variant, HarnessRole role, const char *presets,
                          const char *reason)
{
    HarnessSpec s = {.practice = practice, .variant = variant, .role = role,
                     .timing = HARNESS_TIMING_WALL, .fn = skip_row, .user = (void *)reason, .iterations = 1,
                     .axes = {{"preset", presets, true}, {"batch", "0", false}}};
    harness_register(&s);
}

// ---- the families ---------------------------------------------------------------------------

static Practice base_practice(const char *name, const PracticeVariant *variants, int count, const char *presets)
{
    return (Practice){.name = name, .variants = variants, .variant_count = count, .presets = presets,
                      .batches = "0", .mode = PRACTICE_THROUGHPUT, .steps = 10, .min_time = 0.5,
                      .check = PRACTICE_CHECK_PARAMS, .tolerance = 0.0, .check_steps = 3,
                      .hooks = &threads_hooks};
}

static void register_threads(const char *presets)
{
    static PracticeVariant variants[16];
    static char names[16][24];
    int n = 0;
    variants[n++] = (PracticeVariant){"threads_1", HARNESS_BASELINE, threads_1, NULL};
    for (size_t i = 0; i < sizeof thread_counts / sizeof *thread_counts; i++) {
        int t = thread_counts[i].n;
        if (t >= machine.cpus) break;
        snprintf(names[n], sizeof names[n], "threads_%d", t);
        variants[n] = (PracticeVariant){names[n], HARNESS_TUNED, thread_counts[i].change, NULL};
        n++;
    }
    if (machine.cpus > 1) {
        snprintf(names[n], sizeof names[n], "threads_%d", machine.cpus);
        variants[n] = (PracticeVariant){names[n], HARNESS_TUNED, threads_all, NULL};
        n++;
    }
    static Practice p;
    p = base_practice("cpu_threads", variants, n, presets);
    p.tolerance = THREADS_TOL;
    p.label = "fast CPU backend, compute threads per variant (CoreConfig.cpu_threads); wall clock";
    practice_register(&p);
    if (machine.cpus < 2)
        register_skip("cpu_threads", "threads_2", HARNESS_TUNED, presets, "one CPU here: no second thread to add");
}

static Practice loader_practice(const char *name, const PracticeVariant *v, const char *presets,
                                const char *label)
{
    Practice p = base_practice(name, v, 2, presets);
    p.images = true;
    p.steps = LOADER_STEPS;
    p.min_time = LOADER_MIN_TIME;
    p.dataset_preset = harness_option_str_value("dataset");
    p.label = label;
    p.hooks = &affinity_hooks;
    return p;
}

static void register_loader_families(const char *presets)
{
    // Every loader row says where its worker may run: a row forks its worker before its core
    // exists, from a thread that a bound core of another row may have left on its CPUs.
    static PracticeLoader everywhere, apart;
    static PracticeVariant threads_v[2], affinity_v[2];
    static char names[2][24];
    if (machine.cpus <= LOADER_WORKERS) {
        static char why[160];
        snprintf(why, sizeof why, "%d CPU here: none to leave to the loader's %d worker", machine.cpus,
                 LOADER_WORKERS);
        register_skip("cpu_threads_loader", "threads_all", HARNESS_BASELINE, presets, why);
        register_skip("cpu_threads_loader", "threads_left", HARNESS_TUNED, presets, why);
        register_skip("cpu_affinity", "unpinned", HARNESS_BASELINE, presets, why);
        register_skip("cpu_affinity", "pinned", HARNESS_TUNED, presets, why);
        return;
    }
    snprintf(names[0], sizeof names[0], "threads_%d", machine.cpus);
    snprintf(names[1], sizeof names[1], "threads_%d", machine.cpus - LOADER_WORKERS);
    everywhere = (PracticeLoader){.num_workers = LOADER_WORKERS, .worker_cpus = machine.usable};
    threads_v[0] = (PracticeVariant){names[0], HARNESS_BASELINE, threads_all, &everywhere};
    threads_v[1] = (PracticeVariant){names[1], HARNESS_TUNED, threads_left, &everywhere};
    static Practice threads;
    threads = loader_practice("cpu_threads_loader", threads_v, presets,
                              "fast CPU backend; JPEGs through the loader, 1 worker process; wall clock");
    threads.tolerance = THREADS_TOL;
    practice_register(&threads);
    machine.compute_cpus = cpu_mask_lowest(machine.usable, machine.cpus - LOADER_WORKERS);
    apart = (PracticeLoader){.num_workers = LOADER_WORKERS, .worker_cpus = machine.usable & ~machine.compute_cpus};
    affinity_v[0] = (PracticeVariant){"unpinned", HARNESS_BASELINE, threads_left, &everywhere};
    affinity_v[1] = (PracticeVariant){"pinned", HARNESS_TUNED, threads_pinned, &apart};
    static Practice affinity;
    affinity = loader_practice("cpu_affinity", affinity_v, presets,
                               "fast CPU backend; JPEGs through the loader, 1 worker process; compute "
                               "threads and the worker on disjoint CPUs or anywhere; wall clock");
    practice_register(&affinity);
}

static void register_numa(const char *presets)
{
    static int ids[CPU_TOPOLOGY_MAX_NODES];
    static uint64_t cpus[CPU_TOPOLOGY_MAX_NODES];
    static char why[400];
    const char *root = harness_option_str_value("numa_root");
    int n = numa_nodes(root, ids, cpus, CPU_TOPOLOGY_MAX_NODES);
    machine.node = -1;
    for (int k = 0; k < n && machine.node < 0; k++)
        if (cpus[k] & machine.usable) {
            machine.node = ids[k];
            machine.node_cpus = cpus[k] & machine.usable;
        }
    const char *binding = "on a two-socket machine this binds the compute threads (one per CPU of the node) "
                          "and their memory to one node (numactl --cpunodebind=N --membind=N)";
    if (n < 0) snprintf(why, sizeof why, "cannot read the NUMA nodes: %s", error_message());
    else if (n == 0) snprintf(why, sizeof why, "no NUMA information here (%s missing): %s", root, binding);
    else if (n == 1) snprintf(why, sizeof why, "one NUMA node here (node%d): binding changes nothing; %s", ids[0], binding);
    if (n < 2 || machine.node < 0) {
        if (n >= 2) snprintf(why, sizeof why, "no NUMA node holds a CPU this process may use");
        register_skip("numa", "unbound", HARNESS_BASELINE, presets, why);
        register_skip("numa", "node_bound", HARNESS_TUNED, presets, why);
        return;
    }
    static const PracticeVariant variants[] = {
        {"unbound", HARNESS_BASELINE, node_unbound, NULL},
        {"node_bound", HARNESS_TUNED, node_bound, NULL},
    };
    static Practice p;
    p = base_practice("numa", variants, 2, presets);
    p.hooks = &numa_hooks;
    p.label = "fast CPU backend, one thread per CPU of a node, bound to it (threads and memory) or not; wall clock";
    practice_register(&p);
}

int main(int argc, char **argv)
{
    harness_option_str("dataset", "bench", "BENCH_CPU_THREADS_DATASET",
                       "generated dataset preset of the loader families (cpu_threads_loader, cpu_affinity)");
    harness_option_str("numa_root", "/sys/devices/system/node", "BENCH_CPU_THREADS_NUMA_ROOT",
                       "where the numa family reads the NUMA nodes (nodeN/cpulist; tests pass a "
                       "two-node fixture to run the bound path on a one-node machine)");
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    machine.usable = cpu_usable_mask();
    machine.cpus = __builtin_popcountll(machine.usable);
    // small steps in seconds on a few cores (7.9 s on one thread of the busy 2-core VM)
    register_threads(machine.cpus >= 8 ? "tiny,mlp,small" : "tiny,mlp");
    register_loader_families("tiny,mlp");
    register_numa("tiny,mlp");
    return harness_run();
}
