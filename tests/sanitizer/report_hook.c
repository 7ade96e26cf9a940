// report_hook.c: linked into every program of the sanitized build (make test-sanitize).
// The sanitizer runtimes call __sanitizer_report_error_summary once per report (ASan, LSan,
// and UBSan with print_summary=1). We append that line to $SUITE_SANITIZER_REPORTS/summaries,
// so scripts/run-tests.sh sees every report, even one from a forked loader worker or from
// a program a test ran with its output redirected (UBSan ignores log_path when combined with
// ASan). Only async-signal-safe calls: a report can come from any state.
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char *program_invocation_short_name;

void __sanitizer_report_error_summary(const char *error_summary);

static void put(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

void __sanitizer_report_error_summary(const char *error_summary)
{
    put(2, error_summary); // what the runtime prints without a hook
    put(2, "\n");
    const char *dir = getenv("SUITE_SANITIZER_REPORTS");
    if (!dir || !*dir) return;
    char path[4096];
    size_t len = strlen(dir);
    if (len + sizeof "/summaries" > sizeof path) return;
    memcpy(path, dir, len);
    memcpy(path + len, "/summaries", sizeof "/summaries");
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    char pid[24], *p = pid + sizeof pid;
    *--p = '\0';
    for (long v = (long)getpid(); v > 0 || p == pid + sizeof pid - 1; v /= 10) *--p = (char)('0' + v % 10);
    put(fd, program_invocation_short_name);
    put(fd, "[");
    put(fd, p);
    put(fd, "]: ");
    put(fd, error_summary);
    put(fd, "\n");
    close(fd);
}
