// loader_worker_pool.c: the parent's side of the worker processes (loader_worker.h):
// fork, poll, kill, stop, reap, and their CPU time.
#include "loaders/loader_worker.h"

#include "kernels/clock.h"
#include "kernels/error.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int worker_pool_init(WorkerPool *p, int n)
{
    *p = (WorkerPool){.n = n, .parent_pid = getpid()};
    if (n == 0) return 0;
    p->pids = calloc((size_t)n, sizeof *p->pids);
    return p->pids ? 0 : error_set(ERROR_OUT_OF_MEMORY, "loader: out of memory");
}

void worker_pool_free(WorkerPool *p)
{
    free(p->pids);
    p->pids = NULL;
}

// CPU seconds a live process has used so far, from /proc (0 if unreadable).
static double proc_cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); // the command name may hold spaces
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

// The scheduler state of a live process from /proc ("stopped (T)", "sleeping (S)"...).
static void proc_state(pid_t pid, char *buf, size_t size)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    snprintf(buf, size, "state unknown");
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *p = strrchr(text, ')'); // the command name may hold spaces
    if (!p || p[1] != ' ' || !p[2]) return;
    char c = p[2];
    const char *what = c == 'R' ? "running" : c == 'S' ? "sleeping" : c == 'D' ? "in uninterruptible sleep"
                     : c == 'T' ? "stopped" : c == 't' ? "stopped by a tracer" : c == 'Z' ? "a zombie"
                     : "in another state";
    snprintf(buf, size, "%s (%c)", what, c);
}

static void record_reaped(WorkerPool *p, const struct rusage *ru)
{
    p->reaped_cpu += ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6 + ru->ru_stime.tv_sec +
                     ru->ru_stime.tv_usec * 1e-6;
}

double worker_pool_cpu_seconds(const WorkerPool *p)
{
    double s = p->reaped_cpu;
    for (int w = 0; w < p->n; w++)
        if (p->pids[w] > 0) s += proc_cpu_seconds(p->pids[w]);
    return s;
}

bool worker_pool_running(const WorkerPool *p)
{
    for (int w = 0; w < p->n; w++)
        if (p->pids[w] > 0) return true;
    return false;
}

int worker_pool_pid(const WorkerPool *p, int w)
{
    if (!p->pids || w < 0 || w >= p->n || p->pids[w] <= 0) return -1;
    return (int)p->pids[w];
}

// Says how a reaped worker ended ("was killed by signal 11 (Segmentation fault)",
// "exited with status 4 (could not map the shared ring)") into buf; false for a clean
// exit 0.
static bool describe_exit(int status, char *buf, size_t size)
{
    if (WIFSIGNALED(status)) {
        snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
        return true;
    }
    if (!WIFEXITED(status)) {
        snprintf(buf, size, "ended with wait status 0x%x", (unsigned)status);
        return true;
    }
    int code = WEXITSTATUS(status);
    const char *why = code == WORKER_EXIT_ORPHAN ? " (its parent had gone)"
                    : code == WORKER_EXIT_NO_RING ? " (could not map the shared ring)"
                    : code == WORKER_EXIT_NO_DECODER ? " (could not create its JPEG decoder)"
                    : code == WORKER_EXIT_NO_CPUS ? " (could not run on worker_cpus)" : "";
    snprintf(buf, size, "exited with status %d%s", code, why);
    return code != 0;
}

// Worker w has been reaped with this wait status after the pool had asked it to stop: an
// abnormal exit is counted and, unless one was reported already, sets the error; -1.
static int reaped(WorkerPool *p, Ring *ring, int w, int status, const struct rusage *ru,
                  int64_t epoch, bool reported)
{
    record_reaped(p, ru);
    char how[128];
    int rc = 0;
    if (describe_exit(status, how, sizeof how)) {
        p->failures++;
        int64_t cur = atomic_load(&ring_worker(ring, w)->current_batch);
        char when[96];
        if (cur >= 0)
            snprintf(when, sizeof when, "while loading batch %lld", (long long)cur);
        else
            snprintf(when, sizeof when, "after its last batch");
        if (!reported)
            error_set(ERROR_LIBRARY, "loader: worker %d (pid %d) %s %s of epoch %lld", w,
                      (int)p->pids[w], how, when, (long long)epoch);
        rc = -1;
    }
    p->pids[w] = 0;
    return rc;
}

// SIGKILLs worker w and reaps it, waiting at most 2 s (a process in uninterruptible sleep,
// on a hung network file system, dies only when its I/O returns: it is then left to be
// reaped never rather than hang the caller). Its slot is free either way; true if reaped.
static bool kill_worker(WorkerPool *p, int w)
{
    pid_t pid = p->pids[w];
    if (pid <= 0) return true;
    kill(pid, SIGKILL);
    p->pids[w] = 0;
    double deadline = clock_seconds() + 2.0;
    for (;;) {
        struct rusage ru;
        int status;
        pid_t r = wait4(pid, &status, WNOHANG, &ru);
        if (r == pid) {
            record_reaped(p, &ru);
            return true;
        }
        if (r < 0 || clock_seconds() > deadline) return false;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

int worker_pool_time_out(WorkerPool *p, int w, int64_t b, int64_t epoch, int timeout_ms)
{
    pid_t pid = p->pids[w];
    char state[64] = "not running";
    if (pid > 0) proc_state(pid, state, sizeof state);
    error_set(ERROR_LIBRARY, "loader: timed out after %d ms waiting for batch %lld of epoch %lld "
              "from worker %d (pid %d, %s); the worker was killed", timeout_ms,
              (long long)b, (long long)epoch, w, (int)pid, state);
    kill_worker(p, w);
    p->failures++;
    return -1;
}

int worker_pool_poll(WorkerPool *p, Ring *ring, int64_t epoch, int64_t waiting_for)
{
    for (int w = 0; w < p->n; w++) {
        if (p->pids[w] <= 0) continue;
        int status;
        struct rusage ru;
        pid_t r = wait4(p->pids[w], &status, WNOHANG, &ru);
        if (r == 0) continue;
        char how[128];
        if (r > 0) {
            record_reaped(p, &ru);
            if (!describe_exit(status, how, sizeof how))
                snprintf(how, sizeof how, "exited with status 0 without being asked to");
        } else {
            snprintf(how, sizeof how, "vanished");
        }
        p->failures++;
        int64_t cur = atomic_load(&ring_worker(ring, w)->current_batch);
        int64_t batch = cur >= 0 ? cur : waiting_for >= 0 && waiting_for % p->n == w
                                             ? waiting_for : -1;
        char when[96];
        if (batch >= 0) snprintf(when, sizeof when, "while loading batch %lld", (long long)batch);
        else snprintf(when, sizeof when, waiting_for < 0 ? "after its last batch" : "between batches");
        error_set(ERROR_LIBRARY, "loader: worker %d (pid %d) %s %s of epoch %lld", w,
                  (int)p->pids[w], how, when, (long long)epoch);
        p->pids[w] = 0;
        return -1;
    }
    return 0;
}

int worker_pool_stop(WorkerPool *p, Ring *ring, int64_t epoch)
{
    if (!p->pids || !worker_pool_running(p)) return 0;
    ring_request_shutdown(ring);
    for (int w = 0; w < p->n; w++)
        if (p->pids[w] > 0) {
            kill(p->pids[w], SIGCONT);  // a stopped worker would never see the request
            ring_wake_worker(ring, w);
        }
    int rc = 0;
    double deadline = clock_seconds() + 2.0;
    for (;;) {
        bool left = false;
        for (int w = 0; w < p->n; w++) {
            if (p->pids[w] <= 0) continue;
            struct rusage ru;
            int status;
            pid_t r = wait4(p->pids[w], &status, WNOHANG, &ru);
            if (r == p->pids[w]) {
                if (reaped(p, ring, w, status, &ru, epoch, rc != 0) != 0) rc = -1;
            } else if (r < 0 && errno == ECHILD) {
                p->pids[w] = 0;
            } else {
                left = true;
            }
        }
        if (!left) break;
        if (clock_seconds() > deadline) {
            for (int w = 0; w < p->n; w++)
                if (p->pids[w] > 0) kill_worker(p, w);
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return rc;
}

int worker_pool_start(WorkerPool *p, Ring *ring, const BatchSpec *spec)
{
    ring_reset(ring);
    fflush(NULL); // no buffered output duplicated into the children
    for (int w = 0; w < p->n; w++) {
        pid_t pid = fork();
        if (pid < 0) {
            int e = errno;
            worker_pool_stop(p, ring, -1);
            return error_set(ERROR_LIBRARY, "loader: cannot fork worker %d: %s", w, strerror(e));
        }
        if (pid == 0) worker_main(ring, spec, w, p->parent_pid);
        p->pids[w] = pid;
        p->spawns++;
    }
    return 0;
}
