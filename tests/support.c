// support.c: helpers shared by the tests (see support.h); built into build/libtests.a.
#include "tests/support.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kernels/gpu_device.h"

bool test_gpu_missing(void)
{
    char why[256];
    if (gpu_device_available(why, sizeof why)) return false;
    printf("skipped: %s\n", why);
    return true;
}

const char *test_suite_root(void)
{
    const char *r = getenv("SUITE_ROOT");
    if (r && *r) return r;
    // Run by hand from the repository root: an absolute path, so that tests which cd
    // elsewhere still find the scripts.
    static char cwd[4096];
    if (!cwd[0] && !realpath(".", cwd)) snprintf(cwd, sizeof cwd, ".");
    return cwd;
}

const char *test_build_dir(void)
{
    const char *b = getenv("SUITE_BUILD");
    return b && *b ? b : "build";
}

char *test_temp_dir(void)
{
    char *path = strdup("/tmp/suite-test-XXXXXX");
    if (!path || !mkdtemp(path)) {
        free(path);
        return NULL;
    }
    return path;
}

void test_remove_tree(const char *path)
{
    if (path && strncmp(path, "/tmp/", 5) == 0) test_run("rm -rf '%s'", path);
}

char *test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (size) *size = (size_t)n;
    return buf;
}

int test_run(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int status = system(cmd);
    if (status == -1 || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

bool test_file_at_least(const char *path, size_t min_size)
{
    struct stat st;
    return stat(path, &st) == 0 && (size_t)st.st_size >= min_size;
}

int test_csv_column(const char *header, const char *name)
{
    size_t len = strlen(name);
    int index = 0;
    for (const char *p = header; *p; index++) {
        const char *end = p + strcspn(p, ",\n");
        if ((size_t)(end - p) == len && strncmp(p, name, len) == 0) return index;
        if (*end != ',') break;
        p = end + 1;
    }
    return -1;
}

bool test_csv_field(const char *line, int index, char *out, size_t out_size)
{
    const char *p = line;
    for (int i = 0; i < index; i++) {
        p = strchr(p, ',');
        if (!p) return false;
        p++;
    }
    size_t n = strcspn(p, ",\n");
    if (n >= out_size) n = out_size - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}
