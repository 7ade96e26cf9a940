// data_parallel.h: torch.nn.DataParallel over the shared core: one process, one replica
// per device (CUDA: device i; CPU: one core per host thread). Each step, as PyTorch:
// 1. broadcast the parameters of replica 0 to the others; 2. scatter the batch in
// chunks (torch.chunk sizes); 3. forward and backward on every replica, one host thread
// per device; 4. reduce the gradients onto replica 0 (weighted by chunk size: the mean
// over the whole batch); 5. the optimizer runs on replica 0 only. There is no Python GIL
// here: the gap to DDP that remains is the algorithm's. BatchNorm: each replica normalises
// its own chunk with its own batch statistics; only replica 0's running statistics are
// updated and kept (PyTorch updates each replica's copy and discards all but replica 0's).
#ifndef DIST_DATA_PARALLEL_H
#define DIST_DATA_PARALLEL_H

#include <stddef.h>

#include "kernels/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DataParallel DataParallel;

// devices replicas of cfg (its backend: CPU replicas run one thread each and the process's
// CPU thread setting becomes 1; CUDA replica i on device i). All start from cfg.seed.
int dp_create(const CoreConfig *cfg, int devices, DataParallel **out);
// One step on a host batch (n >= 1; chunks of ceil(n / devices), as torch.chunk).
int dp_step(DataParallel *dp, const CoreBatch *batch, CoreStepResult *result);
// Replica 0's core: the model (parameters, stats) that DataParallel trains.
Core *dp_core(DataParallel *dp);
int dp_devices(const DataParallel *dp);
// Peak memory of replica i: the core's own bytes and (CUDA) the device's used growth.
int dp_replica_memory(DataParallel *dp, int replica, size_t *peak_bytes, size_t *device_used_bytes);
// Frees every replica; NULL is fine.
void dp_free(DataParallel *dp);

#ifdef __cplusplus
}
#endif
#endif
