// support.h: small helpers shared by the tests: temporary folders, reading files,
// running commands, and finding the source tree (SUITE_ROOT, set by run-tests.sh).
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

// True (after printing "skipped: <reason>") when no CUDA device can be used.
bool test_gpu_missing(void);
// Inside a cmocka test: skips it, visibly, when there is no GPU.
#define REQUIRE_GPU() do { if (test_gpu_missing()) skip(); } while (0)

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
// Runs a shell command; returns its exit status (-1 when it could not run).
int test_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// True when the file exists and has at least min_size bytes.
bool test_file_at_least(const char *path, size_t min_size);
// Index of a column in a comma-separated header line, or -1.
int test_csv_column(const char *header, const char *name);
// Copies field `index` of a comma-separated line into out.
bool test_csv_field(const char *line, int index, char *out, size_t out_size);

#endif
