// practice.h: the practice driver, what every training-core practice needs in one place
// (as nccl-tests' common.cu): GPU gating; errors to skips (out of memory, no device: facts
// about the machine) or failures (everything else); the core created from a preset plus
// the variant's change; batches (synthetic and device-resident, or JPEGs through the
// loader with each variant's workers and pinning, reporting the wait for each batch and
// the cores used); untimed warm-up; timed steps ending in core_sync; the standard
// counters; the check of every tuned variant against its baseline; and a
// time-to-accuracy mode. A practice is then a table of variants.
//
// Every benchmark of a practice sweeps the axes `preset` (a core preset) and `batch`
// (0: the preset's own batch size), which --preset and --harness_axis change.
#ifndef PRACTICE_H
#define PRACTICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/driver/harness.h"
#include "kernels/core.h"
#include "loaders/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

// A variant's change to the preset's config (it may read cfg->batch_size, ...).
typedef void (*PracticeChange)(CoreConfig *cfg);

typedef struct PracticeVariant {
    const char *name;       // e.g. "set_to_none"
    HarnessRole role;       // one baseline per practice; the check compares every other
                            // variant (tuned or reference) with it
    PracticeChange change;  // NULL: the preset as it is
    const void *source_arg; // passed to the practice's source; with images, a PracticeLoader
} PracticeVariant;

// How a variant's images are loaded (its source_arg when the batches are JPEGs through
// the loader; NULL: 2 workers, no pinning).
typedef struct PracticeLoader {
    int num_workers;
    LoaderPinMode pin;
    uint64_t worker_cpus;   // LoaderConfig.worker_cpus: 0 the forking thread's CPUs, else these
} PracticeLoader;

typedef enum {
    PRACTICE_THROUGHPUT,       // timed iterations of `steps` training steps (or a source's epoch)
    PRACTICE_TIME_TO_ACCURACY, // one run: train until the held-out target or the step budget;
                               // repetition k of an instance (variant, preset, batch) trains
                               // from the preset's seed + k (weights, synthetic task, data
                               // order; the same k for every variant), counter `seed`
} PracticeMode;

typedef enum {
    PRACTICE_CHECK_NONE,   // the variants compute different things
    PRACTICE_CHECK_PARAMS, // the update after check_steps steps from the same start (the
                           // parameters then minus at the start) agrees with the baseline's
                           // within `tolerance`, relative L2 of the baseline's update, over all
                           // parameters and over every parameter tensor alone (0: the parameters
                           // bit for bit); the baseline's update is at least
                           // PRACTICE_CHECK_MIN_MOVED of its parameters; and the tuned run skips
                           // no step but what GradScaler explains (fp16: its start-up, before
                           // the first update, at most log2(init_scale) skips, after which it
                           // is compared from the settled scale; then one overflow per growth,
                           // a step the baseline then leaves out). Both runs are the timed
                           // configuration: cores made as the timed run's (the practice's
                           // core_created hook included), steps taken as its steps, on the
                           // run's first check_steps batches from its own source: the tuned
                           // run reads them as the timed run does (device-resident on the
                           // GPU), the baseline their host copies (the core's own upload)
} PracticeCheck;

// Below this (the baseline's update relative to its parameters after the check's steps) a
// baseline does not move far enough to vouch for anything: fp32 rounds each parameter at
// 6e-8 of itself, so an update under 1e-6 of the parameters is rounding, and a tuned run that
// agrees with it proves nothing. The presets' 3-step updates measured 4.1e-4 (mlp, batch
// 256) to 1.7e-3 (small, batch 8) on the CPU: 400x above.
#define PRACTICE_CHECK_MIN_MOVED 1e-6

// A practice's own batches (e.g. the loader with N workers). Called in this order for
// every run: open, next (warm-up), start, next..., report, close.
// A throughput repetition on a CPU backend with the driver's synthetic batches runs at least
// this long (or one step, when a step is longer) whatever the practice's min_time: there a
// row's core is made, checked and warmed up once per row group (harness_keep), so short
// repetitions cost their steps alone, and the harness pairs the k-th repetitions of
// baseline and tuned within rounds: many short pairs cancel the machine's drift where a few
// long ones cannot (docs/statistics.md, "What a repetition is", measured: checkpoint on
// tiny, 58 s, +-0.8-1.3% from 100 pairs of 0.1 s against +-3.7-8% from 20 of 0.5 s).
#define PRACTICE_CPU_MIN_TIME 0.1

typedef struct PracticeSource {
    // Sets up a run of cfg for the variant's source_arg before the core exists (the loader
    // forks its workers here); it may change cfg (the class count of a dataset). 0 or -1
    // with the error set.
    int (*open)(void *ctx, CoreConfig *cfg, const void *arg);
    // The next batch: 1; 0 at the end of an epoch (a timed iteration ends there); -1.
    int (*next)(void *ctx, CoreBatch *batch);
    // The timed part begins (after the warm-up).
    void (*start)(void *ctx);
    // Adds the source's counters (e.g. the wait per step) over the timed part.
    void (*report)(void *ctx, HarnessState *st, double seconds, int64_t steps);
    void (*close)(void *ctx);
    void *ctx;
    // next's batches stay valid and unchanged until close (the check then reads them where
    // they are; else it copies each into memory of the same kind, host or device).
    bool stable;
} PracticeSource;

// What a run did, for PracticeHooks.finish.
typedef struct PracticeOutcome {
    int64_t steps;          // steps timed (throughput) or taken (time to accuracy)
    double seconds;         // their time (time to accuracy: training steps only)
    bool reached, diverged; // time to accuracy only
    double final_accuracy, best_accuracy; // time to accuracy only: held-out
    CoreStats stats;        // the run's core's counters at its end (activations, peak, graphs, ...):
                            // over the core's life, which may span several runs (first)
    bool first;             // throughput: the core's first run (a later run of a kept core
                            // repeats the same steps: a check in finish need run once)
} PracticeOutcome;

// A practice's own per-run code around the core (all optional; ctx is passed back).
typedef struct PracticeHooks {
    // After a core of a run is created: the timed one and the check's (each of the two
    // variants' check cores gets it with its own config and variant: v is the variant whose
    // core it is, the baseline for the check's baseline core), e.g. to install gradient
    // hooks. 0 or -1 with the error set (the run fails or skips).
    int (*core_created)(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                        const PracticeVariant *v);
    // Time to accuracy: after every step, outside the timed part (e.g. a curve point);
    // `images` and `seconds` are the totals so far. 0 or -1 with the error set.
    int (*after_step)(void *ctx, HarnessState *st, Core *core, int step, int64_t images,
                      double seconds, const CoreStepResult *r);
    // After the driver's counters of a successful run: may add counters, or fail the run.
    void (*finish)(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                   const PracticeVariant *v, const PracticeOutcome *o);
    void *ctx;
} PracticeHooks;

typedef struct Practice {
    const char *name;                 // e.g. "zero_grad"
    const PracticeVariant *variants;
    int variant_count;
    const char *presets;              // default preset axis, e.g. "tiny,mlp,small"
    const char *batches;              // default batch axis, e.g. "0" or "2:512:*2"
    PracticeMode mode;
    bool gpu_only;                    // meaningless on a CPU: skipped without a GPU
    int warmup_steps;                 // untimed steps before the clock (0: 3)
    int steps;                        // training steps per timed iteration (0: 10; one on a
                                      // CPU backend with synthetic batches: PRACTICE_CPU_MIN_TIME)
    double min_time;                  // default seconds per repetition (0: the library's);
                                      // see PRACTICE_CPU_MIN_TIME
    PracticeCheck check;
    double tolerance;                 // relative L2 of the update vs the baseline's, over all
                                      // parameters and per tensor, or 0 (bit-identical)
    int check_steps;                  // 0: 3
    float target_accuracy;            // time to accuracy: held-out accuracy to reach
    int max_steps;                    // time to accuracy: the step budget
    int eval_every;                   // time to accuracy: steps between evaluations
    bool images;                      // always JPEGs through the loader (else only with --data=images)
    const char *dataset_preset;       // images: generated preset (NULL: by the image size)
    const PracticeSource *source;     // a practice's own batches (NULL: synthetic or images)
    const char *label;                // extra label text
    const PracticeHooks *hooks;       // NULL: none
    // PRACTICE_CHECK_PARAMS between variants with different parameter sets (e.g. a bias more
    // per convolution; NULL: the same set, compared whole): the parameters of cfg's model
    // that the baseline's also has, as indices into cfg's flat parameter order, in an order
    // common to every variant; returns their count and writes them to index unless it is
    // NULL. The check then starts the tuned run from the baseline's initial values of these
    // (the rest keeps its own initialisation) and compares the updates of these alone.
    size_t (*shared_params)(const CoreConfig *cfg, size_t *index);
    // Gradient accumulation, one entry per variant (NULL: none accumulates). An entry K > 1
    // makes every optimizer step of that variant (timed runs, the check, time to accuracy)
    // practice_step's K micro-batches of the batch the baseline gets, and creates its core
    // for the micro-batch (batch_size / K: the batch must divide by K, else bad usage), so
    // that its plan and peak memory are the micro-batch's. 0 or 1: one core_step per batch.
    // The check compares such a variant with the exact reference of accumulation: the
    // baseline's core (one step on the whole batch) applying, each step, the sum of the K
    // micro-batches' own gradients (core_loss_grad, each weighted part / batch), so that
    // BatchNorm normalises each micro-batch by itself there too, as accumulation does.
    const int *micro_batches;
} Practice;

// Registers one benchmark per variant of p (they must outlive harness_run).
// Counters of every throughput run: images_per_second, step_ms, wrong; with fp16 (or any
// skipped step) skipped_steps and skipped_steps_explained, over warm-up and timed steps (a
// run that skips more fails; fp16's warm-up lasts until `warmup_steps` steps in a row have
// had no skip but a grown scale's one overflow, so GradScaler's start-up is never timed, and
// after it a step may skip only after a growth of the scale); of a checked run (tuned or reference): check_rel_diff (its update
// against the baseline's, relative L2 of the baseline's update), check_worst_tensor_rel_diff
// (the same for the parameter tensor where it is largest, relative to that tensor's own
// baseline update), check_baseline_moved (the baseline's update relative to its parameters)
// and check_skipped_steps. A run whose check fails is not timed.
// --practice_selftest=MODE (Selftest) breaks the checked variants in a way the check of
// every practice must catch (clip_before_unscale: every one with fp16 and clipping).
void practice_register(const Practice *p);

// One optimizer step on batch b in `micro_batches` micro-batches (<= 1: core_step): b split
// into K contiguous parts (sizes differing by at most one), each
// core_forward_backward_weighted with loss weight part / b->n (1/K: PyTorch's loss / K)
// accumulating, then core_apply_update at the LR of b->n images, so that the update is one
// step's on the whole batch up to rounding for a model without BatchNorm (BN normalises
// each micro-batch by itself). in_channels: the model's (a sample is in_channels x the
// core's image size squared floats). result may be NULL. K > b->n: bad usage.
int practice_step(Core *core, int in_channels, const CoreBatch *b, int micro_batches,
                  CoreStepResult *result);

// ||(tuned_after - before) - (base_after - before)|| / ||base_after - before||: how far a
// tuned run's update is from the baseline's, both from `before` (INFINITY when the
// baseline did not move and the tuned run did; 0 when neither did).
double practice_update_rel_diff(const float *before, const float *base_after, const float *tuned_after,
                                size_t count);

// GradScaler's start-up: the skipped steps before its first update that halving the scale
// from init_scale down to 1 explains (one per halving; 0 without fp16).
int practice_startup_skips_max(const CoreConfig *cfg);

// After the start-up: the skipped steps that `clean_steps` updating steps of cfg explain (fp16:
// one per growth, every growth_interval of them, since a grown scale may overflow once; 0
// without fp16).
int64_t practice_growth_skips_max(const CoreConfig *cfg, int64_t clean_steps);

// Trains variant v of p on cfg (the variant's config of the run's axes) to p's target as a
// PRACTICE_TIME_TO_ACCURACY run does, but untimed and without the practice's hooks, curves
// or counters: the outcome a comparison needs whatever order the runs came in (o: steps,
// training seconds, reached, diverged, final and best accuracy, the core's stats). 0 or -1.
int practice_train_to_target(const Practice *p, const PracticeVariant *v, const CoreConfig *cfg,
                             PracticeOutcome *o);

// Every program linked with the driver takes two loader options (declared when it starts,
// as harness options must be before harness_init, so they are in every --help):
//   --loader-timeout=SECONDS  a batch taking longer is an error naming the stuck worker's
//                             pid (default LOADER_PROGRAM_TIMEOUT_S; 0: no limit)
//   --max-image-pixels=N      the largest JPEG (width x height) decoded; larger files are
//                             bad input (0: PIL's default, JPEG_DEFAULT_MAX_PIXELS)
// The driver's own loaders use them; a program that creates a loader itself applies them
// to its config with this (after harness_init).
void practice_loader_options(LoaderConfig *cfg);

// The backend a run uses: --backend, else CUDA when a GPU is usable, else the fast CPU.
// Returns false (with the run skipped, naming why) when it cannot run here.
bool practice_backend(HarnessState *st, bool gpu_only, CoreBackend *out);
// True when runs will take the CUDA backend (after harness_init): --backend=cuda, or auto
// with a usable GPU. For defaults that differ between a GPU and a CPU (which presets fit).
bool practice_on_gpu(void);
// Ends a run on this thread's error: a skip for out of memory or no device, else a
// failure (a missing tool such as mpirun skips only under SUITE_GPU_CHECK=1, where nothing
// can be installed; SUITE_EXPECT_GPU=1 makes no device a failure); `what` says what was
// being done.
void practice_fail_or_skip(HarnessState *st, const char *what);
// True (after skipping the run with the reason) when no CUDA device can be used.
bool practice_skip_without_gpu(HarnessState *st);

// The config of this run's axes, as the driver makes it for a practice's variants, for a
// program's own benchmarks that sweep the same `preset` and `batch` axes: the core preset
// named by `preset`, its batch size replaced by `batch` unless that is 0 (the preset's;
// 0..2^20, else bad usage), on backend b, with `change` applied (NULL: none), validated.
// 0 or -1 with the error set: end the run with practice_fail_or_skip.
int practice_config(HarnessState *st, CoreBackend b, PracticeChange change, CoreConfig *cfg);
// The two together, as every run starts: the run's backend (practice_backend) and the config
// of its axes on it (practice_config). False when the run has ended: skipped without the
// device it needs, or failed (skipped for a machine limit) on the config, naming it.
bool practice_run_config(HarnessState *st, bool gpu_only, PracticeChange change, CoreConfig *cfg);

// For a program's own step loops over changing image sizes (dynamic shapes): one synthetic
// batch of cfg->batch_size images at max_size x max_size, on the device for the CUDA
// backend (ready before the function returns), else in host memory. A batch of a smaller
// size or fewer images reads its prefix (the values stay finite; the same for every variant).
typedef struct PracticeBatch { float *images; int32_t *labels; int n; bool device; } PracticeBatch;
int practice_batch_make(PracticeBatch *b, const CoreConfig *cfg, int max_size);
void practice_batch_free(PracticeBatch *b);
// Its first n images as a CoreBatch.
CoreBatch practice_batch_view(const PracticeBatch *b, int n);

// Synthetic batch `index` of n images of cfg's task (the driver's noise and cfg's seed) in
// host memory, with its labels, as b->b: a check's or a program's own batch (a held-out one
// at an index no timed or training batch uses). 0, or -1 (out of host memory).
typedef struct PracticeHostBatch { float *images; int32_t *labels; CoreBatch b; } PracticeHostBatch;
int practice_host_batch(PracticeHostBatch *b, const CoreConfig *cfg, int n, uint64_t index);
void practice_host_batch_free(PracticeHostBatch *b);

// The driver's self-test (--practice_selftest): a broken tuned variant swapped in, which
// the check of every practice must catch.
typedef enum {
    SELFTEST_NONE,
    SELFTEST_FROZEN,   // the tuned variant's update over the check's steps is dropped
    SELFTEST_SKIP_ALL, // every step of a tuned variant is treated as an overflow
    SELFTEST_HALF_LR,  // the tuned variant trains at half its learning rate
    SELFTEST_DROP_STEP, // the update of one of the check's steps (the middle one) is not applied
    SELFTEST_CLIP_BEFORE_UNSCALE, // fp16 with clipping: the tuned variant clips its gradients
                                  // while they still carry the loss scale (clip_grad_norm_
                                  // before GradScaler.unscale_); other configs are unaffected
    SELFTEST_FOLD_IGNORE_AFFINE,  // bench_bn_fold: the fold ignores BN's gamma and beta; the
                                  // training practices refuse it (bad usage)
} Selftest;

// How far the logits `got` (n x classes) are from `want`: ||got - want|| / ||want|| into
// *rel (NaN anywhere: INFINITY) and the rows whose arg-max agrees into *agree: the check of
// an inference practice (bench_inference's variants, bench_bn_fold's fold).
void practice_compare_logits(const float *want, const float *got, int n, int classes, double *rel,
                             int *agree);

// Whether the core of a run (cs: its counters) ran what cfg asks for (core_config_in_effect:
// layout, activation type, TF32, tuned convolutions): counter in_effect 1; else 0 and the row
// fails naming the difference. Every run of the driver asks it; a program with a loop of
// its own asks it too.
bool practice_in_effect(HarnessState *st, const CoreConfig *cfg, const CoreStats *cs);

// The self-test asked for (practice.c, beside the option), for a program that breaks its
// tuned variant in more than one way; -1 (bad usage, naming the flag) for an unknown value.
int practice_selftest_mode(Selftest *out);
// The same for the driver's training runs: a mode that breaks another kind of practice
// (fold_ignore_affine) is bad usage there.
int practice_training_selftest_mode(Selftest *out);

// For a program's own checks (beyond PRACTICE_CHECK_PARAMS): whether --practice_selftest
// asks for a broken tuned variant (any mode but none), which the program must then make
// (e.g. dropping the tuned result it checks) so that its check fails. 0, or -1 (bad usage,
// naming the flag) for an unknown value.
int practice_selftest_broken(bool *broken);

// The timed loop of an inference practice: `warmup` untimed forwards of batch b
// (core_infer in mode `grad`), then timed ones until the harness has enough, each on the
// wall clock up to its core_sync. The count and the seconds timed go to *forwards and
// *seconds. 0, or -1 (error set; nothing is timed after it).
int practice_time_forwards(HarnessState *st, Core *core, const CoreBatch *b, CoreGradMode grad,
                           int warmup, int64_t *forwards, double *seconds);

// A one-off cost (capture, autotuning) against a saving per step: adds the counters
// saving_ms_per_step, pays_off and, when it pays off, break_even_steps (cost / saving, 0
// when it costs nothing). Returns the steps to break even, or -1 when it never pays back.
double practice_break_even(HarnessState *st, double cost_ms, double saving_ms);

#ifdef __cplusplus
}
#endif
#endif
