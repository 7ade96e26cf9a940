// test_gpu_quiet.c: the GPU side of noise. The rule that says a repetition ran throttled
// (gpu_sample_throttled) at its boundaries; NVML's samples as a run's counters (power
// included, through a stand-in NVML on a machine without one); the context keys that make
// GPU numbers comparable, on every machine ("n/a (no GPU)" without one); and report.md
// naming what was not quiet, from made-up contexts.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/driver/context.h"
#include "tests/support.h"

// The keys context_collect adds for the GPU's quietness (docs/results-format.md).
static const char *const quiet_keys[] = {
    "gpu_persistence_mode", "gpu_app_sm_clock_mhz", "gpu_app_mem_clock_mhz", "gpu_default_app_sm_clock_mhz",
    "gpu_default_app_mem_clock_mhz", "gpu_sm_clock_p0_range_mhz", "gpu_mem_clock_p0_range_mhz",
    "gpu_clocks_locked", "gpu_power_limit_w", "gpu_power_limit_default_w", "gpu_power_limit_enforced_w",
    "gpu_ecc_mode", "gpu_mig_mode", "gpu_pcie_gen", "gpu_pcie_gen_max", "gpu_pcie_width", "gpu_pcie_width_max",
    "gpu_nvlink_active", "gpu_other_processes"};
#define N_QUIET_KEYS (sizeof quiet_keys / sizeof quiet_keys[0])

static GpuState clock_sample(unsigned mhz)
{
    GpuState s = {0};
    s.has_clock = true;
    s.sm_clock_mhz = mhz;
    return s;
}

static GpuState reasons_sample(unsigned mhz, unsigned long long reasons)
{
    GpuState s = clock_sample(mhz);
    s.has_throttle = true;
    s.throttle_reasons = reasons;
    return s;
}

// Under 75% of the reference clock is throttled, 75% itself is not; the locked clock is
// the reference when there is one, else the default (maximum) clock.
static void test_throttled_below_75_percent_of_the_reference(void **state)
{
    (void)state;
    GpuClockReference by_default = {.locked_sm_mhz = 0, .default_sm_mhz = 2000};
    GpuClockReference locked = {.locked_sm_mhz = 1000, .default_sm_mhz = 2000};
    GpuState before = clock_sample(1980), after = clock_sample(1500);
    assert_false(gpu_sample_throttled(&before, &after, &by_default)); // 1500 = 75% of 2000
    after = clock_sample(1499);
    assert_true(gpu_sample_throttled(&before, &after, &by_default));
    assert_true(gpu_sample_throttled(NULL, &after, &by_default)); // no sample before: the one after decides
    // locked at 1000 MHz: 1499 is well above 75% of it, 750 is 75%, 749 is under
    assert_false(gpu_sample_throttled(&before, &after, &locked));
    after = clock_sample(750);
    assert_false(gpu_sample_throttled(&before, &after, &locked));
    after = clock_sample(749);
    assert_true(gpu_sample_throttled(&before, &after, &locked));
    // the clock is judged after the run only: a slow clock before it is the idle GPU waking
    before = clock_sample(300);
    after = clock_sample(1900);
    assert_false(gpu_sample_throttled(&before, &after, &by_default));
    // what NVML did not say discards nothing: no reference clock, no clock after the run
    GpuClockReference unknown = {0, 0};
    after = clock_sample(100);
    assert_false(gpu_sample_throttled(&before, &after, &unknown));
    assert_false(gpu_sample_throttled(&before, &after, NULL));
    after.has_clock = false;
    assert_false(gpu_sample_throttled(&before, &after, &by_default));
    // an idle GPU (reason 0x1: the run ended, or it was host-bound) lowers its clock: not throttling
    after = reasons_sample(300, 0x1);
    assert_false(gpu_sample_throttled(NULL, &after, &by_default));
    after = reasons_sample(300, 0x0);
    assert_true(gpu_sample_throttled(NULL, &after, &by_default));
}

// Hardware slowdown, software and hardware thermal slowdown and the power brake are
// throttling, before or after the run, whatever the clock; idle, user-set clocks, the
// power cap (a loaded GPU's normal state), sync boost and display clocks are not.
static void test_throttled_by_each_reason_bit(void **state)
{
    (void)state;
    GpuClockReference ref = {.locked_sm_mhz = 0, .default_sm_mhz = 2000};
    const unsigned long long throttling[] = {0x8, 0x20, 0x40, 0x80};
    const unsigned long long normal[] = {0x1, 0x2, 0x4, 0x10, 0x100};
    GpuState quiet = reasons_sample(1900, 0);
    for (size_t i = 0; i < sizeof throttling / sizeof throttling[0]; i++) {
        GpuState set = reasons_sample(1900, throttling[i] | 0x4);
        assert_true(gpu_sample_throttled(&quiet, &set, &ref));
        assert_true(gpu_sample_throttled(&set, &quiet, &ref)); // throttled when the run started
        assert_true(gpu_sample_throttled(NULL, &set, NULL));
        set.has_throttle = false; // bits NVML did not give are not read
        assert_false(gpu_sample_throttled(&quiet, &set, &ref));
    }
    for (size_t i = 0; i < sizeof normal / sizeof normal[0]; i++) {
        GpuState set = reasons_sample(1900, normal[i]);
        assert_false(gpu_sample_throttled(&set, &set, &ref));
    }
    assert_false(gpu_sample_throttled(&quiet, &quiet, &ref));
    assert_int_equal(GPU_THROTTLE_REASONS, 0x8 | 0x20 | 0x40 | 0x80);
}

// A sample's counters: what NVML gave, named by when it was taken; power in watts.
static void test_sample_counters(void **state)
{
    (void)state;
    GpuState s = reasons_sample(1755, 0x4);
    s.has_temperature = true;
    s.temperature_c = 61;
    s.has_power = true;
    s.power_w = 612.5;
    GpuStateCounter c[GPU_STATE_MAX_COUNTERS];
    int n = context_gpu_state_counters(&s, "after", c);
    assert_int_equal(n, 4);
    const char *names[] = {"gpu_sm_clock_after_mhz", "gpu_temp_after_c", "gpu_throttle_after", "gpu_power_after_w"};
    const double values[] = {1755, 61, 4, 612.5};
    for (int i = 0; i < n; i++) {
        assert_string_equal(c[i].name, names[i]);
        assert_true(c[i].value == values[i]);
    }
    s.has_clock = s.has_temperature = s.has_throttle = false;
    n = context_gpu_state_counters(&s, "before", c);
    assert_int_equal(n, 1);
    assert_string_equal(c[0].name, "gpu_power_before_w");
    s.has_power = false;
    assert_int_equal(context_gpu_state_counters(&s, "before", c), 0);
}

// Every quietness key is in the context, on every machine: without a GPU each says so,
// with one each has a value (a number, a mode, or "unknown (why)"). build/context, which
// writes a run's context.txt, prints them.
static void test_context_has_the_quietness_keys(void **state)
{
    (void)state;
    SuiteContext *c = malloc(sizeof *c);
    assert_non_null(c);
    context_collect(c);
    bool gpu = test_gpu_present();
    for (size_t i = 0; i < N_QUIET_KEYS; i++) {
        const char *v = context_get(c, quiet_keys[i]);
        if (!gpu) {
            if (strcmp(v, "n/a (no GPU)") != 0) fail_msg("%s is '%s' without a GPU", quiet_keys[i], v);
        } else if (!v[0] || strncmp(v, "n/a", 3) == 0) {
            fail_msg("%s is '%s' with a GPU", quiet_keys[i], v);
        }
    }
    GpuClockReference ref;
    context_clock_reference(c, &ref);
    if (!gpu) assert_true(ref.locked_sm_mhz == 0 && ref.default_sm_mhz == 0);
    else assert_true(ref.default_sm_mhz > 0 || strcmp(context_get(c, "gpu_sm_clock_max_mhz"), "none") == 0);
    free(c);
    char *out = NULL;
    assert_int_equal(test_run("'%s/context' >'%s/context.txt'", test_build_dir(), test_dir), 0);
    out = test_read_in(test_dir, "context.txt");
    assert_non_null(out);
    for (size_t i = 0; i < N_QUIET_KEYS; i++) {
        char want[80];
        snprintf(want, sizeof want, "\n%s=%s", quiet_keys[i], gpu ? "" : "n/a (no GPU)\n");
        if (!strstr(out, want)) fail_msg("build/context does not print '%s' in:\n%s", want + 1, out);
    }
    free(out);
}

// The reference clock read back from a context: the locked clock when locked, the
// maximum SM clock, 0 for anything else.
static void test_clock_reference_from_a_context(void **state)
{
    (void)state;
    SuiteContext c = {0};
    const char *rows[][2] = {{"gpu_clocks_locked", "yes (SM 1410 MHz)"}, {"gpu_sm_clock_max_mhz", "1980"}};
    for (int i = 0; i < 2; i++) {
        snprintf(c.keys[i], sizeof c.keys[i], "%s", rows[i][0]);
        snprintf(c.values[i], sizeof c.values[i], "%s", rows[i][1]);
    }
    c.count = 2;
    GpuClockReference ref;
    context_clock_reference(&c, &ref);
    assert_int_equal(ref.locked_sm_mhz, 1410);
    assert_int_equal(ref.default_sm_mhz, 1980);
    snprintf(c.values[0], sizeof c.values[0], "no");
    snprintf(c.values[1], sizeof c.values[1], "none");
    context_clock_reference(&c, &ref);
    assert_int_equal(ref.locked_sm_mhz, 0);
    assert_int_equal(ref.default_sm_mhz, 0);
    snprintf(c.values[0], sizeof c.values[0], "unknown (Not Supported)");
    context_clock_reference(&c, &ref);
    assert_int_equal(ref.locked_sm_mhz, 0);
}

// report.md of a run folder whose context.txt is `context`: its Machine section.
static char *machine_section(const char *context)
{
    assert_true(test_write_file(test_dir, "run/context.txt", context));
    test_run("CLAIMS_CSV=/dev/null bash '%s/scripts/report.sh' '%s/run' >/dev/null 2>&1", test_suite_root(), test_dir);
    char *report = test_read_in(test_dir, "run/report.md");
    assert_non_null(report);
    char *end = strstr(report, "\n## Published claims");
    if (end) *end = '\0';
    return report;
}

static void expect_text(const char *text, const char *want, bool present)
{
    if (present && !strstr(text, want)) fail_msg("missing '%s' in:\n%s", want, text);
    if (!present && strstr(text, want)) fail_msg("unexpected '%s' in:\n%s", want, text);
}

#define NOISY_GPU                                                                                       \
    "gpu_name=NVIDIA H200\ngpu_sm_clock_max_mhz=1980\ngpu_persistence_mode=off\n"                      \
    "gpu_sm_clock_p0_range_mhz=345-1980\ngpu_clocks_locked=no\ngpu_power_limit_w=500\n"               \
    "gpu_power_limit_default_w=700\ngpu_ecc_mode=on\ngpu_mig_mode=on\ngpu_pcie_gen=4\n"               \
    "gpu_pcie_gen_max=5\ngpu_pcie_width=16\ngpu_pcie_width_max=16\ngpu_nvlink_active=0\n"             \
    "gpu_other_processes=unknown (Insufficient Permissions)\n"

#define QUIET_GPU                                                                                       \
    "gpu_name=NVIDIA H200\ngpu_sm_clock_max_mhz=1980\ngpu_persistence_mode=on\n"                       \
    "gpu_sm_clock_p0_range_mhz=1500-1500\ngpu_clocks_locked=yes (SM 1500 MHz)\ngpu_power_limit_w=700\n" \
    "gpu_power_limit_default_w=700\ngpu_ecc_mode=on\ngpu_mig_mode=off (not supported)\ngpu_pcie_gen=5\n" \
    "gpu_pcie_gen_max=5\ngpu_pcie_width=16\ngpu_pcie_width_max=16\ngpu_nvlink_active=18\n"            \
    "gpu_other_processes=0\n"

// The report names each thing that was not quiet, and what NVML could not say; a quiet GPU
// gets one line saying so; a CPU run (or a context from before these keys) gets neither.
static void test_report_names_what_was_not_quiet(void **state)
{
    (void)state;
    assert_int_equal(test_run("mkdir -p '%s/run'", test_dir), 0);
    char *text = machine_section(NOISY_GPU);
    expect_text(text, "**What was not quiet on the GPU**", true);
    expect_text(text, "- persistence mode off", true);
    expect_text(text, "- clocks not locked (SM P0 range 345-1980 MHz)", true);
    expect_text(text, "- MIG on", true);
    expect_text(text, "- power limit 500 W, below the default 700 W", true);
    expect_text(text, "- PCIe link Gen4 x16, below its max Gen5 x16", true);
    expect_text(text, "- not known (NVML could not say): gpu_other_processes (Insufficient Permissions)", true);
    expect_text(text, "- other processes on the GPU", false);
    expect_text(text, "The GPU was quiet", false);
    free(text);
    // each line on its own: other processes present, the link narrower than its max
    text = machine_section("gpu_name=NVIDIA H200\ngpu_persistence_mode=on\ngpu_clocks_locked=yes (SM 1500 MHz)\n"
                           "gpu_power_limit_w=700\ngpu_power_limit_default_w=700\ngpu_mig_mode=off\n"
                           "gpu_pcie_gen=5\ngpu_pcie_gen_max=5\ngpu_pcie_width=8\ngpu_pcie_width_max=16\n"
                           "gpu_other_processes=2 (pid 4242 4343)\n");
    expect_text(text, "- other processes on the GPU: 2 (pid 4242 4343)", true);
    expect_text(text, "- PCIe link Gen5 x8, below its max Gen5 x16", true);
    expect_text(text, "- persistence mode off", false);
    expect_text(text, "- clocks not locked", false);
    expect_text(text, "- MIG on", false);
    expect_text(text, "- power limit", false);
    expect_text(text, "not known", false);
    free(text);
    text = machine_section(QUIET_GPU);
    expect_text(text, "**The GPU was quiet:**", true);
    expect_text(text, "not quiet", false);
    free(text);
    // a CPU run: the no-GPU line, nothing about quietness
    text = machine_section("gpu_name=none\ngpu_persistence_mode=n/a (no GPU)\ngpu_clocks_locked=n/a (no GPU)\n"
                           "no_gpu_reason=no CUDA device\n");
    expect_text(text, "**No GPU here: no CUDA device.**", true);
    expect_text(text, "quiet", false);
    free(text);
    // a GPU run from before the suite recorded these keys: nothing claimed either way
    text = machine_section("gpu_name=NVIDIA H200\n");
    expect_text(text, "quiet", false);
    free(text);
}

// A stand-in for the driver's NVML (libnvidia-ml.so.1) with fixed answers, so that the
// sampling the harness does around every run is exercised on a machine without a GPU;
// FAKE_NVML_NO_POWER=1 makes its power query unsupported, as on GPUs without the sensor.
static const char fake_nvml[] =
    "#include <stdlib.h>\n"
    "static int device;\n"
    "int nvmlInit_v2(void) { return 0; }\n"
    "const char *nvmlErrorString(int r) { return r == 3 ? \"Not Supported\" : \"Unknown Error\"; }\n"
    "int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { *d = &device; return i == 0 ? 0 : 2; }\n"
    "int nvmlDeviceGetClockInfo(void *d, int type, unsigned *mhz) { *mhz = type == 1 ? 1755 : 0; return d == &device ? 0 : 2; }\n"
    "int nvmlDeviceGetTemperature(void *d, int sensor, unsigned *c) { (void)sensor; *c = 61; return d == &device ? 0 : 2; }\n"
    "int nvmlDeviceGetCurrentClocksEventReasons(void *d, unsigned long long *r) { *r = 0x4; return d == &device ? 0 : 2; }\n"
    "int nvmlDeviceGetPowerUsage(void *d, unsigned *mw) {\n"
    "    if (getenv(\"FAKE_NVML_NO_POWER\")) return 3;\n"
    "    *mw = 612500; return d == &device ? 0 : 2; }\n";

// The child's side: one sample, its counters printed as name=value lines.
static int print_one_sample(void)
{
    GpuState s;
    if (!context_gpu_state(&s)) {
        printf("no sample\n");
        return 1;
    }
    GpuStateCounter c[GPU_STATE_MAX_COUNTERS];
    int n = context_gpu_state_counters(&s, "after", c);
    for (int i = 0; i < n; i++) printf("%s=%g\n", c[i].name, c[i].value);
    return 0;
}

// NVML's sample through the library the driver ships, here a stand-in: clock, temperature,
// throttle reasons and board power in watts; without a power reading, no power counter.
static void test_sample_through_nvml(void **state)
{
    (void)state;
    if (test_run("command -v cc >/dev/null 2>&1") != 0) {
        printf("skipped: no C compiler here to build the stand-in NVML\n");
        skip();
    }
    assert_true(test_write_file(test_dir, "fake_nvml.c", fake_nvml));
    assert_int_equal(test_run("cc -shared -fPIC -o '%s/libnvidia-ml.so.1' '%s/fake_nvml.c'", test_dir, test_dir), 0);
    const char *run = "LD_LIBRARY_PATH='%s' %s '%s/tests/test_gpu_quiet' --print-sample >'%s/sample.txt' 2>&1";
    assert_int_equal(test_run(run, test_dir, "", test_build_dir(), test_dir), 0);
    char *out = test_read_in(test_dir, "sample.txt");
    assert_non_null(out);
    expect_text(out, "gpu_sm_clock_after_mhz=1755\n", true);
    expect_text(out, "gpu_temp_after_c=61\n", true);
    expect_text(out, "gpu_throttle_after=4\n", true);
    expect_text(out, "gpu_power_after_w=612.5\n", true);
    free(out);
    assert_int_equal(test_run(run, test_dir, "FAKE_NVML_NO_POWER=1", test_build_dir(), test_dir), 0);
    out = test_read_in(test_dir, "sample.txt");
    assert_non_null(out);
    expect_text(out, "gpu_sm_clock_after_mhz=1755\n", true);
    expect_text(out, "gpu_power_after_w", false);
    free(out);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--print-sample") == 0) return print_one_sample();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_throttled_below_75_percent_of_the_reference),
        cmocka_unit_test(test_throttled_by_each_reason_bit),
        cmocka_unit_test(test_sample_counters),
        cmocka_unit_test_setup_teardown(test_context_has_the_quietness_keys, test_setup_dir, test_teardown_dir),
        cmocka_unit_test(test_clock_reference_from_a_context),
        cmocka_unit_test_setup_teardown(test_report_names_what_was_not_quiet, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_sample_through_nvml, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
