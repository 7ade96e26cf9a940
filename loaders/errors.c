// errors.c: the per-thread last-error message of the loaders module.
#include "loaders/errors.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

int loaders_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

const char *loaders_last_error(void) { return last_error; }

void loaders_clear_error(void) { last_error[0] = '\0'; }
