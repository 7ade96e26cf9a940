// sampler.h: torch.utils.data.DistributedSampler. Each epoch the dataset's indices are
// shuffled by (seed, epoch), the same on every rank; the list is padded by wrapping
// (or, with drop_last, cut) to a multiple of the world, and rank r takes every world-th
// index from r. Batch s of every rank's shard, taken together, is then batch s of one
// process that reads the same list with the global batch: the same global order.
#ifndef DIST_SAMPLER_H
#define DIST_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DistSampler {
    size_t dataset_size;
    int world, rank;
    bool shuffle, drop_last;
    uint64_t seed;
    size_t per_rank; // indices per rank per epoch (the same on every rank)
} DistSampler;

// Checks the arguments and sizes the shards.
int dist_sampler_init(DistSampler *s, size_t dataset_size, int world, int rank, bool shuffle,
                      bool drop_last, uint64_t seed);
// This rank's indices for `epoch` (per_rank of them) into out.
int dist_sampler_indices(const DistSampler *s, int epoch, size_t *out);
// The whole epoch's list before sharding (per_rank * world indices): what one process
// with the global batch reads, in the same order.
int dist_sampler_global(const DistSampler *s, int epoch, size_t *out);

// Each rank's share of a global batch: global_batch / world, an error naming the rank
// when the world does not divide it (every rank must take the same steps).
int dist_local_batch(int global_batch, int world, int rank, int *local);

#ifdef __cplusplus
}
#endif
#endif
