// test_twin_model.c: the PyTorch twins of the model practices (scripts/twin/practices:
// grad_accum, checkpoint, conv_bias, bn_fold, inference, fusion, batch_size, amp, tf32,
// layout; shared steps and checks in _training.py), each run through scripts/twin/probe.py on
// one tiny row each (seconds each; fusion's torch.compile about half a minute the first time
// on a machine, seconds once Inductor's cache has it):
//   - every module's CPU rows check and step: each tuned variant's check passes (the update,
//     or the logits, within the core's tolerance for that practice), every variant steps;
//   - under --selftest no_update (each tuned variant's optimiser step skipped) every tuned
//     check fails, so the probe exits 1: a PyTorch variant that does not train fails its row;
//   - the GPU-only practices (amp, amp_tf32, layout) skip visibly on the CPU, naming why;
//   - batch 0 is the preset's batch: the images a step of a "batch:0" row processes equal
//     the core's own preset batch (core_config_preset), for tiny and mlp.
// Skips, visibly, when the twin's Python cannot import torch (scripts/setup.sh installs it),
// and fails instead when SUITE_REQUIRE_TORCH=1, as tests/test_twin.c.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kernels/core.h"
#include "tests/support.h"

// The modules with CPU rows, each with the one tiny row the tests probe; those GPU-only.
typedef struct Module { const char *name, *row; } Module;
static const Module cpu_modules[] = {
    {"grad_accum", "preset:tiny;batch:0"}, {"checkpoint", "preset:tiny;batch:8"},
    {"conv_bias", "preset:tiny;batch:0"}, {"bn_fold", "preset:tiny;batch:8"},
    {"inference", "preset:tiny;batch:16"}, {"fusion", "preset:tiny;batch:0"},
    {"batch_size", "preset:tiny;batch:32"},
};
static const char *const gpu_modules[] = {"amp", "tf32", "layout"};
#define N_CPU (sizeof cpu_modules / sizeof cpu_modules[0])
#define N_GPU (sizeof gpu_modules / sizeof gpu_modules[0])

// The Python the twin runs with: $PYTHON, else cache/venv (scripts/setup.sh), else python3.
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

// probe.py MODULE on the CPU, one thread, one step, the rows whose params have `only`,
// with `extra` flags; its output (malloc'd, shown) and exit status in *rc.
static char *probe(const char *module, const char *only, const char *extra, int *rc)
{
    char name[128];
    snprintf(name, sizeof name, "%s%s.txt", module, extra[0] ? "-selftest" : "");
    fflush(stdout);
    *rc = test_run("cd '%s/scripts' && '%s' twin/probe.py %s --device cpu --threads 1 --steps 1 --only '%s' %s "
                   ">'%s/%s' 2>&1", test_suite_root(), python(), module, only, extra, test_dir, name);
    test_run("grep -v Warning '%s/%s'", test_dir, name);
    char *out = test_read_in(test_dir, name);
    assert_non_null(out);
    return out;
}

// Lines of text that contain every one of the NULL-terminated needles.
static int count_lines_with(const char *text, ...)
{
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        va_list ap;
        va_start(ap, text);
        bool all = true;
        for (const char *needle = va_arg(ap, const char *); needle; needle = va_arg(ap, const char *))
            all = all && strstr(buf, needle) != NULL;
        va_end(ap);
        n += all;
        line = end ? end + 1 : NULL;
    }
    return n;
}

static void test_cpu_rows_check_and_step(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    for (size_t i = 0; i < N_CPU; i++) {
        int rc;
        char *out = probe(cpu_modules[i].name, cpu_modules[i].row, "", &rc);
        int fused_skipped = count_lines_with(out, "pytorch_fusion", "skipped: torch.compile", NULL);
        assert_int_equal(rc, 0);
        assert_int_equal(count_lines_with(out, " check ", "FAILED", NULL), 0);
        if (fused_skipped) {  // no compiler here: a visible skip is the row's outcome
            printf("fusion skipped here: no working torch.compile\n");
            free(out);
            continue;
        }
        // a check per tuned variant passed, and every variant (baseline, tuned, reference) stepped
        assert_true(count_lines_with(out, " check ", " ok rel_diff ", NULL) > 0);
        assert_true(count_lines_with(out, " ms_per_step ", " items ", NULL) >= count_lines_with(out, " check ", NULL));
        free(out);
    }
}

static void test_no_update_fails_every_tuned_check(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    for (size_t i = 0; i < N_CPU; i++) {
        int rc;
        char *out = probe(cpu_modules[i].name, cpu_modules[i].row, "--selftest no_update", &rc);
        if (count_lines_with(out, "pytorch_fusion", "skipped: torch.compile", NULL)) {
            free(out);
            continue;
        }
        int checks = count_lines_with(out, " check ", NULL);
        printf("%s: %d checks under no_update\n", cpu_modules[i].name, checks);
        assert_true(checks > 0);
        assert_int_equal(count_lines_with(out, " check ", " FAILED rel_diff ", NULL), checks);
        assert_int_equal(rc, 1);
        free(out);
    }
}

static void test_gpu_practices_skip_visibly_on_the_cpu(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    for (size_t i = 0; i < N_GPU; i++) {
        int rc;
        char *out = probe(gpu_modules[i], "", "", &rc);
        assert_int_equal(rc, 0);
        int rows = count_lines_with(out, "probe: pytorch_", NULL);
        assert_true(rows > 0);
        assert_int_equal(count_lines_with(out, "skipped: a GPU practice: the core runs it on CUDA only", NULL), rows);
        free(out);
    }
}

// The images a step of the preset's "batch:0" rows processes (grad_accum's one_batch) must
// be the core's own batch of that preset.
static void test_batch_zero_is_the_presets_batch(void **state)
{
    (void)state;
    REQUIRE_TORCH();
    static const char *const presets[] = {"tiny", "mlp"};
    for (size_t i = 0; i < 2; i++) {
        CoreConfig cfg;
        assert_int_equal(core_config_preset(&cfg, presets[i]), 0);
        char only[64];
        snprintf(only, sizeof only, "preset:%s;batch:0", presets[i]);
        int rc;
        char *out = probe("grad_accum", only, "", &rc);
        assert_int_equal(rc, 0);
        assert_int_equal(count_lines_with(out, " one_batch baseline ms_per_step ", NULL), 1);
        const char *line = strstr(out, " one_batch baseline ms_per_step ");
        const char *items = strstr(line, " items "), *end = strchr(line, '\n');
        assert_true(items && (!end || items < end));
        printf("%s batch:0: %d images per step, the core's preset batch %d\n", presets[i], atoi(items + 7),
               cfg.batch_size);
        assert_int_equal(atoi(items + 7), cfg.batch_size);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cpu_rows_check_and_step, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_no_update_fails_every_tuned_check, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_gpu_practices_skip_visibly_on_the_cpu, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_batch_zero_is_the_presets_batch, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
