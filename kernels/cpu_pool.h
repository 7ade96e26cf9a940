// cpu_pool.h: the fast CPU backend's threads: one process-wide pool that runs a batch of
// independent tasks, the caller working too. Tasks are claimed one at a time from a
// shared counter, so a worker the OS has not scheduled yet simply gets none: the call
// returns once every task is done, without waiting for idle threads to check in (an
// OpenMP parallel region waits for its whole team at the closing barrier, which on a
// busy machine costs a scheduler time slice per region). Workers spin briefly between
// calls, then sleep. Which thread runs a task never changes a result: per-task state is
// indexed by task, not by thread.
#ifndef CPU_POOL_H
#define CPU_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One task: task is in [0, count).
typedef void (*CpuTaskFn)(void *ctx, int task);

// Runs fn(ctx, 0..count-1) on at most `threads` threads (this one included) and returns
// when all are done. count <= 1 or threads <= 1 runs them here, in order. Worker threads
// start on first use (a failure to start one just means fewer threads). Safe to call
// from several threads: a call made while another is running runs its tasks inline.
void cpu_pool_run(int threads, int count, CpuTaskFn fn, void *ctx);

// Binds the compute threads to CPUs, as GOMP_CPU_AFFINITY (KMP_AFFINITY=compact): cpus != 0
// (bit i: CPU i, the first 64) puts the calling thread on the lowest CPU of cpus and pool
// worker k on the (k+1)-th, cyclically (workers started later too); cpus = 0 gives the calling
// thread and the workers back the CPUs the calling thread had at the first binding. A call
// asking for the binding already in force costs no system call. 0, or -1 with errno (EINVAL:
// none of the CPUs may be used here).
int cpu_pool_bind(uint64_t cpus);

// The CPUs (bit i: CPU i, the first 64) that cpu_pool_run's tasks ran on since the last
// call, on any thread (inline runs included; sampled once per thread per run), then forgets
// them: what a binding did, for a counter.
uint64_t cpu_pool_cpus_used(void);

#ifdef __cplusplus
}
#endif
#endif
