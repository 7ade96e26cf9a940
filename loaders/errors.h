// errors.h: how the loaders module reports failures. Functions return -1 (or NULL)
// and record one human-readable message per thread, naming the file or worker at
// fault; the caller reads it with loaders_last_error(). Nothing here exits.
#ifndef LOADERS_ERRORS_H
#define LOADERS_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

// Records a printf-style message as this thread's last loaders error; returns -1.
int loaders_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// The last recorded loaders error on this thread ("" when none).
const char *loaders_last_error(void);
// Clears this thread's last loaders error.
void loaders_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
