// test_bench_cpu_threads.c: the CPU section of the tuning guide (build/bench_cpu_threads)
// and what it stands on. The program lists its four families; its tiny rows run ok on the
// fast CPU backend, every tuned row checked against its baseline (cpu_affinity and numa bit
// for bit, the thread counts within THREADS_TOL); cpu_affinity's pinned row keeps the compute
// threads and the loader's worker on disjoint CPUs (its counters say where each ran) and
// its unpinned row lets the worker run anywhere; --practice_selftest=half_lr fails the tuned
// rows; on a one-node machine numa's rows are skips that say so, and on a two-node fixture
// their bound path runs. Below the program: CPU lists and NUMA folders parsed, and the
// pool's binding (cpu_pool_bind) applied, counted and undone; the loader's worker_cpus
// binds its worker processes, and one naming no CPU of the machine is refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sched.h>

#include "bench/cpu_threads/cpu_topology.h"
#include "kernels/cpu_pool.h"
#include "tests/loader_support.h"
#include "tests/support.h"

// The program's THREADS_TOL.
#define TOL 1e-2
#define PROGRAM "bench_cpu_threads"
#define TINY "preset:tiny;batch:0"

static int usable_cpus(void) { return __builtin_popcountll(cpu_usable_mask()); }

static double row_value(const char *csv, const char *practice_variant, const char *name)
{
    char out[64];
    if (!test_csv_row_value(csv, practice_variant, TINY, name, out, sizeof out))
        fail_msg("no %s for %s", name, practice_variant);
    return atof(out);
}

static void assert_row_ok(const char *csv, const char *practice_variant)
{
    char status[32] = "", reason[512] = "";
    assert_true(test_csv_row_value(csv, practice_variant, TINY, "status", status, sizeof status));
    test_csv_row_value(csv, practice_variant, TINY, "reason", reason, sizeof reason);
    if (strcmp(status, "ok") != 0) fail_msg("%s: %s (%s)", practice_variant, status, reason);
}

static void test_lists_families(void **state)
{
    (void)state;
    char *list = test_bench_list(PROGRAM);
    assert_non_null(list);
    assert_non_null(strstr(list, "cpu_threads/threads_1/preset:tiny/"));
    assert_non_null(strstr(list, "cpu_threads/threads_1/preset:mlp/"));
    assert_non_null(strstr(list, "cpu_threads/threads_2/preset:tiny/"));  // a skip on one CPU
    assert_non_null(strstr(list, "cpu_threads_loader/"));
    assert_non_null(strstr(list, "cpu_affinity/unpinned/preset:tiny/"));
    assert_non_null(strstr(list, "cpu_affinity/pinned/preset:tiny/"));
    assert_non_null(strstr(list, "numa/unbound/preset:tiny/"));
    assert_non_null(strstr(list, "numa/node_bound/preset:tiny/"));
    char top[32];
    snprintf(top, sizeof top, "cpu_threads/threads_%d/", usable_cpus() + 1);
    assert_null(strstr(list, top));  // never more threads than CPUs
    free(list);
}

// The tiny rows of every family: ok, checked, and each side where it was asked to run.
static void test_tiny_rows(void **state)
{
    (void)state;
    int cpus = usable_cpus();
    if (cpus < 2) skip();  // the families' tuned rows are skips on one CPU
    char *csv = test_bench_csv(PROGRAM, "--benchmark_filter='preset:tiny/' --benchmark_min_time=0.01");
    assert_non_null(csv);
    char all[48], left[48];
    snprintf(all, sizeof all, "cpu_threads,threads_%d", cpus);
    assert_row_ok(csv, "cpu_threads,threads_1");
    assert_row_ok(csv, all);
    double rel = row_value(csv, all, "check_rel_diff");
    printf("threads_%d vs threads_1: update relative difference %g (tolerance %g)\n", cpus, rel, TOL);
    assert_true(rel <= TOL);
    assert_int_equal((int)row_value(csv, all, "compute_threads"), cpus);
    assert_int_equal((int)row_value(csv, "cpu_threads,threads_1", "compute_threads"), 1);

    snprintf(all, sizeof all, "cpu_threads_loader,threads_%d", cpus);
    snprintf(left, sizeof left, "cpu_threads_loader,threads_%d", cpus - 1);
    assert_row_ok(csv, all);
    assert_row_ok(csv, left);
    assert_true(row_value(csv, left, "check_rel_diff") <= TOL);
    assert_int_equal((int)row_value(csv, left, "num_workers"), 1);

    // pinned: bit-identical; compute on the lowest CPUs - 1, the worker on the rest
    assert_row_ok(csv, "cpu_affinity,unpinned");
    assert_row_ok(csv, "cpu_affinity,pinned");
    assert_true(row_value(csv, "cpu_affinity,pinned", "check_rel_diff") == 0.0);
    uint64_t usable = cpu_usable_mask(), compute = cpu_mask_lowest(usable, cpus - 1);
    double pinned_compute = row_value(csv, "cpu_affinity,pinned", "compute_cpus");
    double pinned_worker = row_value(csv, "cpu_affinity,pinned", "worker_cpus");
    printf("pinned: compute ran on mask %.0f, the worker may run on %.0f (last on %.0f)\n", pinned_compute,
           pinned_worker, row_value(csv, "cpu_affinity,pinned", "worker_last_cpus"));
    assert_true(pinned_compute == (double)compute);
    assert_true(pinned_worker == (double)(usable & ~compute));
    assert_true(row_value(csv, "cpu_affinity,pinned", "worker_last_cpus") == (double)(usable & ~compute));
    assert_int_equal((int)row_value(csv, "cpu_affinity,pinned", "cpus_shared"), 0);
    assert_true(row_value(csv, "cpu_affinity,unpinned", "worker_cpus") == (double)usable);
    free(csv);
}

static void test_numa_skips_on_one_node(void **state)
{
    (void)state;
    int ids[CPU_TOPOLOGY_MAX_NODES];
    uint64_t node_cpus[CPU_TOPOLOGY_MAX_NODES];
    int nodes = numa_nodes("/sys/devices/system/node", ids, node_cpus, CPU_TOPOLOGY_MAX_NODES);
    if (nodes != 1) skip();  // two nodes or more run; no sysfs says something else
    char *csv = test_bench_csv(PROGRAM, "--benchmark_filter='^numa/.*preset:tiny/'");
    assert_non_null(csv);
    char status[32], reason[512];
    assert_true(test_csv_row_value(csv, "numa,node_bound", TINY, "status", status, sizeof status));
    assert_true(test_csv_row_value(csv, "numa,node_bound", TINY, "reason", reason, sizeof reason));
    printf("numa/node_bound: %s (%s)\n", status, reason);
    assert_string_equal(status, "skipped");
    assert_non_null(strstr(reason, "one NUMA node here (node"));
    assert_non_null(strstr(reason, "binding changes nothing"));
    assert_true(test_csv_row_value(csv, "numa,unbound", TINY, "status", status, sizeof status));
    assert_string_equal(status, "skipped");
    free(csv);
}

// A two-node fixture (node0: the first usable CPU; node1: the others): the bound path runs,
// bit-identical, its compute on node 0's CPU alone.
static void test_numa_bound_on_fixture(void **state)
{
    (void)state;
    const char *dir = test_dir;
    if (usable_cpus() < 2) skip();
    uint64_t usable = cpu_usable_mask(), first = cpu_mask_lowest(usable, 1);
    char text[256];
    assert_int_equal(test_run("mkdir -p '%s/node0' '%s/node1'", dir, dir), 0);
    cpu_list_format(first, text, sizeof text);
    strcat(text, "\n");
    assert_true(test_write_file(dir, "node0/cpulist", text));
    cpu_list_format(usable & ~first, text, sizeof text);
    assert_true(test_write_file(dir, "node1/cpulist", text));
    char args[1200];
    snprintf(args, sizeof args, "--benchmark_filter='^numa/.*preset:tiny/' --benchmark_min_time=0.01 --numa_root='%s'",
             dir);
    char *csv = test_bench_csv(PROGRAM, args);
    assert_non_null(csv);
    assert_row_ok(csv, "numa,unbound");
    assert_row_ok(csv, "numa,node_bound");
    assert_true(row_value(csv, "numa,node_bound", "check_rel_diff") == 0.0);
    assert_true(row_value(csv, "numa,node_bound", "compute_cpus") == (double)first);
    assert_int_equal((int)row_value(csv, "numa,node_bound", "compute_threads"), 1);
    free(csv);
}

static const char *const tuned_pinned[] = {"pinned"};

// A broken tuned row (half its learning rate) fails the check: bit for bit, and within
// THREADS_TOL.
static void test_selftest_half_lr_fails(void **state)
{
    (void)state;
    if (usable_cpus() < 2) skip();
    assert_true(test_selftest_fails(PROGRAM, "--benchmark_filter='^cpu_affinity/.*preset:tiny/' --benchmark_min_time=0.01",
                                    "half_lr", "cpu_affinity", "unpinned", tuned_pinned, 1,
                                    "bit-identical wanted") >= 1);
    char tuned[24];
    snprintf(tuned, sizeof tuned, "threads_%d", usable_cpus());
    const char *const tuned_threads[] = {tuned};
    assert_true(test_selftest_fails(PROGRAM, "--benchmark_filter='^cpu_threads/.*preset:tiny/' --benchmark_min_time=0.01",
                                    "half_lr", "cpu_threads", "threads_1", tuned_threads, 1,
                                    "differ from the baseline's") >= 1);
}

static void test_cpu_list_parse(void **state)
{
    (void)state;
    uint64_t m;
    assert_int_equal(cpu_list_parse("0-3,8,10-11\n", &m), 0);
    assert_true(m == 0xD0Full);
    assert_int_equal(cpu_list_parse("", &m), 0);
    assert_true(m == 0);
    assert_int_equal(cpu_list_parse("62-70", &m), 0);  // past 64: left out
    assert_true(m == 0xC000000000000000ull);
    assert_int_equal(cpu_list_parse("3-1", &m), -1);
    assert_int_equal(cpu_list_parse("a", &m), -1);
    assert_int_equal(cpu_list_parse("1,,2", &m), -1);
    char text[64];
    cpu_list_format(0xD0Full, text, sizeof text);
    assert_string_equal(text, "0-3,8,10-11");
    cpu_list_format(0, text, sizeof text);
    assert_string_equal(text, "none");
    assert_true(cpu_mask_lowest(0xD0Full, 5) == 0x10Full);
}

static void test_numa_nodes_fixture(void **state)
{
    (void)state;
    const char *dir = test_dir;
    assert_int_equal(test_run("mkdir -p '%s/node10' '%s/node2' '%s/nodeX' '%s/other'", dir, dir, dir, dir), 0);
    assert_true(test_write_file(dir, "node10/cpulist", "4-5\n"));
    assert_true(test_write_file(dir, "node2/cpulist", "0-1,3\n"));
    int ids[4];
    uint64_t cpus[4];
    assert_int_equal(numa_nodes(dir, ids, cpus, 4), 2);  // nodeX and other are not nodes
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 10);
    assert_true(cpus[0] == 0xB && cpus[1] == 0x30);
    assert_true(test_write_file(dir, "node2/cpulist", "zero\n"));
    assert_int_equal(numa_nodes(dir, ids, cpus, 4), -1);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/absent", dir);
    assert_int_equal(numa_nodes(missing, ids, cpus, 4), 0);
}

static void count_task(void *ctx, int task)
{
    (void)task;
    volatile double x = 0;
    for (int i = 0; i < 200000; i++) x += i;
    __atomic_fetch_add((int *)ctx, 1, __ATOMIC_RELAXED);
}

// Bound to one CPU, every task runs there (the caller's and the workers'); unbound, the
// thread gets its CPUs back.
static void test_pool_bind(void **state)
{
    (void)state;
    uint64_t usable = cpu_usable_mask(), first = cpu_mask_lowest(usable, 1);
    int done = 0;
    cpu_pool_run(2, 8, count_task, &done);  // workers started before the binding are bound too
    assert_int_equal(cpu_pool_bind(first), 0);
    assert_true(cpu_usable_mask() == first);
    cpu_pool_cpus_used();
    cpu_pool_run(2, 8, count_task, &done);
    assert_true(cpu_pool_cpus_used() == first);
    assert_int_equal(cpu_pool_bind(0), 0);
    assert_true(cpu_usable_mask() == usable);
    assert_int_equal(done, 16);
    assert_true((cpu_pool_cpus_used() & ~usable) == 0);
}

static void test_loader_worker_cpus(void **state)
{
    (void)state;
    uint64_t usable = cpu_usable_mask();
    uint64_t last = (uint64_t)1 << (63 - __builtin_clzll(usable));  // the highest usable CPU
    char root[600];
    Dataset ds;
    assert_int_equal(testutil_make_dataset(test_dir, 2, 4, 40, 36, root, sizeof root), 0);
    assert_int_equal(dataset_scan(root, &ds), 0);
    LoaderConfig cfg = loader_default_config(&ds, 4);
    cfg.num_workers = 1;
    cfg.augment = augment_default_config(16);
    cfg.worker_cpus = last;
    Loader *l = NULL;
    assert_int_equal(loader_create(&cfg, &l), 0);
    LoaderBatch b;
    assert_int_equal(loader_next_batch(l, &b), 1);  // the worker ran, on its CPU
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(loader_worker_pid(l, 0), sizeof set, &set), 0);
    assert_int_equal(CPU_COUNT(&set), 1);
    assert_true(CPU_ISSET(__builtin_ctzll(last), &set));
    loader_destroy(l);
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    if (cpus > 0 && cpus < 63) {  // a CPU the machine does not have
        cfg.worker_cpus = (uint64_t)1 << 63;
        assert_int_equal(loader_create(&cfg, &l), -1);
        assert_int_equal(error_kind(), ERROR_BAD_USAGE);
        assert_non_null(strstr(error_message(), "worker_cpus"));
    }
    dataset_free(&ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_list_parse),
        cmocka_unit_test_setup_teardown(test_numa_nodes_fixture, test_setup_dir, test_teardown_dir),
        cmocka_unit_test(test_pool_bind),
        cmocka_unit_test_setup_teardown(test_loader_worker_cpus, test_setup_dir, test_teardown_dir),
        cmocka_unit_test(test_lists_families),
        cmocka_unit_test(test_tiny_rows),
        cmocka_unit_test(test_numa_skips_on_one_node),
        cmocka_unit_test_setup_teardown(test_numa_bound_on_fixture, test_setup_dir, test_teardown_dir),
        cmocka_unit_test(test_selftest_half_lr_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
