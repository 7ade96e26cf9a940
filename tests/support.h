// support.h: small helpers shared by the tests: temporary folders, reading and writing
// files, running commands and benchmark programs (their listings, their results CSVs), and
// finding the source tree (SUITE_ROOT, set by run-tests.sh).
// Every test program that links support.c starts without the variables by which a caller
// steers the suite's scripts (TESTS_STATUS, TESTS_SKIP, TEST_JOBS, TEST_TIMEOUT, BENCH_*
// but BENCH_CACHE_DIR, DEVICE_CHECK_*, RESULTS_DIR, OUT, BUILD, ...: support.c lists them):
// a test sets what the commands it runs need. SUITE_TEST_FILTER=PATTERN runs only the
// program's tests whose names match (cmocka's filter: * and ?), e.g.
// SUITE_TEST_FILTER=test_cut_run_is_summarized build/tests/test_stats.
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/core.h"
#include "kernels/rng.h"
#include "kernels/synth.h"

// True (after printing "skipped: <reason>") when no CUDA device can be used; with
// SUITE_EXPECT_GPU=1 a missing device fails the running test instead.
bool test_gpu_missing(void);
// Inside a cmocka test: skips it, visibly, when there is no GPU.
#define REQUIRE_GPU() do { if (test_gpu_missing()) skip(); } while (0)
// Whether a CUDA device can be used, for tests whose expectations differ with and without
// one (GPU rows run or skip); with SUITE_EXPECT_GPU=1 a missing device fails the test.
bool test_gpu_present(void);

// The repository root: $SUITE_ROOT, or "." when unset.
const char *test_suite_root(void);
// The build folder: $SUITE_BUILD, or "build" when unset.
const char *test_build_dir(void);
// Creates a fresh temporary folder; returns its malloc'd path (the caller frees it).
char *test_temp_dir(void);
// Removes a folder tree (rm -rf).
void test_remove_tree(const char *path);
// Reads a whole file into a malloc'd NUL-terminated string, or NULL.
char *test_read_file(const char *path, size_t *size);
// Reads folder/name whole (see test_read_file), or NULL.
char *test_read_in(const char *folder, const char *name);
// Runs a shell command; returns its exit status (-1 when it could not run).
int test_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// True when the file exists and has at least min_size bytes.
bool test_file_at_least(const char *path, size_t min_size);
// Index of a column in a comma-separated header line, or -1.
int test_csv_column(const char *header, const char *name);
// Copies field `index` of a comma-separated line into out.
bool test_csv_field(const char *line, int index, char *out, size_t out_size);
// Copies field `name` (a column of csv's header, its first line) of `line` into out;
// fails the test when there is no such column or field.
void test_csv_named_field(const char *csv, const char *line, const char *name, char *out,
                          size_t out_size);
// The same field as a number (atof: 0 when empty).
double test_csv_number(const char *csv, const char *line, const char *name);
// Writes text to folder/name; false when the file could not be written whole.
bool test_write_file(const char *folder, const char *name, const char *text);
// Number of newline characters in text.
int test_count_lines(const char *text);

// Fills folder `dir` with links to every program on PATH except the named ones (separated
// by spaces, e.g. "gnuplot nvidia-smi"), so that PATH='dir' runs a command as on a machine
// without them (the GPU machine has no gnuplot). Fails the test when it cannot.
void test_path_without(const char *dir, const char *names);

// Seconds on the monotonic clock.
double test_now_s(void);
// Writes an executable bash script dir/name ("#!/usr/bin/env bash" then body); fails the
// test when it cannot.
void test_write_script(const char *dir, const char *name, const char *body);

// The standard output of `<build>/<program> --benchmark_list_tests` (malloc'd), or NULL
// (with the exit status printed) when the program did not exit 0.
char *test_bench_list(const char *program);
// Runs `<build>/<program> <args> --harness_csv=<tmp>/out.csv` in a fresh temporary folder
// and returns the CSV text (malloc'd), or NULL (with the exit status and the program's
// output printed) when the program did not exit 0, wrote no CSV, or reported a column
// outside the tidy-CSV schema (bench/driver/tidy_columns.def).
char *test_bench_csv(const char *program, const char *args);
// Checks every row of a results CSV: with a GPU each has status ok; without, each is
// skipped with a reason that starts "no CUDA device". Returns the number of rows, or -1
// with the first bad row described in why.
int test_rows_ok_or_skipped(const char *csv, bool gpu, char *why, size_t why_size);

// cmocka setup/teardown for tests that each work in a fresh temporary folder: test_dir
// is that folder while a test runs.
extern char *test_dir;
int test_setup_dir(void **state);
int test_teardown_dir(void **state);

// Runs build/<program> once per bad option (each followed by `args`, which may be ""):
// each run must exit 2 with a message on stderr naming the option (its text up to '=').
void test_bad_options_refused(const char *program, const char *const *bad, size_t n,
                              const char *args);
// The value of column `name` in the results CSV's data row whose first fields are
// practice_variant ("practice,variant") and whose params field is `params`; false when
// there is no such row.
bool test_csv_row_value(const char *csv, const char *practice_variant, const char *params,
                        const char *name, char *out, size_t size);

// The driver's self-test: runs build/<program> <args> --practice_selftest=<mode>, which
// must exit 1 with a CSV in which every row of practice `practice` and variant `baseline`
// stays ok and every row of each of the n_tuned `tuned` variants is an error whose reason
// contains `reason` (rows of other practices and variants are not looked at). Prints each
// tuned variant's first reason; returns the number of failed rows (at least one per tuned
// variant). Fails the test otherwise.
int test_selftest_fails(const char *program, const char *args, const char *mode, const char *practice,
                        const char *baseline, const char *const *tuned, int n_tuned, const char *reason);

// Before a test program starts MPI ranks (mpirun passes the environment on): Open MPI keeps
// its plugins loaded at MPI_Finalize and ASan unwinds Open MPI's allocations fully (its
// libraries have no frame pointers), so that sanitized runs can name the library behind Open
// MPI's own leaks and tests/sanitizer/lsan.supp suppresses them; only sanitized programs
// read the ASan option.
void test_keep_mpi_leaks_nameable(void);

// ||got - want|| / ||want|| in double (||got - want|| when want is all zeros).
double test_rel_l2(const float *got, const float *want, size_t n);

// n floats of scale x standard normal draws from r, malloc'd (the test fails when out of
// memory); a copy of n floats of src, likewise. Free them with free().
float *test_random_floats(Rng *r, size_t n, float scale);
float *test_copy_floats(const float *src, size_t n);

// core_create, failing the test (with the error) when it fails.
Core *test_core_create(const CoreConfig *cfg);
// The cuDNN algorithms of core's current plans (core_conv_algos, up to max shapes) into
// info, asserting at least one shape and for each a named forward algorithm and, for the
// backward passes, named ones when `backward`, else "none" (core_infer's forward-only
// plan). Returns the count.
int test_conv_algos(Core *core, bool backward, CoreConvAlgoInfo *info, int max);

// A synthetic host batch of n images for cfg's model (synth task seed 1): task, buffers
// and the CoreBatch over them. test_batch_open fills it with batch `index`
// (synth_batch(&b->task, ...) refills it); test_batch_close frees the buffers.
typedef struct TestBatch {
    SynthTask task;
    float *images;
    int32_t *labels;
    CoreBatch b;
} TestBatch;
void test_batch_open(TestBatch *b, const CoreConfig *cfg, int n, uint64_t index);
void test_batch_close(TestBatch *b);

// A whole-model run on synthetic host batches (seed 1): the loss and gradient at the
// initial weights (core_loss_grad), then `steps` training steps, then an eval of the last
// batch; the parameters and the core's stats after them. Fails the test on any error.
typedef struct TestRun {
    float loss, eval_loss;
    float *grad, *params; // n_params each
    size_t np;
    CoreStats stats;
} TestRun;
TestRun test_run_model(const CoreConfig *cfg, int steps);
void test_run_free(TestRun *r);

// As test_bench_csv, but whatever the exit status (returned in *exit_status): the CSV text
// (malloc'd), or NULL (with the program's output printed) when it wrote none.
char *test_bench_csv_exit(const char *program, const char *args, int *exit_status);

#endif
