// pin.h: page-locked (pinned) host memory for the loader's pinning stage, so the
// stage can be measured on its own: a cudaHostAlloc'd copy target, or cudaHostRegister
// of memory that already exists (the shared ring). Without a GPU every call fails
// with a message that starts with "no CUDA device".
#ifndef LOADERS_PIN_H
#define LOADERS_PIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// 0 when pinned memory can be used; -1 with "no CUDA device ..." otherwise.
int pin_check_available(void);
// Allocates bytes of pinned host memory into *ptr (cudaHostAlloc). 0 or -1.
int pin_alloc(size_t bytes, void **ptr);
// Frees memory from pin_alloc (NULL is fine).
void pin_free(void *ptr);
// Page-locks existing memory in place (cudaHostRegister). 0 or -1.
int pin_register(void *ptr, size_t bytes);
// Undoes pin_register.
void pin_unregister(void *ptr);

#ifdef __cplusplus
}
#endif
#endif
