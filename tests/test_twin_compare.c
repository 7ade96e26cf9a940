// test_twin_compare.c: scripts/twin_compare.py runs what it says and publishes only what
// it may. It runs against stand-ins for steptime and for the twin's Python (shell scripts
// that log their command line and print a result line), so that its CUDA paths are tested
// without a GPU or torch, in about a second: the amp toggle runs only on fp32 configs; a
// config whose torch_twin.py check fails is not timed and its rows say status=failed;
// torch.compile runs only where a C compiler exists (else a visible skip, nothing run); the
// core and PyTorch take the batch the same way (the same --input on both command lines).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support.h"

// steptime's stand-in: logs its arguments, makes the --dump folder, prints a result line.
static const char fake_steptime[] =
    "#!/bin/bash\n"
    "echo \"steptime $*\" >>\"$FAKE_LOG\"\n"
    "prev=\n"
    "for a in \"$@\"; do [[ $prev == --dump ]] && /bin/mkdir -p \"$a\"; prev=$a; done\n"
    "echo 'steptime: preset tiny backend cuda threads 1 batch 32 precision fp32 layout nchw "
    "steps 3 median_ms 2.000 min_ms 1.900 mean_ms 2.000 images_per_s 1.0 cpu_median_ms 1.0 "
    "input device batch_mib 1.0 peak_mib 10.0 device_used_mib 0.0'\n";

// The twin's Python's stand-in: torch's version; `check` disagrees on dumps whose path
// contains $FAKE_CHECK_FAIL (when set); `time` prints a result line.
static const char fake_python[] =
    "#!/bin/bash\n"
    "echo \"python $*\" >>\"$FAKE_LOG\"\n"
    "if [[ $1 == -c ]]; then echo 9.9-fake; exit 0; fi\n"
    "shift\n"
    "case $1 in\n"
    "check)\n"
    "  if [[ -n ${FAKE_CHECK_FAIL:-} && $* == *$FAKE_CHECK_FAIL* ]]; then\n"
    "    echo '  FAIL loss per step: 0.01 (tolerance 1e-05)'\n"
    "    echo 'twin-check: 1 disagreement(s) (torch 9.9-fake)'; exit 1\n"
    "  fi\n"
    "  echo 'twin-check: all agree (torch 9.9-fake)';;\n"
    "time)\n"
    "  echo 'twin: preset tiny device cuda side eager threads 1 batch 32 median_ms 4.000 "
    "min_ms 3.900 mean_ms 4.000 peak_mib 12.0 torch 9.9-fake';;\n"
    "esac\n";

static int setup(void **state)
{
    if (test_setup_dir(state) != 0) return -1;
    if (!test_write_file(test_dir, "steptime", fake_steptime) ||
        !test_write_file(test_dir, "python", fake_python))
        return -1;
    return test_run("chmod +x '%s/steptime' '%s/python'", test_dir, test_dir);
}

// Runs twin_compare.py with the stand-ins (env: extra VAR=value words, e.g. a PATH) and
// the given arguments; its output in test_dir/out.txt, the stand-ins' log in
// test_dir/log.txt. Returns its exit status.
static int compare(const char *env, const char *args)
{
    fflush(stdout);
    // the real interpreter, not a shim that needs PATH (a test may empty PATH)
    int rc = test_run("py=$(python3 -c 'import sys; print(sys.executable)') && "
                      "env FAKE_LOG='%s/log.txt' %s \"$py\" '%s/scripts/twin_compare.py' "
                      "--build '%s' --python '%s/python' --out '%s/out' %s >'%s/out.txt' 2>&1",
                      test_dir, env, test_suite_root(), test_dir, test_dir, test_dir, args, test_dir);
    test_run("cat '%s/out.txt'", test_dir);
    return rc;
}

// Every line of text that contains `with`, joined (malloc'd).
static char *lines_with(const char *text, const char *with)
{
    size_t cap = strlen(text) + 1, len = 0;
    char *out = calloc(1, cap);
    for (const char *p = text; out && *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) + 1 : strlen(p);
        char line[8192];
        snprintf(line, sizeof line, "%.*s", (int)n, p);
        if (strstr(line, with)) {
            memcpy(out + len, p, n);
            len += n;
        }
        p += n;
    }
    return out;
}

// The row of a CSV whose line starts with `prefix`, or NULL.
static const char *csv_row(const char *csv, const char *prefix)
{
    for (const char *p = csv; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, strlen(prefix)) == 0) return p;
    return NULL;
}

// The value of column `name` in the row starting with `prefix` (empty when absent).
static void csv_get(const char *csv, const char *prefix, const char *name, char *out, size_t size)
{
    out[0] = 0;
    const char *row = csv_row(csv, prefix);
    char header[4096];
    snprintf(header, sizeof header, "%.*s", (int)strcspn(csv, "\r\n"), csv);
    int col = test_csv_column(header, name);
    if (!row || col < 0) return;
    char line[4096];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(row, "\r\n"), row); // csv writes \r\n
    test_csv_field(line, col, out, size);
}

// amp toggles fp32 to fp16: on an fp16 config it would time fp16 against fp16.
static void test_amp_toggle_only_on_fp32_configs(void **state)
{
    (void)state;
    assert_int_equal(compare("", "--device cuda --rounds 1 --practices amp "
                                 "tiny:0:fp32:nchw tiny:0:fp16:nchw"), 0);
    char *log = test_read_in(test_dir, "log.txt");
    assert_non_null(log);
    char *fp16_runs = lines_with(log, "--precision fp16");
    assert_non_null(fp16_runs);
    // the fp16 config's own runs, and the fp32 config's amp runs, on both sides; nothing
    // that names fp16 twice
    char *twice = lines_with(fp16_runs, "--precision fp16 --layout nchw --input device --steps 50 "
                                        "--warmup 5 --precision fp16");
    assert_string_equal(twice, "");
    char *amp = lines_with(log, "--precision fp32 --layout nchw --input device --steps 50 "
                                "--warmup 5 --precision fp16");
    assert_int_equal(test_count_lines(amp), 2); // core and PyTorch, one round
    char *csv = test_read_in(test_dir, "out/twin_practices.csv");
    assert_non_null(csv);
    char status[64], reason[512], speedup[64];
    csv_get(csv, "cuda,tiny,0,fp16,nchw,amp,core,", "status", status, sizeof status);
    csv_get(csv, "cuda,tiny,0,fp16,nchw,amp,core,", "reason", reason, sizeof reason);
    assert_string_equal(status, "skipped");
    assert_non_null(strstr(reason, "already fp16"));
    csv_get(csv, "cuda,tiny,0,fp16,nchw,amp,eager,", "status", status, sizeof status);
    assert_string_equal(status, "skipped");
    csv_get(csv, "cuda,tiny,0,fp32,nchw,amp,core,", "status", status, sizeof status);
    csv_get(csv, "cuda,tiny,0,fp32,nchw,amp,core,", "speedup", speedup, sizeof speedup);
    assert_string_equal(status, "ok");
    assert_string_equal(speedup, "1.000");
    free(log);
    free(fp16_runs);
    free(twice);
    free(amp);
    free(csv);
}

// Numbers that disagree are not worth a speed: the config is not timed, its rows say why.
static void test_a_failed_check_is_not_published(void **state)
{
    (void)state;
    assert_int_equal(compare("FAKE_CHECK_FAIL=/mlp-0", "--device cpu --rounds 2 "
                                                       "tiny:0:fp32:nchw mlp:0:fp32:nchw"), 0);
    char *log = test_read_in(test_dir, "log.txt");
    char *csv = test_read_in(test_dir, "out/twin.csv");
    char *md = test_read_in(test_dir, "out/twin.md");
    assert_non_null(log);
    assert_non_null(csv);
    assert_non_null(md);
    char *mlp_timed = lines_with(log, "--layout");
    assert_null(strstr(mlp_timed, "--preset mlp"));      // no timing run of mlp
    assert_null(strstr(mlp_timed, "/mlp-0 --device"));   // on either side
    assert_non_null(strstr(mlp_timed, "--preset tiny")); // tiny agreed: timed
    const char *sides[] = {"core", "eager"};
    for (int i = 0; i < 2; i++) {
        char prefix[64], status[64], median[64], reason[1024];
        snprintf(prefix, sizeof prefix, "cpu,mlp,0,fp32,nchw,%s,", sides[i]);
        csv_get(csv, prefix, "status", status, sizeof status);
        csv_get(csv, prefix, "median_ms", median, sizeof median);
        csv_get(csv, prefix, "reason", reason, sizeof reason);
        assert_string_equal(status, "failed");
        assert_string_equal(median, "");
        assert_non_null(strstr(reason, "torch_twin.py check failed"));
        assert_non_null(strstr(reason, "FAIL loss per step"));
        snprintf(prefix, sizeof prefix, "cpu,tiny,0,fp32,nchw,%s,", sides[i]);
        csv_get(csv, prefix, "status", status, sizeof status);
        assert_string_equal(status, "ok");
    }
    assert_non_null(strstr(md, "| mlp | preset | fp32 | nchw | 0 | - | - | - | - |"));
    assert_non_null(strstr(md, "- mlp 0 fp32 nchw core: failed: torch_twin.py check failed"));
    free(log);
    free(csv);
    free(md);
    free(mlp_timed);
}

// torch.compile needs a C compiler at run time: without one, a visible skip and no run.
static void test_compile_only_where_a_compiler_exists(void **state)
{
    (void)state;
    // a PATH with no compiler on it (the stand-ins are called by their full paths)
    assert_int_equal(compare("PATH=/nonexistent CC=", "--device cuda --rounds 1 --compile "
                                                      "tiny:0:fp32:nchw"), 0);
    char *out = test_read_in(test_dir, "out.txt"), *log = test_read_in(test_dir, "log.txt");
    char *csv = test_read_in(test_dir, "out/twin.csv");
    assert_non_null(out);
    assert_non_null(log);
    assert_non_null(csv);
    assert_non_null(strstr(out, "twin_compare: --compile skipped: no C compiler"));
    assert_null(strstr(log, "--compile"));
    char status[64], reason[512];
    csv_get(csv, "cuda,tiny,0,fp32,nchw,compile,", "status", status, sizeof status);
    csv_get(csv, "cuda,tiny,0,fp32,nchw,compile,", "reason", reason, sizeof reason);
    assert_string_equal(status, "skipped");
    assert_non_null(strstr(reason, "no C compiler"));
    free(out);
    free(log);
    free(csv);
    // with one ($CC names an existing program), compile runs
    test_run("rm -f '%s/log.txt'", test_dir);
    assert_int_equal(compare("PATH=/nonexistent CC=/bin/true", "--device cuda --rounds 1 --compile "
                                                               "tiny:0:fp32:nchw"), 0);
    log = test_read_in(test_dir, "log.txt");
    assert_non_null(log);
    assert_non_null(strstr(log, " --compile"));
    free(log);
}

// Both sides take the batch the same way: the same --input on both command lines.
static void test_both_sides_take_the_same_input(void **state)
{
    (void)state;
    const char *inputs[] = {"", "--input host"};
    const char *want[] = {"--input device", "--input host"};
    for (int i = 0; i < 2; i++) {
        test_run("rm -f '%s/log.txt'", test_dir);
        char args[256];
        snprintf(args, sizeof args, "--device cuda --rounds 1 %s tiny:0:fp32:nchw", inputs[i]);
        assert_int_equal(compare("", args), 0);
        char *log = test_read_in(test_dir, "log.txt");
        assert_non_null(log);
        char *timed = lines_with(log, "--layout");
        char *with = lines_with(timed, want[i]);
        assert_int_equal(test_count_lines(timed), 2); // core and PyTorch
        assert_string_equal(with, timed);
        char *csv = test_read_in(test_dir, "out/twin.csv");
        assert_non_null(csv);
        char input[64];
        csv_get(csv, "cuda,tiny,0,fp32,nchw,core,", "input", input, sizeof input);
        assert_string_equal(input, want[i] + strlen("--input "));
        free(log);
        free(timed);
        free(with);
        free(csv);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_amp_toggle_only_on_fp32_configs, setup, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_a_failed_check_is_not_published, setup, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_compile_only_where_a_compiler_exists, setup, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_both_sides_take_the_same_input, setup, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
