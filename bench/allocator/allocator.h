// allocator.h: the allocator practice's private parts. A row's work runs in a child process
// (this program again, `--allocator-worker=train|loader`) started with LD_PRELOAD naming
// the row's allocator, since an allocator is chosen when a process starts. The parent and
// the child talk over a socket pair in fixed-size binary messages: the child says hello once
// (its set-up done, the allocator it found in effect, the check's checksum), then answers
// each request for `count` timed units (training steps, or loader epochs) with a reply and
// `count` seconds, one per unit, timed on the child's wall clock.
#ifndef BENCH_ALLOCATOR_H
#define BENCH_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kernels/error.h"

// The worker flag: argv[1] of a child.
#define ALLOC_WORKER_FLAG "--allocator-worker="
// Test-only: a folder searched for the libraries instead of the system's (an empty one
// makes every tuned row a skip).
#define ALLOC_DIR_ENV "BENCH_ALLOCATOR_DIR"
// Test-only: the generated dataset preset of the loader family (default bench).
#define ALLOC_DATASET_ENV "BENCH_ALLOCATOR_DATASET"
// Most units one request may ask for (a repetition's iterations).
#define ALLOC_MAX_UNITS 1000000
// Seconds a child may take to say hello or to answer a request before it is killed.
#define ALLOC_REPLY_TIMEOUT_S 600

typedef enum { ALLOC_GLIBC, ALLOC_JEMALLOC, ALLOC_TCMALLOC, ALLOC_COUNT } AllocKind;

// The name of an allocator ("glibc", "jemalloc", "tcmalloc"): its variant.
const char *alloc_kind_name(AllocKind kind);
// The text a mapped library's path contains when the allocator is in effect
// ("libjemalloc", "libtcmalloc"; NULL for glibc).
const char *alloc_kind_marker(AllocKind kind);
// Finds kind's shared library (glibc: "" at once): $BENCH_ALLOCATOR_DIR only when set,
// else the multiarch and usual library folders, then `ldconfig -p`. 0 with path filled, or
// -1 with `why` naming the Debian package to install.
int alloc_find_library(AllocKind kind, char *path, size_t size, char *why, size_t why_size);

typedef enum { ALLOC_WORK_TRAIN, ALLOC_WORK_LOADER } AllocWork;

// What a child is asked to do, from its command line.
typedef struct AllocWorkerArgs {
    AllocWork work;
    AllocKind kind;        // the allocator that must be in effect
    const char *preset;    // train: the core preset
    int batch;             // train: 0 = the preset's; loader: images per batch
    int threads;           // train: core threads (0: the machine's)
    const char *data_root; // loader: the ImageFolder root
    int workers;           // loader: worker processes
    int size;              // loader: crop output side
    int loader_timeout_s;  // loader: a batch taking longer fails
    const char *selftest;  // a --practice_selftest mode that breaks the check (the tuned
                           // variant's self-test; train: frozen and the others drop the
                           // update, half_lr halves the LR, drop_step leaves out the middle
                           // checked step; loader: any mode loses a batch), or "none"
} AllocWorkerArgs;

// The child's first message.
typedef struct AllocHello {
    int32_t ok;                 // 1, or 0 with error_kind and message
    int32_t error_kind;         // ErrorKind
    char message[1024];
    char malloc_from[256];      // the library the process's malloc resolves to
    uint64_t check_hash;        // train: the parameters' bits after the check's steps;
                                // loader: the check epoch's batches
    double check_moved;         // train: ||update|| / ||parameters|| after the check's steps
    int64_t check_items;        // loader: images in the check epoch
    double setup_seconds;       // the child's set-up, untimed (check and warm-up included)
    double start_rss_mib;       // its VmHWM when it started, before any set-up
} AllocHello;

// A request: `count` timed units, or count 0 to quit.
typedef struct AllocRequest {
    int64_t count;
} AllocRequest;

// A reply, followed (when ok) by `count` doubles: each unit's seconds.
typedef struct AllocReply {
    int32_t ok;
    int32_t error_kind;
    char message[1024];
    int64_t count;
    int64_t items;              // images over the request (train: steps x batch)
    int64_t wrong_units;        // loader: epochs that did not deliver every image once
    double peak_rss_mib;        // the child's VmHWM
    double workers_peak_rss_mib;// loader: the workers' VmHWM, summed
    double minor_faults;        // the child's minor page faults over the request
} AllocReply;

// ---- the parent's side (allocator_child.c) ----

typedef struct AllocChild {
    pid_t pid;
    int sock;                   // the parent's end of the socket pair
    AllocKind kind;
    AllocHello hello;
} AllocChild;

// Starts a child for args with LD_PRELOAD=library (glibc: LD_PRELOAD removed) and reads its
// hello. 0 (hello.ok may still be 0: the child's error), or -1 with the error set; *out is
// then NULL.
int alloc_child_start(const AllocWorkerArgs *args, const char *library, AllocChild **out);
// Asks for `count` units; fills reply and seconds[count]. 0 (reply->ok may be 0), or -1 (the
// child died or broke the protocol; error set).
int alloc_child_run(AllocChild *c, int64_t count, AllocReply *reply, double *seconds);
// Asks the child to quit and waits for it (killing it when it does not); NULL is fine.
void alloc_child_stop(AllocChild *c);

// ---- the child's side (allocator_worker.c) ----

// The child's main: argv as the parent built it, the socket at fds 0 (requests) and 3
// (replies). The exit status.
int alloc_worker_main(int argc, char **argv);
// The allocator in effect in process `pid` (0: this one): 0 when kind's library is mapped
// (glibc: neither jemalloc nor tcmalloc is), else -1 with the error naming what is.
int alloc_check_in_effect(AllocKind kind, pid_t pid);
// A process's VmHWM in MiB (pid 0: this one), or -1.
double alloc_peak_rss_mib(pid_t pid);

// FNV-1a over bytes, continuing from h (start: ALLOC_HASH_START).
#define ALLOC_HASH_START 14695981039346656037ull
uint64_t alloc_hash(uint64_t h, const void *data, size_t bytes);

#endif
