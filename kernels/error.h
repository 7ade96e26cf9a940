// error.h: the project's one error store. A function that fails records one message per
// thread, with a kind, and returns -1 (or NULL); it never exits. Programs and the
// harness decide what a kind means - out of memory and no device are facts about the
// machine (a benchmark skips with the reason), everything else fails the run - so nobody
// parses message text. Messages start with the file:line that raised them.
#ifndef ERROR_H
#define ERROR_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ERROR_NONE = 0,
    ERROR_OUT_OF_MEMORY, // host or device memory exhausted (a batch too large, ...)
    ERROR_NO_DEVICE,     // no usable CUDA device, or fewer than needed
    ERROR_IO,            // a file or folder that cannot be read, written or found
    ERROR_BAD_DATA,      // input that is not what it claims (a corrupt JPEG, a bad CSV)
    ERROR_LIBRARY,       // a CUDA, cuDNN, cuBLAS, NCCL or system call failed otherwise
    ERROR_BAD_USAGE,     // a bad argument, flag, environment value or configuration
    ERROR_MISSING_TOOL,  // a program the run needs is not installed (mpirun): setup installs
                         // it, so a failure; a skip naming it only under SUITE_GPU_CHECK=1
} ErrorKind;

// Records "file:line: message" with its kind as this thread's error; returns -1.
int error_set_at(ErrorKind kind, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
// Sets this thread's error to a message and kind recorded earlier (error_message() and
// error_kind() of this or another thread or process), unchanged; returns -1.
int error_restore(ErrorKind kind, const char *message);
// Prefixes context to this thread's error, keeping its kind ("batch 3: <error>"); -1.
int error_wrap(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// This thread's error message ("" when none).
const char *error_message(void);
// This thread's error kind (ERROR_NONE when none).
ErrorKind error_kind(void);
// True for the kinds that are facts about the machine: out of memory, no device.
bool error_is_machine_limit(void);
// "out of memory", "no device", "I/O", "bad data", "library", "bad usage", "missing tool"
// ("" for none).
const char *error_kind_name(ErrorKind kind);
// SUITE_EXPECT_GPU=1 (set by the GPU check): this machine must have a usable CUDA device,
// so "no CUDA device" fails every test and benchmark instead of skipping them.
bool error_expect_gpu(void);
// SUITE_GPU_CHECK=1 (set by the GPU check, which runs where nothing can be installed): a
// missing tool (ERROR_MISSING_TOOL) is a visible skip naming it instead of a failure.
bool error_in_gpu_check(void);
// Forgets this thread's error.
void error_clear(void);

#define error_set(kind, ...) error_set_at((kind), __FILE__, __LINE__, __VA_ARGS__)
// Propagates a -1 from one of our own functions (its error is already set).
#define TRY(call) do { if ((call) != 0) return -1; } while (0)

#ifdef __cplusplus
}
#endif
#endif
