// train_main.c: build/train, a command-line trainer over the shared core.
// Trains a preset model on the synthetic plane-wave task with every practice of the
// core as a flag; prints step, loss, accuracy, loss scale and images/s; runs on the
// CPU when there is no GPU. `train --help` lists every flag.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/check.h"
#include "kernels/core.h"
#include "kernels/synth.h"

typedef struct TrainArgs {
    const char *preset;
    int steps, log_every, eval_batches;
    float noise;
    float target_accuracy;  // exit status 2 when the final accuracy is below it
} TrainArgs;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: train [flags]\n"
        "Trains a CNN (or MLP) on a synthetic, learnable image task with the shared core.\n"
        "\nWorkload:\n"
        "  --preset NAME          tiny | mlp | small | medium | resnet18 (default tiny)\n"
        "  --steps N              training steps (default 200)\n"
        "  --batch-size N         images per step (default: the preset's)\n"
        "  --image-size N         override the preset's image size\n"
        "  --classes N            override the preset's class count\n"
        "  --width N              override the preset's first-stage channels\n"
        "  --noise F              noise std of the synthetic images (default 0.5)\n"
        "  --seed N               weight and data seed (default 1)\n"
        "  --log-every N          print every N steps (default 20)\n"
        "  --eval-batches N       held-out batches evaluated at the end (default 4)\n"
        "  --target-accuracy F    exit with status 2 if final accuracy is below F\n"
        "\nPractices (config fields of the core):\n"
        "  --backend B            auto | cpu | cuda (default auto: cuda if a GPU is usable)\n"
        "  --device N             CUDA device ordinal (default 0)\n"
        "  --precision P          fp32 | tf32 | fp16 (dynamic loss scaling) | bf16 (default fp32)\n"
        "  --layout L             nchw | nhwc activation layout on the GPU (default nchw)\n"
        "  --zero-grad Z          memset (memset + accumulate) | set_to_none (first write\n"
        "                         overwrites) (default memset)\n"
        "  --conv-algo A          heuristic | autotune (time candidates per shape, cached)\n"
        "  --readback R           every_step (sync on the loss each step, like .item()) |\n"
        "                         deferred (accumulate on the device) (default every_step)\n"
        "  --readback-interval K  steps between loss reads when deferred (default 10)\n"
        "  --lr F                 base learning rate\n"
        "  --momentum F           SGD momentum (default 0.9)\n"
        "  --weight-decay F       SGD weight decay (default 5e-4)\n"
        "  --lr-decay D           constant | cosine | step (default cosine)\n"
        "  --warmup N             linear warmup steps\n"
        "  --min-lr F             cosine decays to this LR at the last step (default 0)\n"
        "  --step-size N          step decay: multiply by --step-gamma every N steps\n"
        "  --step-gamma F         step decay factor (default 0.1)\n"
        "  --linear-scaling       scale the LR by batch / --reference-batch\n"
        "  --reference-batch N    batch size the base LR is tuned for\n"
        "  --clip-norm F          clip gradients by global L2 norm (after unscaling); 0 = off\n"
        "  --init-scale F         GradScaler init_scale (default 65536)\n"
        "  --growth-interval N    GradScaler growth_interval (default 2000)\n"
        "  --workspace-mb N       max cuDNN workspace per convolution (default 256)\n"
        "  --help                 this text\n");
}

enum {
    OPT_PRESET = 256, OPT_STEPS, OPT_BATCH, OPT_IMAGE, OPT_CLASSES, OPT_WIDTH, OPT_NOISE,
    OPT_SEED, OPT_LOG, OPT_EVAL, OPT_TARGET, OPT_BACKEND, OPT_DEVICE, OPT_PRECISION,
    OPT_LAYOUT, OPT_ZERO, OPT_ALGO, OPT_READBACK, OPT_INTERVAL, OPT_LR, OPT_MOMENTUM, OPT_WD,
    OPT_DECAY, OPT_WARMUP, OPT_STEP_SIZE, OPT_STEP_GAMMA, OPT_LINEAR, OPT_REF_BATCH, OPT_CLIP,
    OPT_INIT_SCALE, OPT_GROWTH, OPT_WORKSPACE, OPT_MIN_LR, OPT_HELP,
};

static const struct option options[] = {
    {"preset", 1, 0, OPT_PRESET}, {"steps", 1, 0, OPT_STEPS}, {"batch-size", 1, 0, OPT_BATCH},
    {"image-size", 1, 0, OPT_IMAGE}, {"classes", 1, 0, OPT_CLASSES}, {"width", 1, 0, OPT_WIDTH},
    {"noise", 1, 0, OPT_NOISE}, {"seed", 1, 0, OPT_SEED}, {"log-every", 1, 0, OPT_LOG},
    {"eval-batches", 1, 0, OPT_EVAL}, {"target-accuracy", 1, 0, OPT_TARGET},
    {"backend", 1, 0, OPT_BACKEND}, {"device", 1, 0, OPT_DEVICE},
    {"precision", 1, 0, OPT_PRECISION}, {"layout", 1, 0, OPT_LAYOUT},
    {"zero-grad", 1, 0, OPT_ZERO}, {"conv-algo", 1, 0, OPT_ALGO},
    {"readback", 1, 0, OPT_READBACK}, {"readback-interval", 1, 0, OPT_INTERVAL},
    {"lr", 1, 0, OPT_LR}, {"momentum", 1, 0, OPT_MOMENTUM}, {"weight-decay", 1, 0, OPT_WD},
    {"lr-decay", 1, 0, OPT_DECAY}, {"warmup", 1, 0, OPT_WARMUP},
    {"step-size", 1, 0, OPT_STEP_SIZE}, {"step-gamma", 1, 0, OPT_STEP_GAMMA},
    {"linear-scaling", 0, 0, OPT_LINEAR}, {"reference-batch", 1, 0, OPT_REF_BATCH},
    {"clip-norm", 1, 0, OPT_CLIP}, {"init-scale", 1, 0, OPT_INIT_SCALE},
    {"growth-interval", 1, 0, OPT_GROWTH}, {"workspace-mb", 1, 0, OPT_WORKSPACE},
    {"min-lr", 1, 0, OPT_MIN_LR},
    {"help", 0, 0, OPT_HELP}, {0, 0, 0, 0},
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_fail(const char *flag, const char *value)
{
    fprintf(stderr, "train: bad value '%s' for --%s (see --help)\n", value, flag);
    return -1;
}

// Reads argv into cfg and args; 1 means --help was printed, -1 a bad flag.
static int parse_args(int argc, char **argv, CoreConfig *cfg, TrainArgs *a)
{
    // The preset goes first so that other flags override its fields.
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--preset") == 0 && i + 1 < argc) a->preset = argv[i + 1];
        else if (strncmp(argv[i], "--preset=", 9) == 0) a->preset = argv[i] + 9;
    }
    if (core_config_preset(cfg, a->preset) != 0) return parse_fail("preset", a->preset);
    bool steps_set = false;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        const char *v = optarg;
        const char *name = "?";
        for (const struct option *o = options; o->name; o++)
            if (o->val == opt) name = o->name;
        switch (opt) {
        case OPT_PRESET: break;
        case OPT_STEPS: a->steps = atoi(v); steps_set = true; break;
        case OPT_BATCH: cfg->batch_size = atoi(v); break;
        case OPT_IMAGE: cfg->model.image_size = atoi(v); break;
        case OPT_CLASSES: cfg->model.num_classes = atoi(v); break;
        case OPT_WIDTH: cfg->model.width = atoi(v); break;
        case OPT_NOISE: a->noise = strtof(v, NULL); break;
        case OPT_SEED: cfg->seed = strtoull(v, NULL, 10); break;
        case OPT_LOG: a->log_every = atoi(v); break;
        case OPT_EVAL: a->eval_batches = atoi(v); break;
        case OPT_TARGET: a->target_accuracy = strtof(v, NULL); break;
        case OPT_BACKEND: if (core_backend_parse(v, &cfg->backend)) return parse_fail(name, v); break;
        case OPT_DEVICE: cfg->device = atoi(v); break;
        case OPT_PRECISION: if (core_precision_parse(v, &cfg->precision)) return parse_fail(name, v); break;
        case OPT_LAYOUT: if (core_layout_parse(v, &cfg->layout)) return parse_fail(name, v); break;
        case OPT_ZERO: if (core_zero_grad_parse(v, &cfg->zero_grad)) return parse_fail(name, v); break;
        case OPT_ALGO: if (core_conv_algo_parse(v, &cfg->conv_algo)) return parse_fail(name, v); break;
        case OPT_READBACK: if (core_readback_parse(v, &cfg->readback)) return parse_fail(name, v); break;
        case OPT_INTERVAL: cfg->readback_interval = atoi(v); break;
        case OPT_LR: cfg->optim.base_lr = strtof(v, NULL); break;
        case OPT_MOMENTUM: cfg->optim.momentum = strtof(v, NULL); break;
        case OPT_WD: cfg->optim.weight_decay = strtof(v, NULL); break;
        case OPT_DECAY: if (core_lr_decay_parse(v, &cfg->optim.decay)) return parse_fail(name, v); break;
        case OPT_WARMUP: cfg->optim.warmup_steps = atoi(v); break;
        case OPT_STEP_SIZE: cfg->optim.step_size = atoi(v); break;
        case OPT_STEP_GAMMA: cfg->optim.step_gamma = strtof(v, NULL); break;
        case OPT_LINEAR: cfg->optim.linear_scaling = true; break;
        case OPT_REF_BATCH: cfg->optim.reference_batch = atoi(v); break;
        case OPT_CLIP: cfg->optim.clip_norm = strtof(v, NULL); break;
        case OPT_INIT_SCALE: cfg->scaler.init_scale = strtof(v, NULL); break;
        case OPT_GROWTH: cfg->scaler.growth_interval = atoi(v); break;
        case OPT_WORKSPACE: cfg->workspace_limit = (size_t)atol(v) << 20; break;
        case OPT_MIN_LR: cfg->optim.min_lr = strtof(v, NULL); break;
        case OPT_HELP: usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) { fprintf(stderr, "train: unexpected argument '%s'\n", argv[optind]); return -1; }
    if (steps_set) cfg->optim.total_steps = a->steps;  // the cosine ends with the run
    if (a->steps <= 0 || a->log_every <= 0 || a->eval_batches < 0) {
        fprintf(stderr, "train: --steps and --log-every must be > 0\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    CoreConfig cfg;
    TrainArgs a = {.preset = "tiny", .steps = 200, .log_every = 20, .eval_batches = 4,
                   .noise = 0.5f, .target_accuracy = -1.0f};
    int rc = parse_args(argc, argv, &cfg, &a);
    if (rc != 0) return rc > 0 ? 0 : 1;

    Core *core = NULL;
    if (core_create(&cfg, &core) != 0) {
        fprintf(stderr, "train: cannot create the core: %s\n", check_last_error());
        return 1;
    }
    CoreStats st;
    core_stats(core, &st);
    printf("train: preset %s backend %s precision %s layout %s zero_grad %s conv_algo %s "
           "readback %s batch %d params %zu\n", a.preset, core_backend_name(st.backend),
           core_precision_name(cfg.precision), core_layout_name(cfg.layout),
           core_zero_grad_name(cfg.zero_grad), core_conv_algo_name(cfg.conv_algo),
           core_readback_name(cfg.readback), cfg.batch_size, st.param_count);

    const CoreModelConfig *m = &cfg.model;
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, a.noise, cfg.seed};
    size_t img = (size_t)m->in_channels * m->image_size * m->image_size;
    float *images = malloc((size_t)cfg.batch_size * img * sizeof(float));
    int32_t *labels = malloc((size_t)cfg.batch_size * sizeof(int32_t));
    if (!images || !labels) { fprintf(stderr, "train: out of host memory\n"); return 1; }

    CoreBatch batch = {images, labels, cfg.batch_size, CORE_MEMORY_HOST};
    double t0 = now_s(), t_log = t0;
    int since_log = 0;
    printf("%8s %10s %9s %10s %12s %12s\n", "step", "loss", "accuracy", "lr", "loss_scale",
           "images/s");
    for (int s = 0; s < a.steps; s++) {
        synth_batch(&task, (uint64_t)s, cfg.batch_size, images, labels);
        CoreStepResult r;
        if (core_step(core, &batch, &r) != 0) {
            fprintf(stderr, "train: step %d failed%s: %s\n", s,
                    check_last_was_oom() ? " (out of memory)" : "", check_last_error());
            return 1;
        }
        since_log++;
        if ((s + 1) % a.log_every == 0 || s + 1 == a.steps) {
            core_sync(core);
            double t = now_s();
            core_stats(core, &st);
            char loss[32] = "-", acc[32] = "-";
            if (r.loss_ready) {
                snprintf(loss, sizeof loss, "%.4f", r.loss);
                snprintf(acc, sizeof acc, "%.3f", r.accuracy);
            }
            printf("%8d %10s %9s %10.5f %12g %12.1f\n", s + 1, loss, acc, r.lr, st.loss_scale,
                   since_log * cfg.batch_size / (t - t_log));
            fflush(stdout);
            t_log = t;
            since_log = 0;
        }
    }
    double train_s = now_s() - t0;

    // Held-out batches: indices beyond any training step.
    double loss_sum = 0.0, acc_sum = 0.0;
    for (int e = 0; e < a.eval_batches; e++) {
        synth_batch(&task, (uint64_t)1000000000 + e, cfg.batch_size, images, labels);
        CoreEvalResult er;
        if (core_eval(core, &batch, &er) != 0) {
            fprintf(stderr, "train: eval failed: %s\n", check_last_error());
            return 1;
        }
        loss_sum += er.loss;
        acc_sum += er.accuracy;
    }
    core_stats(core, &st);
    float acc = a.eval_batches ? (float)(acc_sum / a.eval_batches) : 0.0f;
    printf("train: %d steps in %.2f s (%.1f images/s), skipped %d, loss scale %g, "
           "autotune %.1f ms (cache hits %d, misses %d), peak %.1f MiB\n",
           a.steps, train_s, a.steps * cfg.batch_size / train_s, st.skipped_steps, st.loss_scale,
           st.autotune_ms, st.algo_cache_hits, st.algo_cache_misses, st.peak_bytes / 1048576.0);
    if (a.eval_batches)
        printf("eval: loss %.4f accuracy %.4f on %d held-out images\n",
               loss_sum / a.eval_batches, acc, a.eval_batches * cfg.batch_size);
    core_free(core);
    free(images);
    free(labels);
    if (a.target_accuracy >= 0.0f && acc < a.target_accuracy) {
        fprintf(stderr, "train: accuracy %.4f below target %.4f\n", acc, a.target_accuracy);
        return 2;
    }
    return 0;
}
