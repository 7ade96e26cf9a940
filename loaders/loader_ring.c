// loader_ring.c: the loader's shared-memory ring (layout, mapping, reset) and the
// lifecycle of its worker processes (fork, stop, reap, CPU accounting).
#include "kernels/error.h"
#include "loaders/loader_internal.h"

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

RingLayout loader_ring_layout(int nworkers, int nslots, int task_cap, int64_t nsamples,
                              int batch, size_t sample_bytes)
{
    RingLayout lay = {0};
    size_t off = ALIGN_UP(sizeof(RingHeader), 64);
    lay.workers_off = off;
    off = ALIGN_UP(off + (size_t)nworkers * sizeof(WorkerShared), 64);
    lay.tasks_off = off;
    lay.task_cap = task_cap;
    off = ALIGN_UP(off + (size_t)nworkers * task_cap * sizeof(LoaderTask), 64);
    lay.perm_off = off;
    off = ALIGN_UP(off + (size_t)nsamples * sizeof(int64_t), 4096);
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

// Asks every worker to stop, waits up to 2 s, then SIGKILLs whatever is left; reaps all.
void loader_workers_stop(Loader *l)
{
    if (!l->pids || !loader_workers_running(l)) return;
    atomic_store(&ring_header(l->ring)->shutdown, 1);
    for (int w = 0; w < l->cfg.num_workers; w++)
        if (l->pids[w] > 0) sem_post(&ring_worker(&l->lay, l->ring, w)->tasks_ready);
    double deadline = clock_seconds() + 2.0;
    for (;;) {
        bool left = false;
        for (int w = 0; w < l->cfg.num_workers; w++) {
            if (l->pids[w] <= 0) continue;
            struct rusage ru;
            int status;
            pid_t r = wait4(l->pids[w], &status, WNOHANG, &ru);
            if (r == l->pids[w] || (r < 0 && errno == ECHILD)) {
                if (r > 0) loader_record_reaped(l, &ru);
                l->pids[w] = 0;
            } else {
                left = true;
            }
        }
        if (!left) break;
        if (clock_seconds() > deadline) {
            for (int w = 0; w < l->cfg.num_workers; w++) {
                if (l->pids[w] <= 0) continue;
                kill(l->pids[w], SIGKILL);
                struct rusage ru;
                int status;
                if (wait4(l->pids[w], &status, 0, &ru) == l->pids[w]) loader_record_reaped(l, &ru);
                l->pids[w] = 0;
            }
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    l->epoch_active = false;
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
