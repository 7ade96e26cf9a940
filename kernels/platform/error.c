// error.c: the per-thread error record behind error.h.
#include "kernels/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ERROR_TEXT = 2048 };

static _Thread_local char message[ERROR_TEXT];
static _Thread_local ErrorKind kind;

int error_set_at(ErrorKind k, const char *file, int line, const char *fmt, ...)
{
    // The format's arguments may point into message itself (an earlier error quoted).
    char text[ERROR_TEXT - 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    snprintf(message, sizeof message, "%.200s:%d: %s", file, line, text);
    kind = k == ERROR_NONE ? ERROR_LIBRARY : k;
    return -1;
}

int error_wrap(const char *fmt, ...)
{
    char prefix[512], old[ERROR_TEXT];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, message, sizeof old);
    snprintf(message, sizeof message, "%.511s: %.1500s", prefix, old);
    if (kind == ERROR_NONE) kind = ERROR_LIBRARY;
    return -1;
}

int error_restore(ErrorKind k, const char *text)
{
    if (text != message) snprintf(message, sizeof message, "%s", text ? text : "");
    kind = k == ERROR_NONE ? ERROR_LIBRARY : k;
    return -1;
}

const char *error_message(void) { return message; }

ErrorKind error_kind(void) { return kind; }

bool error_is_machine_limit(void) { return kind == ERROR_OUT_OF_MEMORY || kind == ERROR_NO_DEVICE; }

const char *error_kind_name(ErrorKind k)
{
    switch (k) {
    case ERROR_NONE: return "";
    case ERROR_OUT_OF_MEMORY: return "out of memory";
    case ERROR_NO_DEVICE: return "no device";
    case ERROR_IO: return "I/O";
    case ERROR_BAD_DATA: return "bad data";
    case ERROR_LIBRARY: return "library";
    case ERROR_BAD_USAGE: return "bad usage";
    case ERROR_MISSING_TOOL: return "missing tool";
    }
    return "?";
}

static bool env_is_one(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "1") == 0;
}

bool error_expect_gpu(void) { return env_is_one("SUITE_EXPECT_GPU"); }

bool error_in_gpu_check(void) { return env_is_one("SUITE_GPU_CHECK"); }

void error_clear(void)
{
    message[0] = '\0';
    kind = ERROR_NONE;
}
