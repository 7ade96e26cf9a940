// test_bench_fused_optimizer.c: the fused/foreach optimizer practice (build/bench_fused_optimizer)
// and its updates (bench/fused_optimizer/optim_update.h). The program lists per_tensor
// (baseline) and multi_tensor (tuned) for tiny, mlp and small and both optimizers; tiny runs
// on whatever backend this machine has: every row ok, multi_tensor's parameters and state
// equal per_tensor's bit for bit after 3 updates (wrong_values 0), one call (CPU) against one
// per tensor; --practice_selftest (multi_tensor leaves its last tensor out) fails the
// multi_tensor rows. The per-element updates are PyTorch's: SGD's against its formula, and
// AdamW's first steps against torch.optim.AdamW's, computed here in double.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "bench/fused_optimizer/optim_update.h"
#include "tests/support.h"

#define TINY_ARGS "--benchmark_filter='preset:tiny/' --benchmark_min_time=0.01"

static void test_lists_families(void **state)
{
    (void)state;
    char *list = test_bench_list("bench_fused_optimizer");
    assert_non_null(list);
    const char *variants[] = {"per_tensor", "multi_tensor"}, *presets[] = {"tiny", "mlp", "small"},
               *optims[] = {"sgd", "adamw"};
    for (int v = 0; v < 2; v++)
        for (int p = 0; p < 3; p++)
            for (int o = 0; o < 2; o++) {
                char name[128];
                snprintf(name, sizeof name, "fused_optimizer/%s/preset:%s/batch:0/optimizer:%s/", variants[v],
                         presets[p], optims[o]);
                if (!strstr(list, name)) fail_msg("%s is not listed", name);
            }
    free(list);
}

static void test_tiny_rows_ok_and_bit_identical(void **state)
{
    (void)state;
    char *csv = test_bench_csv("bench_fused_optimizer", TINY_ARGS);
    assert_non_null(csv);
    int rows = 0, checked = 0;
    bool gpu = test_gpu_present();
    for (const char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char variant[32], status[32], optim[32];
        test_csv_named_field(csv, line + 1, "variant", variant, sizeof variant);
        test_csv_named_field(csv, line + 1, "status", status, sizeof status);
        test_csv_named_field(csv, line + 1, "param_optimizer", optim, sizeof optim);
        assert_string_equal(status, "ok");
        double tensors = test_csv_number(csv, line + 1, "tensors"), launches = test_csv_number(csv, line + 1, "launches_per_update");
        printf("%s/%s: %g tensors, %g launches, %.4f MiB\n", variant, optim, tensors, launches,
               test_csv_number(csv, line + 1, "parameter_mib"));
        assert_true(tensors > 4 && test_csv_number(csv, line + 1, "parameter_mib") > 0);
        if (strcmp(variant, "per_tensor") == 0) {
            assert_true(launches == tensors);
        } else {
            assert_string_equal(variant, "multi_tensor");
            assert_true(gpu ? launches >= 1 && launches < tensors : launches == 1);
            assert_true(test_csv_number(csv, line + 1, "wrong") == 0);
            assert_true(test_csv_number(csv, line + 1, "wrong_values") == 0);
            checked++;
        }
        rows++;
    }
    assert_int_equal(rows, 4);
    assert_int_equal(checked, 2);
    free(csv);
}

static const char *const multi[] = {"multi_tensor"};

static void test_selftest_fails_multi_tensor(void **state)
{
    (void)state;
    // both optimizers' multi_tensor rows
    assert_int_equal(test_selftest_fails("bench_fused_optimizer", TINY_ARGS, "frozen", "fused_optimizer",
                                         "per_tensor", multi, 1, "differ from per_tensor's after 3 updates"),
                     2);
}

static void test_tensors_tile_the_parameters(void **state)
{
    (void)state;
    const char *presets[] = {"tiny", "mlp", "small"};
    for (int p = 0; p < 3; p++) {
        CoreConfig cfg;
        assert_int_equal(core_config_preset(&cfg, presets[p]), 0);
        Core *core = test_core_create(&cfg);
        OptimTensor t[512];
        int n = optim_model_tensors(&cfg.model, t, 512);
        assert_true(n > 1 && n <= 512);
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            assert_int_equal(t[i].offset, at);
            at += t[i].count;
        }
        assert_int_equal(at, core_param_count(core));
        core_free(core);
    }
}

static void test_sgd_is_the_formula(void **state)
{
    (void)state;
    float p[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.1f, 0.3f, -0.2f}, buf[3] = {0};
    double pd[3] = {1.0, -2.0, 0.5}, bd[3] = {0};
    const float lr = 0.1f, m = 0.9f, wd = 5e-4f;
    for (int step = 0; step < 3; step++) {
        optim_sgd_span(p, g, buf, 0, 3, lr, m, wd);
        for (int i = 0; i < 3; i++) {
            double gi = g[i] + (double)wd * pd[i];
            bd[i] = m * bd[i] + gi;
            pd[i] -= lr * bd[i];
        }
    }
    for (int i = 0; i < 3; i++) assert_true(fabs(p[i] - pd[i]) <= 1e-6 * fabs(pd[i]) + 1e-7);
}

// torch.optim.AdamW (decoupled weight decay, bias correction, eps outside the sqrt) in double.
static void test_adamw_is_pytorchs(void **state)
{
    (void)state;
    OptimHyper h = {.lr = 1e-3f, .weight_decay = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    float p[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.1f, 3e-4f, -0.2f}, m[3] = {0}, v[3] = {0};
    double pd[3] = {1.0, -2.0, 0.5}, md[3] = {0}, vd[3] = {0};
    for (int step = 0; step < 4; step++) {
        AdamwStep s = optim_adamw_step_of(&h, step);
        optim_adamw_span(p, g, m, v, 0, 3, &s);
        double t = step + 1, b1 = h.beta1, b2 = h.beta2;
        for (int i = 0; i < 3; i++) {
            pd[i] *= 1.0 - (double)h.lr * h.weight_decay;
            md[i] = b1 * md[i] + (1.0 - b1) * g[i];
            vd[i] = b2 * vd[i] + (1.0 - b2) * (double)g[i] * g[i];
            double mhat = md[i] / (1.0 - pow(b1, t)), vhat_sqrt = sqrt(vd[i]) / sqrt(1.0 - pow(b2, t));
            pd[i] -= h.lr * mhat / (vhat_sqrt + h.eps);
        }
    }
    for (int i = 0; i < 3; i++) {
        printf("AdamW after 4 steps: %.9g (double %.9g)\n", p[i], pd[i]);
        assert_true(fabs(p[i] - pd[i]) <= 2e-6 * fabs(pd[i]));
        // each step moves a parameter by about lr (Adam's normalised step): 4e-3 in all
        assert_true(fabs(pd[i] - (i == 0 ? 1.0 : i == 1 ? -2.0 : 0.5)) > 3e-3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_families),
        cmocka_unit_test(test_tiny_rows_ok_and_bit_identical),
        cmocka_unit_test(test_selftest_fails_multi_tensor),
        cmocka_unit_test(test_tensors_tile_the_parameters),
        cmocka_unit_test(test_sgd_is_the_formula),
        cmocka_unit_test(test_adamw_is_pytorchs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
