// sampler.c: DistributedSampler-style shards (see sampler.h).
#include "dist/sampler.h"

#include <stdlib.h>

#include "kernels/error.h"
#include "kernels/rng.h"

int dist_sampler_init(DistSampler *s, size_t dataset_size, int world, int rank, bool shuffle,
                      bool drop_last, uint64_t seed)
{
    if (world <= 0) return error_set(ERROR_BAD_USAGE, "sampler: world size %d must be > 0", world);
    if (rank < 0 || rank >= world) return error_set(ERROR_BAD_USAGE, "sampler: rank %d not in [0, %d)", rank, world);
    if (dataset_size == 0) return error_set(ERROR_BAD_USAGE, "rank %d: sampler: empty dataset", rank);
    if (drop_last && dataset_size < (size_t)world)
        return error_set(ERROR_BAD_USAGE, "rank %d: sampler: %zu samples cannot feed %d ranks with drop_last",
                         rank, dataset_size, world);
    *s = (DistSampler){.dataset_size = dataset_size, .world = world, .rank = rank, .shuffle = shuffle,
                       .drop_last = drop_last, .seed = seed};
    s->per_rank = drop_last ? dataset_size / (size_t)world : (dataset_size + (size_t)world - 1) / (size_t)world;
    return 0;
}

int dist_sampler_global(const DistSampler *s, int epoch, size_t *out)
{
    size_t n = s->dataset_size, total = s->per_rank * (size_t)s->world;
    size_t *perm = malloc(n * sizeof *perm);
    if (!perm) return error_set(ERROR_OUT_OF_MEMORY, "sampler: out of memory");
    for (size_t i = 0; i < n; i++) perm[i] = i;
    if (s->shuffle) {  // Fisher-Yates, seeded by (seed, epoch): the same on every rank
        Rng r = rng_make(s->seed, (uint64_t)epoch, 0x5a3d1e);
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = (size_t)rng_below(&r, (int64_t)i + 1);
            size_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
    }
    for (size_t i = 0; i < total; i++) out[i] = perm[i % n];  // pad by wrapping, or cut
    free(perm);
    return 0;
}

int dist_sampler_indices(const DistSampler *s, int epoch, size_t *out)
{
    size_t total = s->per_rank * (size_t)s->world;
    size_t *all = malloc(total * sizeof *all);
    if (!all) return error_set(ERROR_OUT_OF_MEMORY, "sampler: out of memory");
    if (dist_sampler_global(s, epoch, all) != 0) { free(all); return -1; }
    for (size_t i = 0; i < s->per_rank; i++) out[i] = all[(size_t)s->rank + i * (size_t)s->world];
    free(all);
    return 0;
}

int dist_local_batch(int global_batch, int world, int rank, int *local)
{
    if (world <= 0) return error_set(ERROR_BAD_USAGE, "rank %d: world size %d must be > 0", rank, world);
    if (global_batch <= 0) return error_set(ERROR_BAD_USAGE, "rank %d: global batch %d must be > 0", rank, global_batch);
    if (global_batch % world != 0)
        return error_set(ERROR_BAD_USAGE, "rank %d: the global batch %d is not divisible by the world size %d "
                         "(every rank takes global/world samples)", rank, global_batch, world);
    *local = global_batch / world;
    return 0;
}
