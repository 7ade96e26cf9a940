// allocator_child.c: the parent's side of the allocator practice's children: finding the
// allocators' libraries, starting this program again with LD_PRELOAD naming one, and the
// request/reply exchange over a socket pair (allocator.h).
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/allocator/allocator.h"
#include "kernels/clock.h"

extern char **environ;

// ---- the libraries ------------------------------------------------------------------------

typedef struct {
    const char *name;     // the variant
    const char *marker;   // in the mapped library's path
    const char *files[3]; // sonames, preferred first
    const char *package;  // the Debian package that installs the first
} AllocLibrary;

static const AllocLibrary libraries[ALLOC_COUNT] = {
    [ALLOC_GLIBC] = {"glibc", NULL, {NULL}, NULL},
    [ALLOC_JEMALLOC] = {"jemalloc", "libjemalloc", {"libjemalloc.so.2", "libjemalloc.so.1", NULL}, "libjemalloc2"},
    // gperftools' tcmalloc; the minimal one has no heap profiler, the same allocator
    [ALLOC_TCMALLOC] = {"tcmalloc", "libtcmalloc",
                        {"libtcmalloc_minimal.so.4", "libtcmalloc.so.4", NULL}, "libtcmalloc-minimal4"},
};

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#elif defined(__powerpc64__)
#define MULTIARCH "powerpc64le-linux-gnu"
#else
#define MULTIARCH "unknown-linux-gnu"
#endif

static const char *const library_dirs[] = {
    "/usr/lib/" MULTIARCH, "/lib/" MULTIARCH, "/usr/lib64", "/usr/lib", "/usr/local/lib", NULL,
};

const char *alloc_kind_name(AllocKind kind) { return libraries[kind].name; }
const char *alloc_kind_marker(AllocKind kind) { return libraries[kind].marker; }

static bool find_in_dir(const AllocLibrary *lib, const char *dir, char *path, size_t size)
{
    for (int i = 0; lib->files[i]; i++) {
        snprintf(path, size, "%s/%s", dir, lib->files[i]);
        if (access(path, R_OK) == 0) return true;
    }
    return false;
}

// The path `ldconfig -p` gives for one of lib's sonames (the linker's cache: other folders).
static bool find_in_ldconfig(const AllocLibrary *lib, char *path, size_t size)
{
    FILE *p = popen("ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null", "r");
    if (!p) return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, p)) {
        char *arrow = strstr(line, "=> ");
        if (!arrow) continue;
        arrow[strcspn(arrow, "\n")] = '\0';
        for (int i = 0; lib->files[i] && !found; i++) {
            char soname[128];
            snprintf(soname, sizeof soname, "%s ", lib->files[i]);
            if (strstr(line, soname) && access(arrow + 3, R_OK) == 0) {
                snprintf(path, size, "%s", arrow + 3);
                found = true;
            }
        }
    }
    pclose(p);
    return found;
}

int alloc_find_library(AllocKind kind, char *path, size_t size, char *why, size_t why_size)
{
    const AllocLibrary *lib = &libraries[kind];
    path[0] = '\0';
    if (kind == ALLOC_GLIBC) return 0;
    const char *dir = getenv(ALLOC_DIR_ENV);
    if (dir && *dir) {
        if (find_in_dir(lib, dir, path, size)) return 0;
        snprintf(why, why_size, "%s not found in %s (%s): install the Debian package %s",
                 lib->files[0], dir, ALLOC_DIR_ENV, lib->package);
        return -1;
    }
    for (int i = 0; library_dirs[i]; i++)
        if (find_in_dir(lib, library_dirs[i], path, size)) return 0;
    if (find_in_ldconfig(lib, path, size)) return 0;
    snprintf(why, why_size, "%s not found (looked in /usr/lib/%s, /usr/lib64, /usr/lib, /usr/local/lib and "
             "ldconfig -p): install the Debian package %s", lib->files[0], MULTIARCH, lib->package);
    return -1;
}

// ---- the exchange -------------------------------------------------------------------------

// Reads exactly `bytes`, waiting at most ALLOC_REPLY_TIMEOUT_S in all. 0, or -1 (error set).
static int read_exactly(AllocChild *c, void *buf, size_t bytes, const char *what)
{
    char *p = buf;
    double deadline = clock_seconds() + ALLOC_REPLY_TIMEOUT_S;
    while (bytes > 0) {
        struct pollfd pfd = {c->sock, POLLIN, 0};
        int left_ms = (int)((deadline - clock_seconds()) * 1000);
        int r = left_ms > 0 ? poll(&pfd, 1, left_ms) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r == 0)
            return error_set(ERROR_LIBRARY, "the %s worker (pid %d) sent no %s within %d s: killed",
                             alloc_kind_name(c->kind), (int)c->pid, what, ALLOC_REPLY_TIMEOUT_S);
        ssize_t n = read(c->sock, p, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return error_set(ERROR_LIBRARY, "the %s worker (pid %d) ended before its %s (its errors are above)",
                             alloc_kind_name(c->kind), (int)c->pid, what);
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}

static int write_exactly(AllocChild *c, const void *buf, size_t bytes)
{
    const char *p = buf;
    while (bytes > 0) {
        ssize_t n = send(c->sock, p, bytes, MSG_NOSIGNAL); // a dead child: EPIPE, not SIGPIPE
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return error_set(ERROR_LIBRARY, "cannot write to the %s worker (pid %d): %s", alloc_kind_name(c->kind),
                             (int)c->pid, strerror(errno));
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}

// ---- starting and stopping ----------------------------------------------------------------

static const char *self_exe(void)
{
    static char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n > 0 ? n : 0] = '\0';
    return path;
}

// The child's environment: ours without LD_PRELOAD, plus LD_PRELOAD=library unless it is
// "" (glibc). A malloc'd array of pointers into environ and `preload`.
static char **child_environment(const char *library, char *preload, size_t size)
{
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) env[k++] = environ[i];
    if (library[0]) {
        snprintf(preload, size, "LD_PRELOAD=%s", library);
        env[k++] = preload;
    }
    return env;
}

// The child's command line (the strings live in `text`, the pointers in argv[16]).
static void child_arguments(const AllocWorkerArgs *a, char text[12][PATH_MAX + 32], char **argv)
{
    int n = 0;
    argv[n++] = (char *)self_exe();
    snprintf(text[0], sizeof text[0], ALLOC_WORKER_FLAG "%s", a->work == ALLOC_WORK_TRAIN ? "train" : "loader");
    snprintf(text[1], sizeof text[1], "--allocator=%s", alloc_kind_name(a->kind));
    snprintf(text[2], sizeof text[2], "--preset=%s", a->preset ? a->preset : "");
    snprintf(text[3], sizeof text[3], "--batch=%d", a->batch);
    snprintf(text[4], sizeof text[4], "--threads=%d", a->threads);
    snprintf(text[5], sizeof text[5], "--data-root=%s", a->data_root ? a->data_root : "");
    snprintf(text[6], sizeof text[6], "--workers=%d", a->workers);
    snprintf(text[7], sizeof text[7], "--size=%d", a->size);
    snprintf(text[8], sizeof text[8], "--loader-timeout=%d", a->loader_timeout_s);
    snprintf(text[9], sizeof text[9], "--selftest=%s", a->selftest ? a->selftest : "none");
    for (int i = 0; i < 10; i++) argv[n++] = text[i];
    argv[n] = NULL;
}

int alloc_child_start(const AllocWorkerArgs *args, const char *library, AllocChild **out)
{
    *out = NULL;
    static char text[12][PATH_MAX + 32];
    char *argv[16], preload[PATH_MAX + 16];
    child_arguments(args, text, argv);
    char **env = child_environment(library, preload, sizeof preload);
    AllocChild *c = calloc(1, sizeof *c);
    int sv[2] = {-1, -1};
    if (!env || !c) {
        free(env);
        free(c);
        return error_set(ERROR_OUT_OF_MEMORY, "allocator worker: out of memory");
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        int e = errno;
        free(env);
        free(c);
        return error_set(ERROR_LIBRARY, "allocator worker: socketpair: %s", strerror(e));
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {  // only async-signal-safe calls until execve
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        // requests on 0, replies on 3: one socket (dup2 clears close-on-exec on the copies)
        if (dup2(sv[1], 0) < 0 || dup2(sv[1], 3) < 0) _exit(127);
        execve(argv[0], argv, env);
        _exit(127);
    }
    int e = errno;
    close(sv[1]);
    free(env);
    if (pid < 0) {
        close(sv[0]);
        free(c);
        return error_set(ERROR_LIBRARY, "allocator worker: fork: %s", strerror(e));
    }
    *c = (AllocChild){pid, sv[0], args->kind, {0}};
    if (read_exactly(c, &c->hello, sizeof c->hello, "hello") != 0) {
        alloc_child_stop(c);
        return -1;
    }
    c->hello.message[sizeof c->hello.message - 1] = '\0';
    c->hello.malloc_from[sizeof c->hello.malloc_from - 1] = '\0';
    *out = c;
    return 0;
}

int alloc_child_run(AllocChild *c, int64_t count, AllocReply *reply, double *seconds)
{
    AllocRequest rq = {count};
    TRY(write_exactly(c, &rq, sizeof rq));
    TRY(read_exactly(c, reply, sizeof *reply, "reply"));
    reply->message[sizeof reply->message - 1] = '\0';
    if (!reply->ok) return 0;
    if (reply->count != count)
        return error_set(ERROR_LIBRARY, "the %s worker answered %lld units for %lld", alloc_kind_name(c->kind),
                         (long long)reply->count, (long long)count);
    return read_exactly(c, seconds, (size_t)count * sizeof *seconds, "timings");
}

void alloc_child_stop(AllocChild *c)
{
    if (!c) return;
    AllocRequest quit = {0};
    bool asked = send(c->sock, &quit, sizeof quit, MSG_NOSIGNAL) == (ssize_t)sizeof quit;
    close(c->sock);
    int status;
    for (int waited_ms = 0; waitpid(c->pid, &status, WNOHANG) == 0; waited_ms += 10) {
        if (waited_ms >= (asked ? 10000 : 0)) {  // a child that does not quit is killed
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            break;
        }
        usleep(10000);
    }
    free(c);
}
