// bench_bn_fold.c: the bn_fold inference practice: folding each BatchNorm into the
// convolution before it (torch.fx's fuse / torch.ao.quantization.fuse_modules, what
// inference compilers do): w' = w * gamma / sqrt(var + eps), b' = (b - mean) * gamma /
// sqrt(var + eps) + beta, so that the eval-mode network runs one conv (with a bias) where
// it ran a conv and a BN pass over its output.
// Macro (bn_fold/*): the inference forward of a batch (core_infer under no_grad: BN with
//   its running statistics, the inference memory plan, nothing updated), of each ResNet
//   preset over a batch axis, on the CUDA backend with a GPU and
//   the fast CPU backend without: baseline `bn`, the BN model trained TRAIN_STEPS steps
//   (its running statistics away from their initial mean 0, var 1) in eval mode; tuned
//   `folded`, a conv_bias + no_batch_norm core holding core_fold_bn of that model. Time
//   per batch (wall clock around core_infer and a core_sync) and images/s.
// Check (on the folded row): both models evaluate the same held-out batch of HELD_OUT
//   images: the loss within BN_FOLD_CPU_TOL (CUDA: BN_FOLD_GPU_TOL) relative (counter
//   check_rel_diff) and the same accuracy (CUDA: within BN_FOLD_GPU_FLIPS images;
//   check_accuracy_diff). --practice_selftest=skip_all folds it without the running
//   statistics; every other self-test (frozen, half_lr, drop_step, ...) leaves the folded
//   core unfolded (its own initial weights): the check must fail the folded row either way.
// Counters beside the time: images_per_second, batch_ms, param_count, activation_mib (the
//   memory plan's arena), peak_mib, batch; wrong (the check failed).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/synth.h"

// The folded conv computes x*(w*s) + ((b - mean)*s + beta) where the BN model computes
// (x*w + b - mean)*s + beta: the same up to the rounding of a few operations per output.
// CPU: measured 0 to 1e-7 relative on the held-out loss (tiny, small; also
// tests/test_core_fold.c); asserted at 1e-4 with the same accuracy. CUDA in the default
// fp32 precision: cuDNN rounds the convolutions' inputs and weights to TF32 (10 bits), and
// w*s rounds differently from w: as tests/test_core_gpu.c's fp32 loss tolerance against
// the CPU (5e-3), and the top-1 of a near-tie may flip: at most BN_FOLD_GPU_FLIPS of the
// HELD_OUT images. A fold without the running statistics moves the loss by 2.4e-2, an
// unfolded core by 1.6e-2 (tiny, measured): caught by either tolerance.
#define BN_FOLD_CPU_TOL 1e-4
#define BN_FOLD_GPU_TOL 5e-3
#define BN_FOLD_GPU_FLIPS 2
#define TRAIN_STEPS 4
#define TRAIN_BATCH 16
#define HELD_OUT 64
#define HELD_OUT_INDEX 1000000000ull  // synthetic batches from here on are never trained on
#define WARMUP_FORWARDS 2

typedef enum { VARIANT_BN, VARIANT_FOLDED } Variant;

// Synthetic batch `index` of n images of cfg's task, in host memory.
typedef struct HostBatch { float *images; int32_t *labels; CoreBatch b; } HostBatch;

static int host_batch(HostBatch *hb, const CoreConfig *cfg, int n, uint64_t index)
{
    const CoreModelConfig *m = &cfg->model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, 0.5f, cfg->seed};
    hb->images = malloc((size_t)n * m->in_channels * m->image_size * m->image_size * sizeof(float));
    hb->labels = malloc((size_t)n * sizeof(int32_t));
    if (!hb->images || !hb->labels) {
        free(hb->images);
        free(hb->labels);
        return error_set(ERROR_OUT_OF_MEMORY, "bn_fold: out of memory (host)");
    }
    synth_batch(&task, index, n, hb->images, hb->labels);
    hb->b = (CoreBatch){hb->images, hb->labels, n, CORE_MEMORY_HOST};
    return 0;
}

static void host_batch_free(HostBatch *hb)
{
    free(hb->images);
    free(hb->labels);
}

// The BN model of cfg trained TRAIN_STEPS steps of TRAIN_BATCH images (the same model for
// both variants: same seed and batches).
static int trained_bn_core(const CoreConfig *cfg, Core **out)
{
    CoreConfig t = *cfg;
    t.batch_size = TRAIN_BATCH;
    t.model.conv_bias = false;
    t.model.no_batch_norm = false;
    TRY(core_create(&t, out));
    for (int s = 0; s < TRAIN_STEPS; s++) {
        HostBatch hb;
        TRY(host_batch(&hb, &t, TRAIN_BATCH, (uint64_t)s));
        int rc = core_step(*out, &hb.b, NULL);
        host_batch_free(&hb);
        TRY(rc);
    }
    return 0;
}

// The folded core of bn's model: folded exactly, or as the self-test breaks it.
static int folded_core(Core *bn, const CoreConfig *cfg, Selftest selftest, Core **out)
{
    CoreConfig f = *cfg;
    f.model.conv_bias = true;
    f.model.no_batch_norm = true;
    TRY(core_create(&f, out));
    if (selftest == SELFTEST_SKIP_ALL) return core_fold_bn_mode(bn, *out, CORE_FOLD_FLAW_NO_RUNNING_STATS);
    if (selftest != SELFTEST_NONE) return 0;  // frozen, and every training self-test: left unfolded
    return core_fold_bn(bn, *out);
}

// The check: both models on the held-out batch. Returns 0 (verdict in *wrong, message in
// msg) or -1.
static int check_fold(HarnessState *st, Core *bn, Core *folded, const CoreConfig *cfg, bool *wrong,
                      char *msg, size_t size)
{
    HostBatch hb;
    TRY(host_batch(&hb, cfg, HELD_OUT, HELD_OUT_INDEX));
    CoreEvalResult a, b;
    int rc = core_eval(bn, &hb.b, &a);
    if (rc == 0) rc = core_eval(folded, &hb.b, &b);
    host_batch_free(&hb);
    TRY(rc);
    double rel = fabs((double)b.loss - a.loss) / fmax(fabs((double)a.loss), 1e-30);
    double acc = fabs((double)b.accuracy - a.accuracy);
    harness_counter(st, "check_rel_diff", rel, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_accuracy_diff", acc, HARNESS_COUNTER_PLAIN);
    bool gpu = cfg->backend == CORE_BACKEND_CUDA;
    double tol = gpu ? BN_FOLD_GPU_TOL : BN_FOLD_CPU_TOL;
    double acc_tol = gpu ? (BN_FOLD_GPU_FLIPS + 0.5) / HELD_OUT : 0.0;
    *wrong = !(rel <= tol) || !(acc <= acc_tol);
    if (*wrong)
        snprintf(msg, size, "the folded model's held-out loss %.7g differs from the BN model's "
                 "%.7g by %.3g (relative; tolerance %g), accuracy %.4f vs %.4f (tolerance %d "
                 "of %d images)", b.loss, a.loss, rel, tol, b.accuracy, a.accuracy,
                 gpu ? BN_FOLD_GPU_FLIPS : 0, HELD_OUT);
    return 0;
}

static void bench_infer(HarnessState *st, void *user)
{
    const Variant variant = *(const Variant *)user;
    Selftest selftest = SELFTEST_NONE;
    if (practice_selftest_mode(&selftest) != 0) {
        practice_fail_or_skip(st, "the self-test");
        return;
    }
    if (variant == VARIANT_BN) selftest = SELFTEST_NONE;  // the self-test breaks the tuned run
    CoreConfig cfg;
    if (!practice_run_config(st, false, NULL, &cfg)) return;
    if (cfg.model.kind != CORE_MODEL_RESNET) {
        harness_skip(st, "the MLP preset has no BN to fold");
        return;
    }
    Core *bn = NULL, *folded = NULL;
    PracticeBatch pb = {0};
    if (trained_bn_core(&cfg, &bn) != 0) {
        practice_fail_or_skip(st, "training the BN model");
        goto done;
    }
    bool wrong = false;
    char msg[400] = "";
    if (variant == VARIANT_FOLDED) {
        if (folded_core(bn, &cfg, selftest, &folded) != 0) {
            practice_fail_or_skip(st, "folding the BNs");
            goto done;
        }
        if (check_fold(st, bn, folded, &cfg, &wrong, msg, sizeof msg) != 0) {
            practice_fail_or_skip(st, "checking the folded model");
            goto done;
        }
    }
    Core *timed = variant == VARIANT_FOLDED ? folded : bn;
    if (practice_batch_make(&pb, &cfg, cfg.model.image_size) != 0) {
        practice_fail_or_skip(st, "the batch");
        goto done;
    }
    CoreBatch batch = practice_batch_view(&pb, cfg.batch_size);
    int64_t forwards = 0;
    double seconds = 0.0;
    if (practice_time_forwards(st, timed, &batch, CORE_GRAD_OFF, WARMUP_FORWARDS, &forwards, &seconds) != 0) {
        practice_fail_or_skip(st, "the no_grad forward");
        goto done;
    }
    CoreStats cs;
    if (core_stats(timed, &cs) != 0) {
        practice_fail_or_skip(st, "reading the core's counters");
        goto done;
    }
    harness_set_items_processed(st, forwards * cfg.batch_size);
    harness_counter(st, "images_per_second", (double)(forwards * cfg.batch_size), HARNESS_COUNTER_RATE);
    harness_counter(st, "batch_ms", forwards ? 1e3 * seconds / (double)forwards : 0.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "batch", cfg.batch_size, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "param_count", (double)core_param_count(timed), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "activation_mib", cs.activation_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "peak_mib", cs.peak_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "wrong", wrong, HARNESS_COUNTER_PLAIN);
    char label[400];
    snprintf(label, sizeof label, "%s backend %s, batch %d, %dx%d; no_grad forward (core_infer) "
             "of a BN model trained %d steps, %s; %d untimed warm-up forwards",
             core_backend_name(cs.backend), core_precision_name(cfg.precision), cfg.batch_size,
             cfg.model.image_size, cfg.model.image_size, TRAIN_STEPS,
             variant == VARIANT_FOLDED ? "BNs folded into conv weights and biases (no BN op)"
                                       : "conv then BN with running statistics",
             WARMUP_FORWARDS);
    harness_set_label(st, label);
    if (wrong) harness_fail(st, msg);
done:
    practice_batch_free(&pb);
    core_free(folded);
    core_free(bn);
}

static const Variant variants[] = {VARIANT_BN, VARIANT_FOLDED};

int main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    if (rc >= 0) return rc;
    bool gpu = practice_on_gpu();
    // ResNet presets (the MLP has no BN): all of them on a GPU; those a CPU runs in
    // seconds. Batches from a single request up to a training-size batch.
    const char *presets = gpu ? "tiny,small,medium,resnet18" : "tiny,small";
    const char *batches = gpu ? "1,8,32,128" : "1,8,32";
    const char *names[] = {"bn", "folded"};
    const HarnessRole roles[] = {HARNESS_BASELINE, HARNESS_TUNED};
    for (int i = 0; i < 2; i++)
        harness_register(&(HarnessSpec){
            .practice = "bn_fold", .variant = names[i], .role = roles[i],
            .timing = HARNESS_TIMING_MANUAL, .fn = bench_infer, .user = (void *)&variants[i],
            .axes = {{"preset", presets, true}, {"batch", batches, false}},
            .unit = HARNESS_MS, .min_time = 0.2});
    return harness_run();
}
