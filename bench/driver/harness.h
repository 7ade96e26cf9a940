// harness.h: the suite's C API over Google Benchmark 1.7.1.
// A benchmark is `practice/variant[/axis:value...]` with a role (baseline, tuned or
// reference) and a timing mode. Its instances are the product of its sweep axes, whose
// values the user can widen or narrow from the command line (--harness_axis), as
// nvbench's -a does. The harness owns the loop, statistics and output formats (Google
// Benchmark's console/JSON/CSV plus our tidy CSV via --harness_csv=FILE), the flags
// every practice takes (--preset, --backend, --data, --data_dir, --threads) and the
// options a program declares, and puts the device and library context on every run.
//
// A program: declare its options (harness_option_*), harness_init(argc, argv), register
// its benchmarks (they may depend on option values), return harness_run(). Programs
// without options can call harness_main(argc, argv) after registering.
#ifndef HARNESS_H
#define HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HARNESS_MAX_AXES 6

typedef enum {
    HARNESS_BASELINE,  // what a user gets without the practice
    HARNESS_TUNED,     // with the practice; speedup = baseline time / tuned time
    HARNESS_REFERENCE, // a yardstick that is neither (e.g. raw decode); no speedup
} HarnessRole;

// How a benchmark's time is measured; it goes into the label of every run.
typedef enum {
    HARNESS_TIMING_CUDA_EVENTS, // device work timed by CUDA events (manual time)
    HARNESS_TIMING_WALL,        // wall clock across steps ending in a synchronize
    HARNESS_TIMING_MANUAL,      // other manual time, set with harness_set_iteration_time
} HarnessTiming;

typedef enum { HARNESS_NS, HARNESS_US, HARNESS_MS, HARNESS_S } HarnessUnit;

// The L2 state a GPU micro benchmark measures; it goes into the label ("cache=cold") and
// the tidy CSV's `cache` column. Cold: the benchmark flushes the L2 (l2_flush of
// bench/driver/gpu_timing.h) before starting the timer of every timed iteration, as a layer
// finds it in a real step where other layers ran in between; warm: it re-runs on data
// the previous iteration left in the cache.
typedef enum {
    HARNESS_CACHE_UNSTATED = 0, // not a GPU micro benchmark (macro steps, CPU work)
    HARNESS_CACHE_WARM,
    HARNESS_CACHE_COLD,
} HarnessCache;

typedef enum {
    HARNESS_COUNTER_PLAIN = 0, // reported as given (averaged over threads)
    HARNESS_COUNTER_RATE = 1,  // value divided by the measured time: a per-second rate
    HARNESS_COUNTER_AVG_ITERATIONS = 2, // value divided by the iteration count
} HarnessCounterKind;

// A sweep axis. values: comma-separated; an integer item may be a range "lo:hi:*k"
// (geometric) or "lo:hi:+k" (arithmetic), e.g. "4096:268435456:*4" or "8,64,512".
// --harness_axis=NAME=VALUES replaces the values of every benchmark with that axis.
typedef struct HarnessAxis {
    const char *name;  // NULL ends the list
    const char *values;
    bool is_string;    // names (presets...) rather than integers
} HarnessAxis;

typedef struct HarnessState HarnessState; // one run of one benchmark instance
typedef struct HarnessBench HarnessBench; // a registered benchmark

typedef void (*HarnessFn)(HarnessState *st, void *user);

typedef struct {
    const char *practice;  // e.g. "pin_memory"
    const char *variant;   // e.g. "pinned_async"
    HarnessRole role;
    HarnessTiming timing;
    HarnessFn fn;
    void *user;            // passed to fn; must outlive harness_run
    HarnessAxis axes[HARNESS_MAX_AXES]; // the sweep; instance names list them in order
    HarnessUnit unit;      // display unit of time (default HARNESS_NS)
    double min_time;       // seconds per repetition when the user gives no
                           // --benchmark_min_time (0: the library's default)
    int64_t iterations;    // fixed iterations, whatever --benchmark_min_time says (e.g. 1
                           // for a run to a target); 0: the library chooses
    HarnessCache cache;    // GPU micro benchmarks: cold or warm L2 (see HarnessCache)
    bool gpu_only;         // needs a CUDA device (CUDA-event timing implies it): on a machine
                           // without a usable one its rows skip, and are named min_time:0.000
                           // (no fixed iterations), so that make bench's time plan counts
                           // them as the skips they are
} HarnessSpec;

// The flags every practice program takes, parsed once by harness_init.
typedef struct HarnessCommon {
    const char *backend;   // --backend=auto|cpu|cpu-ref|cuda ("auto" when not given)
    const char *data;      // --data=synthetic|images (NULL: each practice's own choice)
    const char *data_dir;  // --data_dir=DIR: an ImageFolder root for --data=images
    int threads;           // --threads=N (0 when not given: the machine's cores)
} HarnessCommon;

// Declares an option --NAME=VALUE of this program (before harness_init), with its
// default, range and help; env (may be NULL) names an environment variable read when
// the flag is absent (the program's old names keep working). A bad value is an error
// at start-up, naming the flag or variable.
void harness_option_int(const char *name, int64_t def, int64_t min, int64_t max,
                        const char *env, const char *help);
void harness_option_str(const char *name, const char *def, const char *env, const char *help);
// Values of declared options (after harness_init).
int64_t harness_option_int_value(const char *name);
const char *harness_option_str_value(const char *name); // NULL when unset and no default

// Parses the command line: the harness's flags, declared options and Google Benchmark's
// flags. Returns -1 to go on, or the exit status to return at once (a bad flag: 2).
int harness_init(int argc, char **argv);
// The common flags (after harness_init).
const HarnessCommon *harness_common(void);
// Registers a benchmark; returns NULL (and prints why) on a bad spec.
HarnessBench *harness_register(const HarnessSpec *spec);
// The same with the sweep from `axes`, a list that ends with a NULL name (one that several
// specs share), in place of spec->axes; more than HARNESS_MAX_AXES is a bad spec.
HarnessBench *harness_register_axes(const HarnessSpec *spec, const HarnessAxis *axes);
// Runs every registered benchmark (after harness_init); prints --help when asked.
// Returns the process exit code (1 when a run failed, never for skips).
// Nothing measured is lost: every repetition is written to the tidy CSV and FILE.reps.csv
// as it finishes (Google Benchmark itself reports an instance only after its last one);
// until then its row has status `partial` ("k of N repetitions"). SIGINT, SIGTERM or SIGHUP (a
// deadline's `timeout --signal=INT`, a stopped `make bench`; SIGHUP unless it was ignored at
// start, as under nohup) finishes the write in progress, closes the
// --benchmark_out file, writes FILE.partial ("rows_done rows_planned": repetitions done,
// instances x repetitions planned) beside the CSV and exits with 128 + the signal.
// Every run starts with an empty error store (kernels/error.h); an error in any
// repetition makes the row an error. Under SUITE_EXPECT_GPU=1 on a machine without a
// usable GPU, harness_skip fails the run instead.
int harness_run(void);
// harness_init + harness_run, for programs that declare no options.
int harness_main(int argc, char **argv);

// The state loop: `while (harness_keep_running(st)) { ... }`.
bool harness_keep_running(HarnessState *st);
// Value of an axis of this instance; an unknown name (or the wrong type) returns 0 /
// "" and marks the run failed.
int64_t harness_axis_int(HarnessState *st, const char *name);
const char *harness_axis_str(HarnessState *st, const char *name);
// Manual time of the iteration just run (CUDA-event or other manual timing).
void harness_set_iteration_time(HarnessState *st, double seconds);
// Sets a user counter; HARNESS_COUNTER_RATE makes it per second of measured time.
void harness_counter(HarnessState *st, const char *name, double value, HarnessCounterKind kind);
// Totals over all iterations; reported as bytes_per_second / items_per_second.
void harness_set_bytes_processed(HarnessState *st, int64_t bytes);
void harness_set_items_processed(HarnessState *st, int64_t items);
// Per-repetition values: with --benchmark_repetitions=N the tidy CSV FILE.csv gets a
// sibling FILE.reps.csv, one row per measured repetition (practice, variant, role, timing,
// params, repetition, time, cpu_time, time_unit, iterations, counters, the GPU state
// below); the tidy row holds their mean, median, stddev, min, max and time_cv.
// With a usable GPU every run also records NVML's view of it before and after (as
// counters, so in the JSON, the tidy CSV and the reps file): gpu_sm_clock_before_mhz,
// gpu_sm_clock_after_mhz, gpu_temp_before_c, gpu_temp_after_c, gpu_throttle_before,
// gpu_throttle_after (NVML clock-event reason bits; absent when NVML cannot say).

// Free text appended to the run's label (after role and timing).
void harness_set_label(HarnessState *st, const char *label);
// Skips this run with a reason ("no CUDA device"); call before the loop and return.
// With SUITE_EXPECT_GPU=1 and no usable GPU this fails the run (naming both).
void harness_skip(HarnessState *st, const char *reason);
// Marks this run failed (wrong data, library error); call and return.
void harness_fail(HarnessState *st, const char *message);
// Whether this run was failed or skipped (harness_fail, harness_skip).
bool harness_run_failed(const HarnessState *st);
// Pauses/resumes the timer around untimed setup inside the loop.
void harness_pause_timing(HarnessState *st);
void harness_resume_timing(HarnessState *st);
// Number of iterations the library asked for in this run.
int64_t harness_max_iterations(const HarnessState *st);
// One point of a curve of this run (an accuracy against steps, a loss scale...), written
// to the tidy CSV's sibling FILE.curves.csv with the run's practice, variant, role and
// axes: metric, step, images seen, wall seconds, value.
void harness_curve_point(HarnessState *st, const char *metric, int64_t step, int64_t images,
                         double seconds, double value);

// What a run built (its core, its batches) for the next run of the same instance, so that
// a row's later repetitions time steps only: made, checked and warmed up once per row
// group, as the PyTorch side does (docs/statistics.md, "What a repetition is"). The
// harness releases it with release(obj) when the instance's row group ends (or the
// program does), unless a later run of the instance took it. One object per instance: a
// second keep releases the first.
void harness_keep(HarnessState *st, void *obj, void (*release)(void *obj));
// What the previous run of this instance kept (the caller owns it now), or NULL.
void *harness_take_kept(HarnessState *st);

// Adds a key/value to the run context (JSON "context" and tidy-CSV ctx_ columns).
void harness_add_context(const char *key, const char *value);

#ifdef __cplusplus
}
#endif
#endif
