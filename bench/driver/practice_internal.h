// practice_internal.h: what the practice driver's files share and nothing outside them
// uses (the API is practice.h). The driver is six files:
//   practice.c          the driver's options (the self-test's modes), backend/GPU gating,
//                       errors to skips or failures, the config of a run, the benchmark per
//                       variant and its registration
//   practice_sources.c  batches: synthetic (device-resident on the GPU), JPEGs through
//                       the loader, the check's batches taken from a run's source, and
//                       practice_batch_* for a program's own step loops
//   practice_step.c     the cores and steps every run and the check share: a variant's core
//                       (its micro-batch, the practice's hook, the clip_before_unscale
//                       self-test), practice_step (one core_step, or K accumulated
//                       micro-batches and one update), the exact reference of accumulation,
//                       and the self-test's broken steps
//   practice_check.c    the tuned-vs-baseline check: both runs on the run's batches,
//                       GradScaler's skipped-step rule (start-up, growth)
//   practice_compare.c  the update comparison (all parameters and per tensor), the floor
//                       of the baseline's movement, and the verdict as a message
//   practice_run.c      the runs: throughput (the check, warm-up, timed steps, counters)
//                       and time to accuracy
#ifndef PRACTICE_INTERNAL_H
#define PRACTICE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/driver/image_data.h"
#include "bench/driver/practice.h"
#include "kernels/synth.h"

// Synthetic batches: 2 distinct ones, each made of a pool of at most 256 generated samples.
enum { SYNTH_BATCHES = 2, SYNTH_POOL = 256, EVAL_BATCHES = 4, EVAL_BATCH = 128 };
#define HELD_OUT_INDEX 1000000000ull  // synthetic batches from here on are never trained on
#define SYNTH_NOISE 0.5f

// ---- batches (practice_sources.c) ----------------------------------------------------------

// The synthetic plane-wave task (kernels/synth.h), a few batches generated once and, on
// the GPU, kept on the device, so that the steps time the training and nothing else.
// A GPT preset's batches are token sequences of the Markov task of kernels/synth.h instead
// (host memory: the CUDA backend runs no gpt model yet).
typedef struct Synthetic {
    SynthTask task;
    int n, steps, taken;
    bool device;
    float *images[SYNTH_BATCHES];
    int32_t *labels[SYNTH_BATCHES];  // GPT: n x seq_len, the next token of each position
    int32_t *tokens[SYNTH_BATCHES];  // GPT only: n x seq_len
    uint64_t served;        // batches handed out since open: they alternate across epochs
} Synthetic;

// JPEGs through the loader (--data=images, or a practice that always trains on them): the
// generated dataset (or --data_dir), with the variant's workers and pinning. Reports the
// time the loop waited for each batch, the time spent pinning, and the CPU cores used.
typedef struct Images {
    ImageData data;
    const char *dataset_preset;
    int steps, taken, workers;
    LoaderStats s0;
    double cpu0;
} Images;

// Whether p's runs train on the driver's synthetic batches (not its own source, not JPEGs:
// neither Practice.images nor --data=images).
bool practice_uses_synthetic(const Practice *p);
// The source of synthetic batches, over s (set .steps first).
PracticeSource practice_synthetic_source(Synthetic *s);
// The source of JPEGs through the loader, over im (set .steps and .dataset_preset first).
PracticeSource practice_images_source(Images *im);

// The check's batches (practice_sources.c): the run's first k batches from its source, as
// the run gets them (read where they are when the source is stable, else copied into memory
// of their kind), and in host memory (the same when they are there; else copied back), which
// the baseline reads: the core's own upload, a path independent of the run's.
enum { CHECK_MAX_STEPS = 8 };
typedef struct CheckBatches {
    CoreBatch b[CHECK_MAX_STEPS];    // as the timed run gets them
    CoreBatch host[CHECK_MAX_STEPS]; // the same in host memory
    int k;
    bool owned[CHECK_MAX_STEPS], host_owned[CHECK_MAX_STEPS]; // copied here (freed here)
} CheckBatches;

// Takes k (1..CHECK_MAX_STEPS) batches from a source opened for cfg (an epoch's end: the
// next one). 0 or -1.
int practice_check_batches_take(const PracticeSource *src, const CoreConfig *cfg, int k, CheckBatches *out);
void practice_check_batches_free(CheckBatches *cb);

// ---- cores and steps (practice_step.c) -----------------------------------------------------

// The core of a run of variant v (its config cfg) in `micro` micro-batches, as every run makes it: created
// for the micro-batch (practice_core_config), then the practice's core_created hook, then,
// under SELFTEST_CLIP_BEFORE_UNSCALE for an fp16 config with clipping, the hook that clips
// the still-scaled gradients. 0 or -1 (the core freed).
int practice_make_core(HarnessState *st, const Practice *p, const PracticeVariant *v, const CoreConfig *cfg,
                       int micro, Selftest selftest, Core **out);
// The config a variant's core is created with: cfg, for micro > 1 with the batch size of
// one micro-batch (cfg->batch_size / micro; bad usage unless it divides). 0 or -1.
int practice_core_config(const CoreConfig *cfg, int micro, CoreConfig *core_cfg);
// The self-test's change to a tuned variant's config (SELFTEST_HALF_LR: half the LR).
void practice_selftest_config(Selftest selftest, CoreConfig *cfg);
// One training step (practice_step in `micro` micro-batches); under SELFTEST_SKIP_ALL an
// overflow (the parameters go back to what `scratch` held when the precision has no
// scaler, counted in *driver_skipped).
int practice_run_step(Core *core, const CoreConfig *cfg, const CoreBatch *b, int micro,
                      Selftest selftest, float *scratch, int *driver_skipped);
// One step of the exact reference of `micro` accumulated micro-batches on a core of the whole
// batch (Practice.micro_batches): the micro-batches' own gradients (core_loss_grad), weighted
// part / b->n and summed in double, replace the gradient of one core_step on b (through a
// before_update hook, times the loss scale with fp16). sum and part: core_param_count
// elements of scratch each. 0 or -1.
int practice_reference_step(Core *core, int in_channels, const CoreBatch *b, int micro, double *sum,
                            float *part);

// ---- the check against the baseline (practice_check.c, practice_compare.c) -------------------

// The check's figures for one tuned run (practice.h's counters check_*).
typedef struct CheckResult {
    double rel;            // ||tuned update - baseline update|| / ||baseline update||
    double worst_rel;      // the same for the tensor where it is largest (its own update)
    char worst_tensor[64]; // that tensor, e.g. "op 4 bn beta"
    double base_moved;     // ||baseline update|| / ||initial parameters||: how far k steps go
    bool identical;        // the parameters agree bit for bit (start and end)
    int skipped, allowed;  // the tuned run's start-up skips; how many its start-up explains
    int steps;             // the steps `skipped` is of
    bool scaled;           // fp16: GradScaler ran (else no skip is explained)
    int skipped_after;     // after the start-up: the steps the (settled) run skipped
    int skipped_unexplained; // of those, the ones no growth before them explains
    int first_unexplained; // the first such step (1-based; 0: none)
    double settled_scale;  // the loss scale the settled run started at (0: no rerun)
} CheckResult;

// One run of the check: the parameters at the start and after the steps (with shared
// parameters: those alone, in their common order).
typedef struct CheckRun {
    float *before, *after;
    size_t count;
    int skipped;
} CheckRun;

// What the check compares for a practice: its configs and micro-batches, the shared
// parameters (Practice.shared_params) and the steps.
typedef struct CheckPlan {
    HarnessState *st;
    const Practice *p;
    const PracticeVariant *base_variant, *tuned_variant;
    const CoreConfig *base, *tuned;
    int base_micro, tuned_micro, k;
    Selftest selftest;
} CheckPlan;

// Runs the check of plan on the batches cb (cb->k steps). 0 or -1.
int practice_check_against_baseline(const CheckPlan *plan, const CheckBatches *cb, CheckResult *r);
// Fills r's update figures (rel, worst_rel and its tensor, base_moved, identical) from the
// two runs; tuned is the config whose model names the tensors (with p->shared_params: its
// shared parameters, in their order). 0 or -1.
int practice_compare_updates(const Practice *p, const CoreConfig *tuned, const CheckRun *base,
                             const CheckRun *t, CheckResult *r);
// The check's verdict as a failure message (tolerance: relative L2, 0: bit-identical);
// false when the tuned run passed.
bool practice_check_failed(double tolerance, const CheckResult *r, int k, char *msg, size_t size);

// ---- the runs (practice_run.c) -------------------------------------------------------------

// One throughput run of variant v on cfg: the practice's source, JPEGs (--data=images or a
// practice on images) or synthetic batches; checked, made and warmed up at the instance's
// first run, and on a CPU backend with synthetic batches kept for its next (harness_keep).
void practice_run_throughput(HarnessState *st, const Practice *p, const PracticeVariant *v,
                             const CoreConfig *cfg);
// One time-to-accuracy run of variant v on cfg (synthetic batches, held-out evaluation).
void practice_run_time_to_accuracy(HarnessState *st, const Practice *p, const PracticeVariant *v,
                                   const CoreConfig *cfg);

#endif
