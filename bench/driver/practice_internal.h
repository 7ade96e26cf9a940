// practice_internal.h: what the practice driver's files share and nothing outside them
// uses (the API is practice.h). The driver is four files:
//   practice.c          the driver's options, backend/GPU gating, errors to skips or
//                       failures, the config of a run, the benchmark per variant and its
//                       registration
//   practice_sources.c  batches: synthetic (device-resident on the GPU), JPEGs through
//                       the loader, and practice_batch_* for a program's own step loops
//   practice_check.c    the tuned-vs-baseline check: the update comparison, GradScaler's
//                       skipped-step rule, the --practice_selftest breakage it must catch;
//                       and the step of every run (practice_step: one core_step, or K
//                       accumulated micro-batches and one update)
//   practice_run.c      the runs: throughput (warm-up, timed steps, counters) and time to
//                       accuracy
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
typedef struct Synthetic {
    SynthTask task;
    int n, steps, taken;
    bool device;
    float *images[SYNTH_BATCHES];
    int32_t *labels[SYNTH_BATCHES];
    uint64_t next_index;
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

// The source of synthetic batches, over s (set .steps first).
PracticeSource practice_synthetic_source(Synthetic *s);
// The source of JPEGs through the loader, over im (set .steps and .dataset_preset first).
PracticeSource practice_images_source(Images *im);

// ---- the check against the baseline (practice_check.c) -------------------------------------

// The check's figures for one tuned run (practice.h's counters check_*).
typedef struct CheckResult {
    double rel;            // ||tuned update - baseline update|| / ||baseline update||
    double base_moved;     // ||baseline update|| / ||initial parameters||: how far k steps go
    bool identical;        // the parameters agree bit for bit (start and end)
    int skipped, allowed;  // the tuned run's skipped steps; how many its start-up explains
    int steps;             // the steps `skipped` is of
    bool scaled;           // fp16: GradScaler ran (else no skip is explained)
    int skipped_after;     // fp16 after start-up skips: the steps the settled run still skipped
    double settled_scale;  // the loss scale the settled run started at (0: no rerun)
} CheckResult;

// One training step (practice_step in `micro` micro-batches); under SELFTEST_SKIP_ALL an
// overflow (the parameters go back to what `scratch` held when the precision has no
// scaler, counted in *driver_skipped).
int practice_run_step(Core *core, const CoreConfig *cfg, const CoreBatch *b, int micro,
                      Selftest selftest, float *scratch, int *driver_skipped);
// The config a variant's core is created with: cfg, for micro > 1 with the batch size of
// one micro-batch (cfg->batch_size / micro; bad usage unless it divides). 0 or -1.
int practice_core_config(const CoreConfig *cfg, int micro, CoreConfig *core_cfg);
// Compares the tuned config (its steps in tuned_micro micro-batches) with the baseline's
// (base_micro) after k steps from the same seed (with shared != NULL, Practice.shared_params:
// the shared parameters from the baseline's start). 0 or -1.
int practice_check_against_baseline(const CoreConfig *base, int base_micro, const CoreConfig *tuned,
                                    int tuned_micro, int k, Selftest selftest,
                                    size_t (*shared)(const CoreConfig *, size_t *), CheckResult *r);
// The check's verdict as a failure message (tolerance: relative L2, 0: bit-identical);
// false when the tuned run passed.
bool practice_check_failed(double tolerance, const CheckResult *r, int k, char *msg, size_t size);

// ---- the runs (practice_run.c) -------------------------------------------------------------

// One throughput run of variant v on cfg with the batches of src (opened and closed here).
void practice_run_throughput(HarnessState *st, const Practice *p, const PracticeVariant *v,
                             CoreConfig *cfg, const PracticeSource *src);
// One time-to-accuracy run of variant v on cfg (synthetic batches, held-out evaluation).
void practice_run_time_to_accuracy(HarnessState *st, const Practice *p, const PracticeVariant *v,
                                   const CoreConfig *cfg);

#endif
