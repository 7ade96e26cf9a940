// test_twin_data.c: the PyTorch twins of the data, distributed and GPU-transfer practices
// (scripts/twin/practices/{workers,ddp,gpu}.py), through scripts/twin/probe.py and the
// modules themselves: the DataLoader rows read the same files as the core's loader (the
// same count as build/datasets check on the same folder), every tuned loader gives the
// baseline's batches bit for bit and the loader-fed training check fails when the tuned
// variant does not update; the DDP ranks' update equals DataParallel's algorithm on the
// same batch, and fails when the ranks skip their update; the CUDA-only practices are
// visible skips on the CPU. Skips, visibly, without torch (fails with SUITE_REQUIRE_TORCH=1),
// as test_twin.c. About a minute here (two loader probes, two DDP groups of 2 ranks).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support.h"

static const char *python(void)
{
    static char venv[4096];
    const char *p = getenv("PYTHON");
    if (p && *p) return p;
    snprintf(venv, sizeof venv, "%s/cache/venv/bin/python", test_suite_root());
    return access(venv, X_OK) == 0 ? venv : "python3";
}

static bool torch_required(void)
{
    const char *r = getenv("SUITE_REQUIRE_TORCH");
    return r && strcmp(r, "1") == 0;
}

static bool torch_missing(void)
{
    static int missing = -1;
    if (missing < 0) {
        missing = test_run("'%s' -c 'import torch' >/dev/null 2>&1", python()) != 0;
        if (missing)
            printf("%s: %s cannot import torch, so the PyTorch twins cannot run; scripts/setup.sh "
                   "installs it into cache/venv, or set PYTHON to a Python that has it\n",
                   torch_required() ? "FAILED" : "skipped", python());
        fflush(stdout);
    }
    return missing;
}

#define REQUIRE_TORCH() do { \
        if (torch_missing()) { \
            if (torch_required()) fail_msg("SUITE_REQUIRE_TORCH=1 and %s has no torch", python()); \
            skip(); \
        } \
    } while (0)

// Runs a command in scripts/ (where the twin package is) with its output in test_dir/NAME,
// shown; its exit status, the output in *out (the caller frees it).
static int run_in_scripts(const char *name, char **out, const char *cmd)
{
    fflush(stdout);
    int rc = test_run("cd '%s/scripts' && %s >'%s/%s' 2>&1", test_suite_root(), cmd, test_dir, name);
    test_run("cat '%s/%s'", test_dir, name);
    *out = test_read_in(test_dir, name);
    assert_non_null(*out);
    return rc;
}

static int probe(const char *name, char **out, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 600 '%s' twin/probe.py %s", python(), args);
    return run_in_scripts(name, out, cmd);
}

static void test_loader_rows_read_the_cores_files(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    // a generated dataset in test_dir, read by the core's loader and by the twin's scan
    assert_int_equal(test_run("'%s/datasets' generate tiny '%s/ds' >/dev/null", test_build_dir(), test_dir), 0);
    assert_int_equal(test_run("'%s/datasets' check '%s/ds' 0 >'%s/core.txt' 2>&1", test_build_dir(), test_dir,
                              test_dir), 0);
    char *core = test_read_in(test_dir, "core.txt"), *twin = NULL;
    const char *n = strstr(core, "delivered ");
    assert_non_null(n);
    long core_count = strtol(n + strlen("delivered "), NULL, 10);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' -c 'from twin.practices import _data as data; d = data.JpegFolder(\"%s/ds\", 16); "
             "print(\"twin files\", len(d), d[(0, 0)][0].shape[-1])'", python(), test_dir);
    assert_int_equal(run_in_scripts("twin.txt", &twin, cmd), 0);
    char want[64];
    snprintf(want, sizeof want, "twin files %ld 16", core_count);
    assert_true(core_count == 24);
    assert_non_null(strstr(twin, want));
    free(core);
    free(twin);
}

static void test_loader_probe_passes_and_its_check_can_fail(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    char *out;
    assert_int_equal(probe("workers.txt", &out, "workers --steps 1"), 0);
    assert_non_null(strstr(out, "pytorch_num_workers batch:64 check workers_1 ok rel_diff 0 "));
    assert_non_null(strstr(out, "pytorch_persistent_workers batch:64 check persistent_workers_"));
    assert_non_null(strstr(out, "pytorch_num_workers_train preset:mlp;batch:64 check workers_1 ok"));
    assert_non_null(strstr(out, "pytorch_num_workers_large_source batch:64 workers_0 baseline ms_per_step"));
    assert_null(strstr(out, "FAILED"));
    free(out);
    // the training variant that skips its update fails its check, and is not timed
    assert_int_equal(probe("workers_selftest.txt", &out, "workers --steps 1 --selftest no_update"), 1);
    assert_non_null(strstr(out, "pytorch_num_workers_train preset:mlp;batch:64 check workers_1 FAILED"));
    assert_null(strstr(out, "pytorch_num_workers_train preset:mlp;batch:64 workers_1 tuned"));
    free(out);
}

static void test_ddp_check_passes_and_fails_without_update(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    char *out, cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 600 '%s' -c 'from twin.api import Context; from twin.practices import ddp; "
             "r = ddp.scaling_row(2); print(\"good\", r.check(Context())); "
             "print(\"selftest\", r.check(Context(selftest=\"no_update\")))'", python());
    assert_int_equal(run_in_scripts("ddp.txt", &out, cmd), 0);
    const char *good = strstr(out, "good ["), *bad = strstr(out, "selftest [");
    assert_non_null(good);
    assert_non_null(bad);
    assert_non_null(strstr(good, "variant='ddp', ok=True"));
    assert_non_null(strstr(bad, "variant='ddp', ok=False, rel_diff=1.0"));
    free(out);
}

static void test_gpu_practices_skip_visibly_on_the_cpu(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    char *out;
    assert_int_equal(probe("gpu.txt", &out, "gpu --device cpu"), 0);
    const char *names[] = {"pin_memory", "on_device", "cudnn_benchmark", "cudnn_benchmark_dynamic", "cuda_graphs"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char want[128];
        snprintf(want, sizeof want, "pytorch_%s preset", names[i]);
        if (i == 0) snprintf(want, sizeof want, "pytorch_pin_memory h2d:1;bytes:4096 skipped: CUDA-only");
        assert_non_null(strstr(out, want));
    }
    assert_null(strstr(out, " ms_per_step "));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader_rows_read_the_cores_files),
        cmocka_unit_test(test_loader_probe_passes_and_its_check_can_fail),
        cmocka_unit_test(test_ddp_check_passes_and_fails_without_update),
        cmocka_unit_test(test_gpu_practices_skip_visibly_on_the_cpu),
    };
    return cmocka_run_group_tests(tests, test_setup_dir, test_teardown_dir);
}
