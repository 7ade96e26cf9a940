// clock.h: the clocks every timer of the project reads, in seconds: monotonic wall time
// (never jumps) and the process's CPU time.
#ifndef CLOCK_H
#define CLOCK_H

#include <time.h>

static inline double clock_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// CPU time this process (all its threads) has used, in seconds.
static inline double clock_process_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
