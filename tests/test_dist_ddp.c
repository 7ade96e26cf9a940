// test_dist_ddp.c: DistributedDataParallel on CPU ranks through Open MPI, against one
// process training on the global batch. The cmocka tests run this same program under
// `mpirun --allow-run-as-root --oversubscribe -np 2|3 <this> --ddp-worker ...` (skipped,
// visibly, when mpirun is missing); each rank trains K steps on its DistributedSampler
// shard, computes the single-process reference itself (same initial weights, the global
// batch, the same global sample order) and compares every parameter:
//   |ddp - single| <= 1e-6 + 1e-5 * |single|   (fp32; only the summation order differs;
//   the worst seen here is 1.5e-8 while the weights move by 1e-2)
// for overlapped and non-overlapped all-reduce, many buckets, the default (one bucket for
// this model) and all-in-one, no_sync accumulation against one large batch, and clipping
// with the GradScaler path (both must see the reduced gradients). The options of the
// tuning guide's distributed items: accumulation that all-reduces every micro-batch
// (sync_every_micro_batch, no no_sync: A all-reduces of every bucket per step, counted),
// buckets in forward order (bucket_order_forward) and uneven shares of the global batch
// weighted by loss_weight = share x world / global batch all match the same reference.
// BatchNorm (the `tiny` ResNet): each DDP rank normalises its own local batch with its
// own batch statistics (DDP is not SyncBatchNorm), so DDP over N ranks is NOT one process
// on the global batch; it is DataParallel over N replicas whose chunk r is rank r's batch.
// The BN variants compare the parameters with that (same tolerance), and check
// broadcast_buffers (see check_buffers): every rank's running statistics follow rank 0's,
// DataParallel's replica 0's, within the same tolerance. A rank
// killed mid-run must make mpirun and every other rank exit non-zero within seconds,
// leaving no process behind; a rank that hangs must trip the others' watchdog.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/comm.h"
#include "dist/data_parallel.h"
#include "dist/ddp.h"
#include "dist/env.h"
#include "dist/sampler.h"
#include "kernels/core.h"
#include "kernels/gpu_device.h"
#include "kernels/error.h"
#include "kernels/synth.h"
#include "tests/support.h"

#define TOL_ABS 1e-6
#define TOL_REL 1e-5
enum { GLOBAL_BATCH = 12, STEPS = 4, DATASET = 100 };

// ---- the rank side ----------------------------------------------------------------------

typedef struct Variant {
    const char *name;
    bool overlap;
    size_t cap, first; // bucket bytes
    int accumulation;
    float clip_norm;   // > 0: clip_grad_norm_, which must see the reduced gradients
    bool fp16;         // the GradScaler path (fp32 maths on the CPU): its inf check and
                       // unscale must see the reduced gradients too
    const char *preset; // NULL: the BN-free mlp against one process; a BN preset: against
                        // DataParallel over `world` replicas
    bool sync_every;    // DdpConfig.sync_every_micro_batch
    bool forward_order; // DdpConfig.bucket_order_forward
    bool uneven;        // rank 0 takes half the others' shares more of each global batch
                        // (contiguous shares), weighted by DdpConfig.loss_weight (mlp, A = 1)
} Variant;

static const Variant variants[] = {
    {"overlap_16KiB_buckets", true, 16 << 10, 4 << 10, 1, 0.0f, false, NULL, false, false, false},
    {"overlap_default_buckets", true, DDP_DEFAULT_BUCKET_CAP_BYTES, DDP_DEFAULT_FIRST_BUCKET_BYTES, 1, 0.0f, false, NULL, false, false, false},
    {"overlap_all_in_one", true, 0, 0, 1, 0.0f, false, NULL, false, false, false},
    {"not_overlapped", false, 16 << 10, 4 << 10, 1, 0.0f, false, NULL, false, false, false},
    {"no_sync_accumulate_3", true, 64 << 10, 8 << 10, 3, 0.0f, false, NULL, false, false, false},
    {"clip_and_grad_scaler", true, 16 << 10, 4 << 10, 1, 0.25f, true, NULL, false, false, false},
    {"batchnorm_overlap_8KiB_buckets", true, 8 << 10, 2 << 10, 1, 0.0f, false, "tiny", false, false, false},
    {"batchnorm_not_overlapped", false, 0, 0, 1, 0.0f, false, "tiny", false, false, false},
    {"sync_every_accumulate_3", true, 16 << 10, 4 << 10, 3, 0.0f, false, NULL, true, false, false},
    {"sync_every_not_overlapped", false, 0, 0, 2, 0.0f, false, NULL, true, false, false},
    {"forward_order_16KiB_buckets", true, 16 << 10, 4 << 10, 1, 0.0f, false, NULL, false, true, false},
    {"uneven_shares_weighted", true, 16 << 10, 4 << 10, 1, 0.0f, false, NULL, false, false, true},
};

// Rank r's share of a global batch of `big` and where it starts in it: uneven, rank 0 takes
// big - (world - 1) x local / 2 and every other rank local / 2 (local: the even share).
static void uneven_share(int big, int world, int rank, int local, int *share, int *start)
{
    int rest = local / 2, first = big - (world - 1) * rest;
    *share = rank == 0 ? first : rest;
    *start = rank == 0 ? 0 : first + (rank - 1) * rest;
}

static void make_config(CoreConfig *cfg, const Variant *v)
{
    core_config_preset(cfg, v->preset ? v->preset : "mlp");
    cfg->backend = CORE_BACKEND_CPU;
    cfg->batch_size = GLOBAL_BATCH;
    cfg->seed = 11;
    cfg->optim.warmup_steps = 0;  // a constant LR that moves the weights from step 0
    cfg->optim.decay = CORE_LR_CONSTANT;
    cfg->optim.clip_norm = v->clip_norm;
    if (v->fp16) cfg->precision = CORE_PRECISION_FP16;
}

static void fill_batch(const SynthTask *task, const size_t *indices, int n, float *images, int32_t *labels)
{
    size_t per = (size_t)task->channels * task->image_size * task->image_size;
    for (int i = 0; i < n; i++) synth_batch(task, indices[i], 1, images + i * per, labels + i);
}

static int fail_rank(int rank, const char *what)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, error_message());
    return 1;
}

static double max_abs_diff(const float *a, const float *b, size_t n, size_t *outside)
{
    double worst = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > TOL_ABS + TOL_REL * fabs(b[i])) bad++;
        if (d > worst) worst = d;
    }
    if (outside) *outside = bad;
    return worst;
}

// BN variants, broadcast_buffers. Before the last step, ranks other than 0 overwrite their
// running statistics with CORRUPT; the step's broadcast must replace them with rank 0's,
// so after it every rank's are rank 0's updated with its own last batch (momentum 0.1):
// within 0.1 x CORRUPT / 10 of DataParallel's replica 0 (rank 0's chain), where without
// the broadcast they would stay near 0.9 x CORRUPT. After one more broadcast (what the
// next step does first) they equal replica 0's within the tolerance.
#define CORRUPT 1000.0f

static int corrupt_buffers(Core *core, int rank)
{
    float *mine = NULL;
    void *stream = NULL;
    if (rank == 0) return 0;
    if (core_buffers(core, &mine, &stream) != 0) return fail_rank(rank, "no BatchNorm buffers");
    for (size_t i = 0; i < core_buffer_count(core); i++) mine[i] = CORRUPT;
    return 0;
}

static int check_buffers(Ddp *ddp, Core *core, DataParallel *dp, int rank)
{
    size_t nb = core_buffer_count(core);
    float *mine = NULL, *replica0 = NULL;
    void *stream = NULL;
    if (nb == 0 || core_buffers(core, &mine, &stream) != 0 || core_buffers(dp_core(dp), &replica0, &stream) != 0)
        return fail_rank(rank, "no BatchNorm buffers");
    size_t before_bad = 0, after_bad = 0;
    double before = max_abs_diff(mine, replica0, nb, &before_bad);
    if (ddp_broadcast_buffers(ddp) != 0) return fail_rank(rank, "broadcast_buffers");
    double after = max_abs_diff(mine, replica0, nb, &after_bad);
    printf("rank %d: BN running statistics (%zu floats) vs DataParallel replica 0: max diff %.3g after the "
           "last step (%s), %.3g (%zu outside tolerance) after one more broadcast\n", rank, nb, before,
           rank ? "corrupted before it" : "rank 0's own", after, after_bad);
    if (after_bad != 0 || before > 0.1 * CORRUPT / 10) return 1;
    return 0;
}

// Trains one variant with DDP and with its reference (one process on the global batch, or
// DataParallel over world replicas for BN models); returns 0 when they agree.
static int run_variant(DistComm *comm, const DistEnv *env, const Variant *v, int kill_rank, int kill_step,
                       bool hang)
{
    int rank = env->rank, world = env->world, A = v->accumulation, local = 0;
    bool bn = v->preset != NULL;
    if (dist_local_batch(GLOBAL_BATCH, world, rank, &local) != 0) return fail_rank(rank, "batch");
    CoreConfig cfg;
    make_config(&cfg, v);
    SynthTask task = {cfg.model.in_channels, cfg.model.image_size, cfg.model.num_classes, 0.5f, 3};
    size_t per = (size_t)task.channels * task.image_size * task.image_size;
    DistSampler mine, all;
    if (dist_sampler_init(&mine, DATASET, world, rank, true, false, 5) != 0 ||
        dist_sampler_init(&all, DATASET, world, 0, true, false, 5) != 0)
        return fail_rank(rank, "sampler");
    size_t *my_idx = malloc(mine.per_rank * sizeof *my_idx), *global_idx = malloc(all.per_rank * world * sizeof *global_idx);
    size_t *chunk_idx = malloc((size_t)GLOBAL_BATCH * A * sizeof *chunk_idx);
    int big = GLOBAL_BATCH * A;
    float *images = malloc((size_t)big * per * sizeof *images);
    int32_t *labels = malloc((size_t)big * sizeof *labels);
    CoreBatch *micro = calloc((size_t)A, sizeof *micro);
    Core *core = NULL, *ref = NULL;
    DataParallel *dp = NULL;
    Ddp *ddp = NULL;
    int share = local, start = 0;
    if (v->uneven) uneven_share(big, world, rank, local, &share, &start);
    DdpConfig dc = {.bucket_cap_bytes = v->cap, .first_bucket_bytes = v->first, .overlap = v->overlap,
                    .accumulation_steps = A, .sync_every_micro_batch = v->sync_every,
                    .bucket_order_forward = v->forward_order,
                    .loss_weight = v->uneven ? (float)share * world / big : 0.0f};
    long long allreduces_after_first = 0;
    int rc = 1;
    if (!my_idx || !global_idx || !chunk_idx || !images || !labels || !micro) { fprintf(stderr, "rank %d: out of memory\n", rank); goto out; }
    if (dist_sampler_indices(&mine, 0, my_idx) != 0 || dist_sampler_global(&all, 0, global_idx) != 0 ||
        core_create(&cfg, &core) != 0 || (bn ? dp_create(&cfg, world, &dp) : core_create(&cfg, &ref)) != 0 ||
        ddp_create(core, comm, &dc, &ddp) != 0) {
        fail_rank(rank, v->name);
        goto out;
    }
    if (dp) ref = dp_core(dp);
    int steps = kill_rank >= 0 ? 1 << 20 : STEPS;
    for (int s = 0; s < steps; s++) {
        if (rank == kill_rank && s == kill_step) {
            if (!hang) raise(SIGKILL);
            for (;;) pause();  // a hung peer: only the others' watchdog can end this
        }
        size_t pos = (size_t)s * local * A % (mine.per_rank - (size_t)local * A + 1);
        for (int a = 0; a < A; a++) {
            fill_batch(&task, my_idx + pos + (size_t)a * local, local, images + (size_t)a * local * per, labels + a * local);
            micro[a] = (CoreBatch){.images = images + (size_t)a * local * per, .labels = labels + a * local, .n = local, .memory = CORE_MEMORY_HOST};
        }
        if (v->uneven) {  // this rank's contiguous share of the one process's global batch
            fill_batch(&task, global_idx + pos * world + start, share, images, labels);
            micro[0] = (CoreBatch){.images = images, .labels = labels, .n = share, .memory = CORE_MEMORY_HOST};
        }
        if (bn && s == STEPS - 1 && corrupt_buffers(core, rank) != 0) goto out;
        if (ddp_step(ddp, micro, big, NULL) != 0) { fail_rank(rank, v->name); goto out; }
        if (s == 0) {
            DdpStats first;
            ddp_stats(ddp, &first);
            allreduces_after_first = first.allreduces;
        }
        if (kill_rank >= 0) continue;
        CoreBatch whole = {.images = images, .labels = labels, .n = big, .memory = CORE_MEMORY_HOST};
        if (dp) {
            // DataParallel's chunk r is rank r's batch: shard position pos + i of rank r is
            // position (pos + i) * world + r of the epoch's list
            for (int r = 0; r < world; r++)
                for (int i = 0; i < local; i++) chunk_idx[r * local + i] = global_idx[(pos + (size_t)i) * world + (size_t)r];
            fill_batch(&task, chunk_idx, big, images, labels);
            if (dp_step(dp, &whole, NULL) != 0) { fail_rank(rank, "DataParallel reference"); goto out; }
            continue;
        }
        // the same samples, as one process reads them: positions [pos*world, +big) of the list
        fill_batch(&task, global_idx + pos * world, big, images, labels);
        if (core_step(ref, &whole, NULL) != 0) { fail_rank(rank, "reference"); goto out; }
    }
    size_t np = core_param_count(core);
    float *p = malloc(np * sizeof *p), *q = malloc(np * sizeof *q);
    if (p && q && core_params_get(core, p, np) == 0 && core_params_get(ref, q, np) == 0) {
        double moved = 0.0;
        size_t bad = 0;
        double worst = max_abs_diff(p, q, np, &bad);
        // the reference must have moved, or the comparison proves nothing
        float *init = malloc(np * sizeof *init);
        Core *fresh = NULL;
        if (init && core_create(&cfg, &fresh) == 0 && core_params_get(fresh, init, np) == 0)
            for (size_t i = 0; i < np; i++) moved = fmax(moved, fabs((double)q[i] - init[i]));
        core_free(fresh);
        free(init);
        DdpStats st;
        ddp_stats(ddp, &st);
        // after the first step (one all-reduce of everything, then the buckets are cut):
        // a bucket's all-reduce per synced backward, or one of everything without overlap;
        // one synced backward per step under no_sync, A with sync_every_micro_batch
        long long per_step = (long long)(v->overlap ? st.buckets : 1) * (v->sync_every ? A : 1);
        long long allreduces = st.allreduces - allreduces_after_first;
        printf("rank %d/%d %s: %d buckets (largest %zu B), max |ddp - %s| = %.3g, %zu of %zu outside "
               "tolerance, reference moved by up to %.3g; %lld all-reduces in %d steps (%lld expected)\n",
               rank, world, v->name, st.buckets, st.largest_bucket, dp ? "data_parallel" : "single", worst, bad,
               np, moved, allreduces, STEPS - 1, per_step * (STEPS - 1));
        rc = bad == 0 && moved > 1e-3 && allreduces == per_step * (STEPS - 1) ? 0 : 1;
        if (rc == 0 && dp) rc = check_buffers(ddp, core, dp, rank);
    }
    free(p);
    free(q);
out:
    ddp_free(ddp);
    core_free(core);
    if (dp) dp_free(dp);
    else core_free(ref);
    core_cpu_set_threads(1);  // dp_create set it to 1 as well; the ranks run on one thread
    free(my_idx); free(global_idx); free(chunk_idx); free(images); free(labels); free(micro);
    return rc;
}

static int worker(int argc, char **argv)
{
    int kill_rank = -1, kill_step = 2, timeout_ms = 20000;
    bool hang = false;
    for (int i = 2; i < argc; i++) {
        if (sscanf(argv[i], "--kill-rank=%d", &kill_rank) == 1) continue;
        if (sscanf(argv[i], "--kill-step=%d", &kill_step) == 1) continue;
        if (sscanf(argv[i], "--timeout-ms=%d", &timeout_ms) == 1) continue;
        if (strcmp(argv[i], "--hang") == 0) hang = true;
    }
    core_cpu_set_threads(1);
    DistEnv env;
    DistComm *comm = NULL;
    if (dist_env_detect(&env) != 0 || dist_comm_create(&env, DIST_COMM_MPI, 0, timeout_ms, &comm) != 0) {
        fprintf(stderr, "worker: %s\n", error_message());
        return 1;
    }
    int failures = 0;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        failures += run_variant(comm, &env, &variants[i], kill_rank, kill_step, hang);
        if (kill_rank >= 0) break;
    }
    dist_comm_free(comm);
    return failures ? 1 : 0;
}

// ---- the cmocka side: mpirun --------------------------------------------------------------

static bool mpirun_missing(void)
{
    if (test_run("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("skipped: mpirun not found (install openmpi-bin)\n");
        return true;
    }
    return false;
}

static const char *self_path(void)
{
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n > 0 ? n : 0] = '\0';
    return path;
}

#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"

static void ddp_matches_single_process(int np)
{
    int rc = test_run(MPIRUN " -np %d '%s' --ddp-worker", np, self_path());
    assert_int_equal(rc, 0);
}

static void test_ddp_2_ranks(void **state) { (void)state; if (mpirun_missing()) skip(); ddp_matches_single_process(2); }
static void test_ddp_3_ranks(void **state) { (void)state; if (mpirun_missing()) skip(); ddp_matches_single_process(3); }

// Processes whose command line holds marker (the workers of one test run).
static int count_marked(const char *marker)
{
    DIR *dir = opendir("/proc");
    int count = 0;
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        char path[300], buf[4096];
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++) if (buf[i] == '\0') buf[i] = ' ';
        buf[n] = '\0';
        if (strstr(buf, marker) && !strstr(buf, "mpirun")) count++;
    }
    if (dir) closedir(dir);
    return count;
}

// Runs 3 ranks where rank 1 dies (SIGKILL) or hangs at step 3; the job must end non-zero
// on its own within max_seconds, with no worker left.
static void faulty_rank_stops_the_others(const char *how, double max_seconds)
{
    char marker[64], log[128];
    snprintf(marker, sizeof marker, "--marker=%d", (int)getpid());
    snprintf(log, sizeof log, "/tmp/test_dist_ddp_%d.log", (int)getpid());
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    // the survivors would train for ever; timeout(1) at 60 s would mean a hang
    int rc = test_run("timeout -k 5 60 " MPIRUN " -np 3 '%s' --ddp-worker --kill-rank=1 --kill-step=3 %s %s >%s 2>&1",
                      self_path(), how, marker, log);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    char *out = test_read_file(log, NULL);
    printf("rank 1 %s: mpirun exit status %d after %.1f s\n", *how ? how : "killed", rc, seconds);
    if (out && *how) printf("%s", strstr(out, "watchdog") ? strstr(out, "rank") : out);
    assert_int_not_equal(rc, 0);
    assert_int_not_equal(rc, 124);  // not timeout(1)'s: the job ended on its own
    assert_true(seconds < max_seconds);
    if (*how) assert_non_null(out && strstr(out, "DDP watchdog") ? out : NULL);
    free(out);
    unlink(log);
    for (int i = 0; i < 50 && count_marked(marker) > 0; i++) usleep(100 * 1000);
    assert_int_equal(count_marked(marker), 0);  // no orphans
}

static void test_killed_rank_stops_the_others(void **state)
{
    (void)state;
    if (mpirun_missing()) skip();
    faulty_rank_stops_the_others("", 30.0);
}

static void test_hung_rank_trips_the_watchdog(void **state)
{
    (void)state;
    if (mpirun_missing()) skip();
    faulty_rank_stops_the_others("--hang --timeout-ms=2000", 30.0);
}

// build/train --nproc-per-node 2 (mpirun underneath) ends with the held-out loss and
// accuracy of one process on the same global batches (the BN-free mlp: see above).
static void train_matches_one_process(const char *data_flags)
{
    char out[2][128];
    char flags[512];
    snprintf(flags, sizeof flags, "%s --preset mlp --log-every 5 --backend cpu --warmup 0 --lr-decay constant",
             data_flags);
    for (int ddp = 0; ddp < 2; ddp++) {
        snprintf(out[ddp], sizeof out[ddp], "/tmp/test_dist_train_%d_%d.out", (int)getpid(), ddp);
        int rc = test_run("'%s/train' %s %s >%s 2>&1", test_build_dir(), flags, ddp ? "--nproc-per-node 2" : "", out[ddp]);
        if (rc != 0) { char *text = test_read_file(out[ddp], NULL); printf("%s", text ? text : ""); free(text); }
        assert_int_equal(rc, 0);
    }
    char *single = test_read_file(out[0], NULL), *dist = test_read_file(out[1], NULL);
    assert_non_null(single);
    assert_non_null(dist);
    const char *e1 = strstr(single, "eval: "), *e2 = strstr(dist, "eval: ");
    assert_non_null(e1);
    assert_non_null(e2);
    assert_non_null(strstr(dist, "DDP rank 0 of 2"));
    printf("one process: %.60s\nDDP over 2:  %.60s\n", e1, e2);
    // printed to 4 decimals: equal up to the last digit's rounding of fp32 sums
    float l1, a1, l2, a2;
    assert_int_equal(sscanf(e1, "eval: loss %f accuracy %f", &l1, &a1), 2);
    assert_int_equal(sscanf(e2, "eval: loss %f accuracy %f", &l2, &a2), 2);
    assert_true(fabsf(l1 - l2) <= 2e-4f);
    assert_true(fabsf(a1 - a2) <= 1e-4f);
    // every logged step: DDP logs the global batch's loss (the mean over the ranks), which
    // is the one process's loss on the same global batch, not rank 0's local loss
    int compared = 0;
    for (const char *p = single; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        int step;
        float loss;
        if (sscanf(p, "%d %f", &step, &loss) != 2 || strncmp(p, "train", 5) == 0) continue;
        char want[32];
        snprintf(want, sizeof want, "\n%8d ", step);
        const char *q = strstr(dist, want);
        assert_non_null(q);
        int step2;
        float loss2;
        assert_int_equal(sscanf(q + 1, "%d %f", &step2, &loss2), 2);
        if (fabsf(loss - loss2) > 2e-4f + 1e-4f * fabsf(loss))
            fail_msg("step %d: DDP logged loss %.4f, one process %.4f", step, loss2, loss);
        compared++;
    }
    assert_true(compared > 0);
    free(single);
    free(dist);
    unlink(out[0]);
    unlink(out[1]);
}

static void test_train_nproc_per_node_matches_one_process(void **state)
{
    (void)state;
    if (mpirun_missing()) skip();
    train_matches_one_process("--data tensor --steps 20 --batch-size 24");
}

// The same through the loader: each rank's loader (its own worker) reads its shard of every
// epoch, and together the ranks' batches are the one process's (6 epochs of 20 images).
static void test_train_images_nproc_per_node_matches_one_process(void **state)
{
    (void)state;
    if (mpirun_missing()) skip();
    char cache[64], flags[256];
    snprintf(cache, sizeof cache, "/tmp/test_dist_ddp_cache_%d", (int)getpid());
    setenv("BENCH_CACHE_DIR", cache, 1);
    snprintf(flags, sizeof flags, "--data images --dataset-preset tiny --num-workers 1 --steps 30 --batch-size 8");
    train_matches_one_process(flags);
    unsetenv("BENCH_CACHE_DIR");
    test_run("rm -rf '%s'", cache);
}

// ---- bench_ddp: figures across variants come from one run -------------------------------------

// Runs build/bench_ddp with env and args; returns its tidy CSV (malloc'd) whatever its exit
// status (in *rc), or NULL when it wrote none.
static char *bench_ddp_csv(const char *env, const char *args, int *rc)
{
    char *tmp = test_temp_dir();
    if (!tmp) return NULL;
    *rc = test_run("%s '%s/bench_ddp' %s --harness_csv='%s/ddp.csv' >'%s/out.txt' 2>&1", env, test_build_dir(), args,
                   tmp, tmp);
    char *csv = test_read_in(tmp, "ddp.csv");
    if (!csv || *rc != 0) {
        char *out = test_read_in(tmp, "out.txt");
        printf("bench_ddp %s: exit status %d; output:\n%s\n", args, *rc, out ? out : "");
        free(out);
    }
    test_remove_tree(tmp);
    free(tmp);
    return csv;
}

// Random interleaving runs rows in any order: a DDP row run alone (no DataParallel or
// one-process row before it) still checks its parameters against DataParallel's and has
// its scaling efficiency; the overlapped row alone has hidden_ms, from its own run.
static void test_bench_ddp_cross_variant_figures_need_no_other_row(void **state)
{
    (void)state;
    if (mpirun_missing()) skip();
    int rc = 0;
    char *csv = bench_ddp_csv("", "--backend=cpu --benchmark_filter='ddp_scaling/ddp/.*devices:2' --steps=2", &rc);
    assert_non_null(csv);
    assert_int_equal(rc, 0);
    char v[64];
    const char *params = "preset:tiny;batch:16;devices:2";
    assert_true(test_csv_row_value(csv, "ddp_scaling,ddp", params, "status", v, sizeof v));
    assert_string_equal(v, "ok");
    assert_true(test_csv_row_value(csv, "ddp_scaling,ddp", params, "rel_l2_vs_data_parallel", v, sizeof v));
    assert_true(v[0] != '\0' && atof(v) <= 1e-4);
    assert_true(test_csv_row_value(csv, "ddp_scaling,ddp", params, "scaling_efficiency", v, sizeof v));
    assert_true(v[0] != '\0' && atof(v) > 0);
    free(csv);

    csv = bench_ddp_csv("", "--backend=cpu --benchmark_filter='ddp_overlap/overlapped/.*bucket_mib:25' --preset=tiny "
                            "--overlap_steps=2", &rc);
    assert_non_null(csv);
    assert_int_equal(rc, 0);
    const char *p2 = "preset:tiny;batch:4;bucket_mib:25";
    assert_true(test_csv_row_value(csv, "ddp_overlap,overlapped", p2, "hidden_ms", v, sizeof v));
    assert_true(v[0] != '\0');
    assert_true(test_csv_row_value(csv, "ddp_overlap,overlapped", p2, "not_overlapped_step_ms", v, sizeof v));
    assert_true(atof(v) > 0);
    free(csv);
}

// Without mpirun the CPU DDP rows fail naming the missing tool (setup installs Open MPI);
// only the GPU check (SUITE_GPU_CHECK=1, nothing can be installed there) skips them. The
// test sets SUITE_GPU_CHECK itself both times: the GPU check runs it with SUITE_GPU_CHECK=1.
static void test_bench_ddp_missing_mpirun_is_a_failure(void **state)
{
    (void)state;
    char *tmp = test_temp_dir();
    assert_non_null(tmp);  // an empty folder as PATH: no mpirun (system() finds /bin/sh by its path)
    char env[600];
    snprintf(env, sizeof env, "SUITE_GPU_CHECK=0 PATH='%s'", tmp);
    int rc = 0;
    const char *args = "--backend=cpu --benchmark_filter='ddp_scaling/ddp/.*devices:1' --steps=1";
    char *csv = bench_ddp_csv(env, args, &rc);
    assert_non_null(csv);
    assert_int_equal(rc, 1);
    char v[512];
    const char *params = "preset:tiny;batch:16;devices:1";
    assert_true(test_csv_row_value(csv, "ddp_scaling,ddp", params, "status", v, sizeof v));
    assert_string_equal(v, "error");
    assert_true(test_csv_row_value(csv, "ddp_scaling,ddp", params, "reason", v, sizeof v));
    assert_non_null(strstr(v, "missing tool: mpirun"));
    free(csv);

    snprintf(env, sizeof env, "SUITE_GPU_CHECK=1 PATH='%s'", tmp);
    csv = bench_ddp_csv(env, args, &rc);
    assert_non_null(csv);
    assert_int_equal(rc, 0);
    assert_true(test_csv_row_value(csv, "ddp_scaling,ddp", params, "status", v, sizeof v));
    assert_string_equal(v, "skipped");
    assert_true(test_csv_row_value(csv, "ddp_scaling,ddp", params, "reason", v, sizeof v));
    assert_non_null(strstr(v, "mpirun"));
    free(csv);
    test_remove_tree(tmp);
    free(tmp);
}

// Every all-reduce row is checked element by element (wrong = 0) in place and out of
// place: over Open MPI here, over NCCL with a GPU, where the input is copied on the
// all-reduce's own non-blocking stream (a pageable cudaMemcpy on the legacy stream could
// land after the all-reduce read it: a stale tail, wrong > 0).
static void test_bench_ddp_allreduce_rows_are_right(void **state)
{
    (void)state;
    if (!gpu_device_available(NULL, 0) && mpirun_missing()) skip();
    int rc = 0;
    char *csv = bench_ddp_csv("", "--benchmark_filter=allreduce --allreduce_max_bytes=4194304 --allreduce_iterations=2",
                              &rc);
    assert_non_null(csv);
    assert_int_equal(rc, 0);
    char v[64];
    int rows = 0;
    for (long long bytes = 8; bytes <= 4194304; bytes *= 2) {
        char params[64];
        snprintf(params, sizeof params, "bytes:%lld", bytes);
        for (int inplace = 0; inplace < 2; inplace++) {
            const char *pv = inplace ? "allreduce,in_place" : "allreduce,out_of_place";
            assert_true(test_csv_row_value(csv, pv, params, "status", v, sizeof v));
            if (strcmp(v, "ok") != 0) fail_msg("%s %s: status %s", pv, params, v);
            assert_true(test_csv_row_value(csv, pv, params, "wrong", v, sizeof v));
            assert_string_equal(v, "0");
            rows++;
        }
    }
    assert_int_equal(rows, 2 * 20);
    free(csv);
}

// What an sbatch script's environment holds (no srun: SLURM_PROCID=0 and SLURM_NTASKS=4
// describe the script itself), and a parent torchrun's.
#define SBATCH_ENV "SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_JOB_ID=4242 SLURM_NTASKS_PER_NODE=4 "
#define TORCHRUN_ENV "RANK=0 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=4 GROUP_RANK=0 MASTER_ADDR=10.255.255.1 " \
                     "MASTER_PORT=29999 TORCHELASTIC_RUN_ID=parent "

// `make bench` inside a batch job: bench_ddp's DDP rows all failed, its ranks reading the
// batch script's SLURM variables ("CPU ranks talk over MPI ... not with srun variables
// alone"), and the same under a parent torchrun. It starts its own ranks with only the
// variables it sets: a DDP row and an all-reduce row pass with either in the environment.
static void test_bench_ddp_rows_pass_inside_a_batch_job_and_torchrun(void **state)
{
    (void)state;
    if (mpirun_missing()) skip();
    const char *envs[] = {SBATCH_ENV, TORCHRUN_ENV};
    const char *args = "--backend=cpu --benchmark_filter='ddp_scaling/ddp/.*devices:2|allreduce/in_place' --steps=1 "
                       "--allreduce_max_bytes=8 --allreduce_iterations=1";
    for (int i = 0; i < 2; i++) {
        int rc = 0;
        char *csv = bench_ddp_csv(envs[i], args, &rc);
        assert_non_null(csv);
        if (rc != 0) fail_msg("bench_ddp with %s: exit %d", envs[i], rc);
        char v[512];
        assert_true(test_csv_row_value(csv, "ddp_scaling,ddp", "preset:tiny;batch:16;devices:2", "status", v, sizeof v));
        if (strcmp(v, "ok") != 0) fail_msg("ddp_scaling/ddp with %s: %s", envs[i], v);
        assert_true(test_csv_row_value(csv, "allreduce,in_place", "bytes:8", "status", v, sizeof v));
        if (strcmp(v, "ok") != 0) fail_msg("allreduce/in_place with %s: %s", envs[i], v);
        free(csv);
    }
}

// train in a batch job: --nproc-per-node 2 starts its own two ranks (the script's
// SLURM_NTASKS=4 is not theirs); --ddp alone refuses, naming the variables it saw and the
// fix, instead of "not with srun variables alone" when no srun ran.
static void test_train_inside_a_batch_job(void **state)
{
    (void)state;
    if (mpirun_missing()) skip();
    char out[128];
    snprintf(out, sizeof out, "/tmp/test_dist_train_batch_%d.out", (int)getpid());
    const char *flags = "--backend cpu --data tensor --preset mlp --steps 2 --batch-size 8 --log-every 1";
    int rc = test_run(SBATCH_ENV "'%s/train' %s --nproc-per-node 2 >%s 2>&1", test_build_dir(), flags, out);
    char *text = test_read_file(out, NULL);
    assert_non_null(text);
    if (rc != 0 || !strstr(text, "DDP rank 0 of 2")) fail_msg("train --nproc-per-node 2 in a batch job: exit %d:\n%s", rc, text);
    free(text);
    rc = test_run(SBATCH_ENV "'%s/train' %s --ddp >%s 2>&1", test_build_dir(), flags, out);
    text = test_read_file(out, NULL);
    assert_non_null(text);
    printf("train --ddp in a batch job: exit %d: %s", rc, text);
    assert_true(rc != 0);
    const char *want[] = {"SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0", "SLURM_JOB_ID=4242", "srun -n 4",
                          "mpirun -np 4", "--nproc-per-node 4"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("the refusal lacks '%s':\n%s", want[i], text);
    free(text);
    unlink(out);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--ddp-worker") == 0) return worker(argc, argv);
    test_keep_mpi_leaks_nameable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp_2_ranks),
        cmocka_unit_test(test_ddp_3_ranks),
        cmocka_unit_test(test_killed_rank_stops_the_others),
        cmocka_unit_test(test_hung_rank_trips_the_watchdog),
        cmocka_unit_test(test_train_nproc_per_node_matches_one_process),
        cmocka_unit_test(test_train_images_nproc_per_node_matches_one_process),
        cmocka_unit_test(test_bench_ddp_cross_variant_figures_need_no_other_row),
        cmocka_unit_test(test_bench_ddp_missing_mpirun_is_a_failure),
        cmocka_unit_test(test_bench_ddp_allreduce_rows_are_right),
        cmocka_unit_test(test_bench_ddp_rows_pass_inside_a_batch_job_and_torchrun),
        cmocka_unit_test(test_train_inside_a_batch_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
