// harness.h: the suite's C API over Google Benchmark 1.7.1.
// A benchmark is `practice/variant[/param:value...]` with a role (baseline or tuned)
// and a timing mode. The harness owns the loop, statistics and output formats
// (Google Benchmark's console/JSON/CSV plus our tidy CSV via --harness_csv=FILE),
// and puts the device and library context on every run.
#ifndef HARNESS_H
#define HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HARNESS_MAX_PARAMS 4

typedef enum { HARNESS_BASELINE, HARNESS_TUNED } HarnessRole;

// How a benchmark's time is measured; it goes into the label of every run.
typedef enum {
    HARNESS_TIMING_CUDA_EVENTS, // device work timed by CUDA events (manual time)
    HARNESS_TIMING_WALL,        // wall clock across steps ending in a synchronize
    HARNESS_TIMING_MANUAL,      // other manual time, set with harness_set_iteration_time
} HarnessTiming;

typedef enum { HARNESS_NS, HARNESS_US, HARNESS_MS, HARNESS_S } HarnessUnit;

typedef enum {
    HARNESS_COUNTER_PLAIN = 0, // reported as given (averaged over threads)
    HARNESS_COUNTER_RATE = 1,  // value divided by the measured time: a per-second rate
    HARNESS_COUNTER_AVG_ITERATIONS = 2, // value divided by the iteration count
} HarnessCounterKind;

typedef struct HarnessState HarnessState; // one run of one benchmark instance
typedef struct HarnessBench HarnessBench; // a registered benchmark

typedef void (*HarnessFn)(HarnessState *st, void *user);

typedef struct {
    const char *practice;  // e.g. "pin_memory"
    const char *variant;   // e.g. "pinned_async"
    HarnessRole role;
    HarnessTiming timing;
    HarnessFn fn;
    void *user;            // passed to fn; must outlive harness_main
    const char *param_names[HARNESS_MAX_PARAMS]; // NULL-terminated, e.g. {"bytes"}
    HarnessUnit unit;      // display unit of time (default HARNESS_NS)
} HarnessSpec;

// Registers a benchmark; returns NULL (and prints why) on a bad spec.
HarnessBench *harness_register(const HarnessSpec *spec);
// Adds one instance with one value per declared parameter.
void harness_add_instance(HarnessBench *b, const int64_t *values);
// Adds one instance per value of a single-parameter benchmark.
void harness_add_values(HarnessBench *b, const int64_t *values, int count);
// Fixes the iteration count instead of letting the library choose it.
void harness_set_iterations(HarnessBench *b, int64_t iterations);
// Minimum measured time per repetition (the library's MinTime).
void harness_set_min_time(HarnessBench *b, double seconds);

// The state loop: `while (harness_keep_running(st)) { ... }`.
bool harness_keep_running(HarnessState *st);
// Value of parameter i of this instance; out of range: 0, and the run is marked failed.
int64_t harness_param(const HarnessState *st, int i);
// Manual time of the iteration just run (CUDA-event or other manual timing).
void harness_set_iteration_time(HarnessState *st, double seconds);
// Sets a user counter; HARNESS_COUNTER_RATE makes it per second of measured time.
void harness_counter(HarnessState *st, const char *name, double value, HarnessCounterKind kind);
// Totals over all iterations; reported as bytes_per_second / items_per_second.
void harness_set_bytes_processed(HarnessState *st, int64_t bytes);
void harness_set_items_processed(HarnessState *st, int64_t items);
// Free text appended to the run's label (after role and timing).
void harness_set_label(HarnessState *st, const char *label);
// Skips this run with a reason ("no CUDA device"); call before the loop and return.
void harness_skip(HarnessState *st, const char *reason);
// Marks this run failed (wrong data, library error); call and return.
void harness_fail(HarnessState *st, const char *message);
// Pauses/resumes the timer around untimed setup inside the loop.
void harness_pause_timing(HarnessState *st);
void harness_resume_timing(HarnessState *st);
// Number of iterations the library asked for in this run.
int64_t harness_max_iterations(const HarnessState *st);

// Adds a key/value to the run context (JSON "context" and tidy-CSV ctx_ columns).
void harness_add_context(const char *key, const char *value);

// Parses --benchmark_* flags (and --harness_csv=FILE), adds the device context, runs
// every registered benchmark. Returns the process exit code.
int harness_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
