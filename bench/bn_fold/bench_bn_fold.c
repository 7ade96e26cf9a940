// bench_bn_fold.c: the bn_fold inference practice: folding each BatchNorm into the
// convolution before it (torch.fx's fuse / torch.ao.quantization.fuse_modules, what
// inference compilers do): w' = w * gamma / sqrt(var + eps), b' = (b - mean) * gamma /
// sqrt(var + eps) + beta, so that the eval-mode network runs one conv (with a bias) where
// it ran a conv and a BN pass over its output.
// Macro (bn_fold/*): the inference forward of a batch (core_infer under no_grad: BN with
//   its running statistics, the inference memory plan, nothing updated), of each ResNet
//   preset over a batch axis, on the CUDA backend with a GPU and
//   the fast CPU backend without: baseline `bn`, the BN model trained TRAIN_STEPS steps and
//   then given the BNs of a long-trained network (core_bn_randomize: gamma, beta and running
//   statistics well away from 1, 0 and their initial mean 0, var 1), in eval mode; tuned
//   `folded`, a conv_bias + no_batch_norm core holding core_fold_bn of that model (on the
//   fast CPU backend its biases cost no pass: they are inside the convolutions' GEMMs; on
//   CUDA they are added after cuDNN's convolution, as PyTorch eager does). Both cores are
//   created at the row's batch. Time per batch (wall clock around core_infer and a
//   core_sync) and images/s.
// Check (on the folded row), on the timed path: both models' no_grad forward (core_infer,
//   CORE_GRAD_OFF) of the same held-out batch of the row's size: the folded logits within
//   BN_FOLD_CPU_TOL (CUDA: BN_FOLD_GPU_TOL) of the BN model's, relative L2 (counter
//   check_rel_diff), and the same top-1 for every image (CUDA: all but BN_FOLD_GPU_FLIPS;
//   check_top1_flips). --practice_selftest=skip_all folds without the running statistics,
//   =fold_ignore_affine without gamma and beta; every other self-test (frozen, half_lr,
//   drop_step, ...) leaves the folded core unfolded (its own initial weights): the check
//   must fail the folded row each way.
// Counters beside the time: images_per_second, batch_ms, param_count, activation_mib (the
//   memory plan's arena), peak_mib, batch, conv_bias_passes (biases added in a pass of
//   their own); wrong (the check failed).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/harness.h"
#include "bench/driver/practice.h"
#include "kernels/clock.h"
#include "kernels/error.h"

// The folded conv computes x*(w*s) + ((b - mean)*s + beta) where the BN model computes
// (x*w + b - mean)*s + beta: the same up to the rounding of a few operations per output.
// CPU: the logits differ by BN_FOLD_CPU_MEASURED (relative L2; tiny and small, batch 1 to
// 32: the fold's fp32 rounding of w*s and of the bias, through a few layers); asserted at
// 1e-4 with every top-1 the same. CUDA in the default fp32 precision: cuDNN rounds the
// convolutions' inputs and weights to TF32 (10 bits), and w*s rounds differently from w: as
// tests/test_core_infer.c's fp32 logits tolerance against the CPU (1e-2), and the top-1 of
// a near-tie may flip: at most BN_FOLD_GPU_FLIPS images. The first GPU run calibrates it
// (the GPU check prints tolerance / observed). The flaws it must catch move the logits by
// far more (BN_FOLD_FLAWS_MEASURED, relative L2).
#define BN_FOLD_CPU_MEASURED "8.7e-8..1.9e-7"
#define BN_FOLD_FLAWS_MEASURED "0.33..0.60 (no gamma and beta), 0.39..0.70 (no running statistics), 1.2..1.3 (unfolded)"
#define BN_FOLD_CPU_TOL 1e-4
#define BN_FOLD_GPU_TOL 1e-2
#define BN_FOLD_GPU_FLIPS 2
#define TRAIN_STEPS 4
#define TRAIN_BATCH 16
#define BN_SEED 7                     // core_bn_randomize's draw
#define HELD_OUT_INDEX 1000000000ull  // synthetic batches from here on are never trained on
#define WARMUP_FORWARDS 2

typedef enum { VARIANT_BN, VARIANT_FOLDED } Variant;

// The BN model of cfg trained TRAIN_STEPS steps of TRAIN_BATCH images, then given the BNs of
// a long-trained network (the same model for both variants: same seed, batches and draw).
static int trained_bn_core(const CoreConfig *cfg, Core **out)
{
    CoreConfig t = *cfg;  // created at the row's batch (the LR follows each batch's size)
    t.model.conv_bias = false;
    t.model.no_batch_norm = false;
    TRY(core_create(&t, out));
    for (int s = 0; s < TRAIN_STEPS; s++) {
        PracticeHostBatch hb;
        TRY(practice_host_batch(&hb, &t, TRAIN_BATCH, (uint64_t)s));
        int rc = core_step(*out, &hb.b, NULL);
        practice_host_batch_free(&hb);
        TRY(rc);
    }
    return core_bn_randomize(*out, BN_SEED);
}

// The folded core of bn's model: folded exactly, or as the self-test breaks it.
static int folded_core(Core *bn, const CoreConfig *cfg, Selftest selftest, Core **out)
{
    CoreConfig f = *cfg;
    f.model.conv_bias = true;
    f.model.no_batch_norm = true;
    TRY(core_create(&f, out));
    if (selftest == SELFTEST_SKIP_ALL) return core_fold_bn_mode(bn, *out, CORE_FOLD_FLAW_NO_RUNNING_STATS);
    if (selftest == SELFTEST_FOLD_IGNORE_AFFINE) return core_fold_bn_mode(bn, *out, CORE_FOLD_FLAW_NO_AFFINE);
    if (selftest != SELFTEST_NONE) return 0;  // frozen, and every training self-test: left unfolded
    return core_fold_bn(bn, *out);
}

// The logits (n x classes, host memory, malloc'd into *out) of core's no_grad forward of hb.
static int infer_logits(Core *core, const PracticeHostBatch *hb, int classes, float **out)
{
    *out = malloc((size_t)hb->b.n * classes * sizeof(float));
    if (!*out) return error_set(ERROR_OUT_OF_MEMORY, "bn_fold: out of memory (host)");
    return core_infer(core, &hb->b, CORE_GRAD_OFF, *out, NULL);
}

// The check, on the timed path: both models' no_grad forward of a held-out batch of the
// row's size. Returns 0 (verdict in *wrong, message in msg) or -1.
static int check_fold(HarnessState *st, Core *bn, Core *folded, const CoreConfig *cfg, bool *wrong,
                      char *msg, size_t size)
{
    int n = cfg->batch_size, classes = cfg->model.num_classes;
    PracticeHostBatch hb;
    TRY(practice_host_batch(&hb, cfg, n, HELD_OUT_INDEX));
    float *want = NULL, *got = NULL;
    int rc = infer_logits(bn, &hb, classes, &want);
    if (rc == 0) rc = infer_logits(folded, &hb, classes, &got);
    practice_host_batch_free(&hb);
    double rel = 0.0;
    int agree = 0;
    if (rc == 0) practice_compare_logits(want, got, n, classes, &rel, &agree);
    free(want);
    free(got);
    TRY(rc);
    int flips = n - agree;
    bool gpu = cfg->backend == CORE_BACKEND_CUDA;
    double tol = gpu ? BN_FOLD_GPU_TOL : BN_FOLD_CPU_TOL;
    int flips_tol = gpu ? BN_FOLD_GPU_FLIPS : 0;
    harness_counter(st, "check_rel_diff", rel, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_tolerance", tol, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "check_top1_flips", flips, HARNESS_COUNTER_PLAIN);
    *wrong = !(rel <= tol) || flips > flips_tol;
    if (*wrong)
        snprintf(msg, size, "the folded model's no_grad logits differ from the BN model's by %.3g "
                 "(relative L2 over a held-out batch of %d; tolerance %g) and %d of its top-1 "
                 "classes (tolerance %d)", rel, n, tol, flips, flips_tol);
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
    harness_counter(st, "parameters", (double)core_param_count(timed), HARNESS_COUNTER_PLAIN);
    harness_counter(st, "activation_mib", cs.activation_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "peak_mib", cs.peak_bytes / 1048576.0, HARNESS_COUNTER_PLAIN);
    harness_counter(st, "conv_bias_passes", cs.conv_biases - cs.conv_biases_fused, HARNESS_COUNTER_PLAIN);
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
