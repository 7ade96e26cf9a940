// pinned.h: page-locked (pinned) host memory, for the loader's pinning stage and the
// pin_memory benchmarks alike: a cudaHostAlloc'd buffer, or cudaHostRegister of memory
// that already exists (the loader's shared ring). Without a usable GPU every call fails
// with ERROR_NO_DEVICE ("no CUDA device ..."); a failed allocation is ERROR_OUT_OF_MEMORY.
#ifndef PINNED_H
#define PINNED_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// 0 when pinned memory can be used; -1 (ERROR_NO_DEVICE) otherwise.
int pinned_check_available(void);
// Allocates bytes of pinned host memory into *ptr (cudaHostAlloc). 0 or -1.
int pinned_alloc(size_t bytes, void **ptr);
// Frees memory from pinned_alloc (NULL is fine).
void pinned_free(void *ptr);
// Page-locks existing memory in place (cudaHostRegister). 0 or -1.
int pinned_register(void *ptr, size_t bytes);
// Undoes pinned_register (NULL is fine).
void pinned_unregister(void *ptr);

#ifdef __cplusplus
}
#endif
#endif
