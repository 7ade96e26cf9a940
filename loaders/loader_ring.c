// loader_ring.c: the loader's shared-memory ring (layout, mapping, reset) and the
// lifecycle of its worker processes (fork, stop, reap, CPU accounting).
#include "kernels/error.h"
#include "loaders/loader_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

RingLayout loader_ring_layout(int nworkers, int nslots, int task_cap, int64_t perm_samples,
                              int64_t dataset_samples, int batch, size_t sample_bytes)
{
    RingLayout lay = {0};
    size_t off = ALIGN_UP(sizeof(RingHeader), 64);
    lay.workers_off = off;
    off = ALIGN_UP(off + (size_t)nworkers * sizeof(WorkerShared), 64);
    lay.tasks_off = off;
    lay.task_cap = task_cap;
    off = ALIGN_UP(off + (size_t)nworkers * task_cap * sizeof(LoaderTask), 64);
    lay.perm_off = off;
    off = ALIGN_UP(off + (size_t)perm_samples * sizeof(int64_t), 64);
    lay.bad_off = off;
    off = ALIGN_UP(off + (size_t)(dataset_samples + 63) / 64 * sizeof(uint64_t), 4096);
    lay.slots_off = off;
    lay.labels_off = ALIGN_UP(sizeof(SlotHeader), 64);
    lay.indices_off = ALIGN_UP(lay.labels_off + (size_t)batch * sizeof(int32_t), 64);
    lay.images_off = ALIGN_UP(lay.indices_off + (size_t)batch * sizeof(int64_t), 64);
    lay.slot_stride = ALIGN_UP(lay.images_off + (size_t)batch * sample_bytes, 4096);
    lay.total = off + (size_t)nslots * lay.slot_stride;
    return lay;
}

// Creates an anonymous POSIX shared-memory object: its name is unlinked at once, so
// only the descriptor (inherited by the workers) and the mappings keep it alive.
int loader_ring_map(Loader *l)
{
    static _Atomic int counter;
    char name[64];
    snprintf(name, sizeof name, "/loaders-%d-%d", (int)getpid(), atomic_fetch_add(&counter, 1));
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return error_set(ERROR_LIBRARY, "loader: shm_open(%s) failed: %s", name, strerror(errno));
    shm_unlink(name);
    if (ftruncate(fd, (off_t)l->lay.total) != 0) {
        int e = errno;
        close(fd);
        return error_set(e == ENOSPC || e == ENOMEM ? ERROR_OUT_OF_MEMORY : ERROR_LIBRARY,
                         "loader: cannot size the %zu-byte shared ring: %s", l->lay.total,
                         strerror(e));
    }
    void *p = mmap(NULL, l->lay.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return error_set(e == ENOMEM ? ERROR_OUT_OF_MEMORY : ERROR_LIBRARY,
                         "loader: cannot map the %zu-byte shared ring: %s", l->lay.total,
                         strerror(e));
    }
    l->shm_fd = fd;
    l->ring = p;
    return 0;
}

// (Re)initialises the process-shared semaphores and queues; no worker may be running.
void loader_ring_reset(Loader *l)
{
    atomic_store(&ring_header(l->ring)->shutdown, 0);
    for (int w = 0; w < l->cfg.num_workers; w++) {
        WorkerShared *ws = ring_worker(&l->lay, l->ring, w);
        sem_destroy(&ws->tasks_ready);
        sem_init(&ws->tasks_ready, 1, 0);
        ws->head = ws->tail = 0;
        atomic_store(&ws->current_batch, -1);
    }
    for (int s = 0; s < l->nslots; s++) {
        SlotHeader *h = (SlotHeader *)ring_slot(&l->lay, l->ring, s);
        sem_destroy(&h->done);
        sem_init(&h->done, 1, 0);
    }
}

double loader_proc_cpu_seconds(pid_t pid)
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

void loader_proc_state(pid_t pid, char *buf, size_t size)
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

void loader_record_reaped(Loader *l, const struct rusage *ru)
{
    l->reaped_cpu += ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6 + ru->ru_stime.tv_sec +
                     ru->ru_stime.tv_usec * 1e-6;
}

bool loader_workers_running(const Loader *l)
{
    for (int w = 0; w < l->cfg.num_workers; w++)
        if (l->pids[w] > 0) return true;
    return false;
}

bool loader_describe_exit(int status, char *buf, size_t size)
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
    // the codes of loader_worker_main's own early exits
    const char *why = code == 3 ? " (its parent had gone)" : code == 4 ? " (could not map the shared ring)"
                    : code == 5 ? " (could not create its JPEG decoder)" : "";
    snprintf(buf, size, "exited with status %d%s", code, why);
    return code != 0;
}

// Worker w has been reaped with this wait status: on an abnormal exit (the loader had only
// asked it to stop), counts it and, unless one was reported already, sets the error; -1.
static int reaped(Loader *l, int w, int status, const struct rusage *ru, bool reported)
{
    loader_record_reaped(l, ru);
    char how[128];
    int rc = 0;
    if (loader_describe_exit(status, how, sizeof how)) {
        l->stats.worker_failures++;
        int64_t cur = atomic_load(&ring_worker(&l->lay, l->ring, w)->current_batch);
        char when[96];
        if (cur >= 0)
            snprintf(when, sizeof when, "while loading batch %lld", (long long)cur);
        else
            snprintf(when, sizeof when, "after its last batch");
        if (!reported)
            error_set(ERROR_LIBRARY, "loader: worker %d (pid %d) %s %s of epoch %lld", w,
                      (int)l->pids[w], how, when, (long long)l->epoch);
        rc = -1;
    }
    l->pids[w] = 0;
    return rc;
}

bool loader_kill_worker(Loader *l, int w)
{
    pid_t pid = l->pids[w];
    if (pid <= 0) return true;
    kill(pid, SIGKILL);
    l->pids[w] = 0;
    double deadline = clock_seconds() + 2.0;
    for (;;) {
        struct rusage ru;
        int status;
        pid_t r = wait4(pid, &status, WNOHANG, &ru);
        if (r == pid) {
            loader_record_reaped(l, &ru);
            return true;
        }
        if (r < 0 || clock_seconds() > deadline) return false;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

// Asks every worker to stop, waits up to 2 s, then SIGKILLs whatever is left; reaps all.
int loader_workers_stop(Loader *l)
{
    if (!l->pids || !loader_workers_running(l)) return 0;
    atomic_store(&ring_header(l->ring)->shutdown, 1);
    for (int w = 0; w < l->cfg.num_workers; w++)
        if (l->pids[w] > 0) {
            kill(l->pids[w], SIGCONT);  // a stopped worker would never see the request
            sem_post(&ring_worker(&l->lay, l->ring, w)->tasks_ready);
        }
    int rc = 0;
    double deadline = clock_seconds() + 2.0;
    for (;;) {
        bool left = false;
        for (int w = 0; w < l->cfg.num_workers; w++) {
            if (l->pids[w] <= 0) continue;
            struct rusage ru;
            int status;
            pid_t r = wait4(l->pids[w], &status, WNOHANG, &ru);
            if (r == l->pids[w]) {
                if (reaped(l, w, status, &ru, rc != 0) != 0) rc = -1;
            } else if (r < 0 && errno == ECHILD) {
                l->pids[w] = 0;
            } else {
                left = true;
            }
        }
        if (!left) break;
        if (clock_seconds() > deadline) {
            for (int w = 0; w < l->cfg.num_workers; w++)
                if (l->pids[w] > 0) loader_kill_worker(l, w);
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    l->epoch_active = false;
    return rc;
}

int loader_workers_start(Loader *l)
{
    loader_ring_reset(l);
    fflush(NULL); // no buffered output duplicated into the children
    for (int w = 0; w < l->cfg.num_workers; w++) {
        pid_t pid = fork();
        if (pid < 0) {
            int e = errno;
            loader_workers_stop(l);
            return error_set(ERROR_LIBRARY, "loader: cannot fork worker %d: %s", w, strerror(e));
        }
        if (pid == 0) loader_worker_main(l, w);
        l->pids[w] = pid;
        l->stats.worker_spawns++;
    }
    return 0;
}
