// rendezvous.h: the small TCP rendezvous of env:// (PyTorch's default init method):
// rank 0 binds MASTER_PORT, accepts the world's other ranks, checks that they agree on
// the world size and sends each one a blob (the NCCL unique id). Everything has a
// deadline; every error names the rank and what is missing or wrong.
#ifndef DIST_RENDEZVOUS_H
#define DIST_RENDEZVOUS_H

#include <stddef.h>

#include "dist/env.h"

#ifdef __cplusplus
extern "C" {
#endif

// Rank 0 sends blob[size] to every other rank; the others receive it into blob. Gives up
// after timeout_ms (a peer that never arrives, no rank 0 listening). Needs MASTER_ADDR
// and MASTER_PORT in env. A world of one returns at once.
int dist_rendezvous_share(const DistEnv *env, void *blob, size_t size, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
