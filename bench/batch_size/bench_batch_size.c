// bench_batch_size.c: the batch-size practice and the learning-rate rules that make a
// larger batch work.
// Throughput (batch_size/sweep, role reference): training steps of each preset at batch
//   sizes in powers of two, from 8 (2 on the CPU) until the device runs out of memory
//   (that point is a "skipped: out of memory" row), with images/s, step time and peak
//   memory, charted against the batch size.
// Convergence (batch_size_convergence/*): time to a held-out accuracy on the synthetic
//   task of kernels/synth.h, for the preset's batch B (baseline, its base LR) against 8B
//   (a) with the same LR, (b) with the linear scaling rule (LR x 8), (c) linear scaling +
//   warmup, (d) (c) + cosine decay over the step budget. Wall time counts training steps
//   only (not the evaluations); a variant that diverges or misses the target within the
//   budget says so (reached_target = 0: a result, counted and censored by the summary).
//   Curves of held-out accuracy against steps, images and seconds go to the .curves.csv
//   beside the CSV. Each repetition trains from its own seed (the driver's rule for every
//   time-to-accuracy run: repetition k of every variant uses seed + k), so the repetitions
//   sample the spread of the time to the target over initialisations and data, not one run
//   timed again.
// Accuracy parity (batch_size_parity/*): Goyal et al.'s claim is about accuracy, not
//   time: with the linear scaling rule and warm-up a large batch reaches the small batch's
//   accuracy in the same number of epochs. Every variant trains on the same number of
//   samples (the small batch PARITY_STEPS steps, the large ones PARITY_STEPS / LARGE) with
//   no early stop, and reports its final held-out accuracy (final_accuracy) and
//   accuracy_parity = 1, which tells the summary to compare accuracies, not times. Each
//   repetition starts from its own seed (the driver's rule, the same for every variant:
//   repetition k of each uses seed + k), so the repetitions sample the spread over
//   initialisations and data.
#include <stdbool.h>
#include <string.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"

#define LARGE 8           // the large batch is LARGE times the small one
#define TARGET 0.95f      // held-out accuracy to reach
#define MAX_STEPS 600     // the step budget of every variant
#define EVAL_EVERY 10
#define WARMUP_STEPS 50   // the warmup of variants (c) and (d)
#define PARITY_STEPS 480  // the small batch's steps at equal epochs (the large: / LARGE)
#define PARITY_WARMUP 10  // the large batch's warm-up there: a sixth of its 60 steps
#define PARITY_NO_TARGET 2.0f // above any accuracy: the driver never stops a parity run early

static void sweep(CoreConfig *c) { (void)c; }

static const PracticeVariant sweep_variants[] = {{"sweep", HARNESS_REFERENCE, sweep, NULL}};

// Every convergence variant: a constant LR, no warmup, unless it says otherwise; the
// base LR is the preset's, tuned for its own batch size (reference_batch).
static void small_batch(CoreConfig *c)
{
    c->optim.decay = CORE_LR_CONSTANT;
    c->optim.warmup_steps = 0;
    c->optim.linear_scaling = false;
    c->optim.reference_batch = c->batch_size;
}

static void large_same_lr(CoreConfig *c)
{
    small_batch(c);
    c->batch_size *= LARGE;
}

static void large_linear(CoreConfig *c)
{
    small_batch(c);  // reference_batch: the small batch
    c->batch_size *= LARGE;
    c->optim.linear_scaling = true;
}

static void large_linear_warmup(CoreConfig *c)
{
    large_linear(c);
    c->optim.warmup_steps = WARMUP_STEPS;
}

static void large_linear_warmup_cosine(CoreConfig *c)
{
    large_linear_warmup(c);
    c->optim.decay = CORE_LR_COSINE;
    c->optim.total_steps = MAX_STEPS;
    c->optim.min_lr = 0.0f;
}

static const PracticeVariant convergence_variants[] = {
    {"small_batch", HARNESS_BASELINE, small_batch, NULL},
    {"large_same_lr", HARNESS_TUNED, large_same_lr, NULL},
    {"large_linear_lr", HARNESS_TUNED, large_linear, NULL},
    {"large_linear_lr_warmup", HARNESS_TUNED, large_linear_warmup, NULL},
    {"large_linear_lr_warmup_cosine", HARNESS_TUNED, large_linear_warmup_cosine, NULL},
};

// ---- accuracy parity at equal epochs ----

static void parity_linear_warmup(CoreConfig *c)
{
    large_linear(c);
    c->optim.warmup_steps = PARITY_WARMUP;
}

// Marks the row as an accuracy comparison at a fixed budget (no time to a target).
static void parity_finish(void *ctx, HarnessState *st, Core *core, const CoreConfig *cfg,
                          const PracticeVariant *v, const PracticeOutcome *o)
{
    (void)ctx, (void)core, (void)cfg, (void)v, (void)o;
    harness_counter(st, "accuracy_parity", 1, HARNESS_COUNTER_PLAIN);
}

static const PracticeHooks parity_hooks = {.finish = parity_finish};

static const PracticeVariant parity_small_variants[] = {
    {"small_batch", HARNESS_BASELINE, small_batch, NULL},
};
static const PracticeVariant parity_large_variants[] = {
    {"large_same_lr", HARNESS_TUNED, large_same_lr, NULL},
    {"large_linear_lr", HARNESS_TUNED, large_linear, NULL},
    {"large_linear_lr_warmup", HARNESS_TUNED, parity_linear_warmup, NULL},
};

// Two registrations under one practice name: the step budget is the practice's, and
// equal epochs need LARGE times fewer steps for the large batch.
static void register_parity(const char *presets)
{
    static Practice small = {
        .name = "batch_size_parity", .variants = parity_small_variants, .variant_count = 1,
        .batches = "0", .mode = PRACTICE_TIME_TO_ACCURACY, .target_accuracy = PARITY_NO_TARGET,
        .max_steps = PARITY_STEPS, .eval_every = PARITY_STEPS, .hooks = &parity_hooks,
        .label = "equal epochs: final held-out accuracy"};
    static Practice large = {
        .name = "batch_size_parity", .variants = parity_large_variants, .variant_count = 3,
        .batches = "0", .mode = PRACTICE_TIME_TO_ACCURACY, .target_accuracy = PARITY_NO_TARGET,
        .max_steps = PARITY_STEPS / LARGE, .eval_every = PARITY_STEPS / LARGE, .hooks = &parity_hooks,
        .label = "equal epochs: final held-out accuracy"};
    small.presets = presets;
    large.presets = presets;
    practice_register(&small);
    practice_register(&large);
}

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool cpu = !practice_on_gpu();
    // On a GPU the sweep goes on until the device runs out of memory; on a CPU it stops
    // at 128, where a step of the small preset takes most of a second.
    static Practice throughput = {
        .name = "batch_size", .variants = sweep_variants, .variant_count = 1,
        .mode = PRACTICE_THROUGHPUT, .steps = 5, .min_time = 0.2,
        .label = "images/s against batch size"};
    throughput.presets = cpu ? "tiny,mlp,small" : "tiny,mlp,small,medium,resnet18";
    throughput.batches = cpu ? "2:128:*2" : "8:65536:*2";
    practice_register(&throughput);
    static Practice convergence = {
        .name = "batch_size_convergence", .variants = convergence_variants, .variant_count = 5,
        .batches = "0", .mode = PRACTICE_TIME_TO_ACCURACY, .target_accuracy = TARGET,
        .max_steps = MAX_STEPS, .eval_every = EVAL_EVERY};
    convergence.presets = cpu ? "tiny" : "tiny,small";
    practice_register(&convergence);
    register_parity(cpu ? "tiny" : "tiny,small");
    return harness_run();
}
