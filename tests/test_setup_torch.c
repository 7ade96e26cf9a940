// test_setup_torch.c: scripts/setup-torch.sh gives the twin a Python with torch in a virtual
// environment (cache/venv), where a stock Debian python3 refuses `pip install` (PEP 668).
// It reuses a torch the base Python already has (--system-site-packages: seconds, nothing
// downloaded; what CI does on this machine), and where it must download and cannot, it
// says why, with pip run in the environment (not against the system Python). Each test
// makes its environment in a fresh temporary folder (SETUP_VENV), never in cache/venv.
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

// Runs setup-torch.sh with the environment words env; output in test_dir/setup.txt.
static int setup_torch(const char *env)
{
    fflush(stdout);
    int rc = test_run("env SETUP_VENV='%s/venv' %s bash '%s/scripts/setup-torch.sh' >'%s/setup.txt' 2>&1",
                      test_dir, env, test_suite_root(), test_dir);
    test_run("cat '%s/setup.txt'", test_dir);
    return rc;
}

// A base Python that has torch: reused, nothing downloaded, and the venv imports it.
static void test_setup_reuses_an_installed_torch(void **state)
{
    (void)state;
    // the interpreter itself (a pyenv shim would need PATH)
    // find_spec: whether it is there, without the seconds an import of torch takes
    if (test_run("python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec(\"torch\") is None)' "
                 ">/dev/null 2>&1") != 0) {
        printf("skipped: python3 has no torch here: nothing to reuse\n");
        skip();
    }
    int rc = test_run("python3 -c 'import sys; print(sys.executable)' >'%s/base.txt'", test_dir);
    char *base = test_read_in(test_dir, "base.txt");
    assert_int_equal(rc, 0);
    assert_non_null(base);
    base[strcspn(base, "\n")] = 0;
    char env[4200];
    snprintf(env, sizeof env, "SETUP_PYTHON='%s'", base);
    assert_int_equal(setup_torch(env), 0);
    char *out = test_read_in(test_dir, "setup.txt");
    assert_non_null(out);
    assert_non_null(strstr(out, "reused from"));
    assert_null(strstr(out, "pip install"));
    // "setup: torch VERSION in DIR" is printed after DIR/bin/python imported torch
    assert_non_null(strstr(out, "setup: torch "));
    free(out);
    // a second run finds it at once
    assert_int_equal(setup_torch(env), 0);
    out = test_read_in(test_dir, "setup.txt");
    assert_non_null(out);
    assert_non_null(strstr(out, "setup: torch "));
    assert_null(strstr(out, "reused from"));
    free(out);
    free(base);
}

// A stock Debian python3 (PEP 668, no torch) with PyPI out of reach: pip runs in the venv
// (no externally-managed-environment refusal) and setup says why it could not install.
static void test_setup_installs_into_a_venv_or_says_why(void **state)
{
    (void)state;
    const char *debian = "/usr/bin/python3";
    if (access(debian, X_OK) != 0 ||
        test_run("%s -c 'import importlib.util as u, sys; sys.exit(u.find_spec(\"torch\") is None)' "
                 ">/dev/null 2>&1", debian) == 0 ||
        test_run("ls /usr/lib/python3*/EXTERNALLY-MANAGED >/dev/null 2>&1") != 0) {
        printf("skipped: no externally managed %s without torch here\n", debian);
        skip();
    }
    // the system pip refuses, as the issue says (what setup.sh used to run)
    assert_int_equal(test_run("%s -m pip install --dry-run --no-index torch 2>&1 | "
                              "grep -q externally-managed-environment", debian), 0);
    // an index that refuses connections at once stands for a machine without PyPI
    int rc = setup_torch("SETUP_PYTHON=/usr/bin/python3 PIP_INDEX_URL=http://127.0.0.1:9/simple "
                         "PIP_RETRIES=0 PIP_TIMEOUT=2 PIP_NO_CACHE_DIR=1 PIP_CONFIG_FILE=/dev/null");
    char *out = test_read_in(test_dir, "setup.txt");
    assert_non_null(out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "/venv/bin/python -m pip install torch")); // in the venv
    assert_non_null(strstr(out, "setup: cannot install torch for the PyTorch twin: "));
    assert_non_null(strstr(out, "failed: ERROR"));  // pip's own reason
    assert_null(strstr(out, "externally-managed-environment"));
    free(out);
}

// SETUP_SKIP_TORCH=1: nothing made, said so.
static void test_setup_skip_torch(void **state)
{
    (void)state;
    assert_int_equal(setup_torch("SETUP_SKIP_TORCH=1"), 0);
    char *out = test_read_in(test_dir, "setup.txt");
    assert_non_null(out);
    assert_non_null(strstr(out, "SETUP_SKIP_TORCH=1: not installing torch"));
    char venv[4200];
    snprintf(venv, sizeof venv, "%s/venv", test_dir);
    assert_int_not_equal(access(venv, F_OK), 0);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_setup_reuses_an_installed_torch, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_setup_installs_into_a_venv_or_says_why, test_setup_dir, test_teardown_dir),
        cmocka_unit_test_setup_teardown(test_setup_skip_torch, test_setup_dir, test_teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
