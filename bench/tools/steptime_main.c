// steptime_main.c: build/steptime, the training-step time of one core config on one
// fixed synthetic batch, for side-by-side comparisons with PyTorch (scripts/torch_twin.py,
// scripts/twin_compare.py): untimed warm-up steps, then each timed step alone (the loss is
// read back every step unless --readback deferred, core_sync after it); prints the median,
// min and mean ms per step, and the core's peak memory (core_stats: peak_bytes, and on CUDA
// device_used_bytes). The LR is constant unless --lr-warmup (a linear warm-up, then
// constant) so that a twin can replay the same steps. cpu_median_ms is the process CPU time
// of a step (all threads, spinning included): at one thread, the step time without
// preemption.
//
// The input path is the same as torch_twin.py time's (--input): by default the batch is put
// on the device once, before the steps (CORE_MEMORY_DEVICE on CUDA; PyTorch: .to("cuda")
// once), so that the comparison times the step and not a synchronous pageable copy that
// only one side makes; --input host hands the core a malloc'd host batch every step (its
// upload copies it; torch_twin.py time --input host copies the same kind of memory each
// step). peak_mib counts the same buffers as torch.cuda.max_memory_allocated: the core's
// own (core_stats peak_bytes) plus the batch steptime put on the device (batch_mib; 0 for
// --input host and on the CPU, where nothing is on a device).
//
// --dump DIR writes what a twin needs to start from the same state and to check that it
// computes the same steps, before the timing (which starts again from the initial state).
// All binary files are flat little-endian arrays without headers; P = n_params, in the
// parameter order of kernels/model.h (per op: conv weight KCRS; BN gamma, beta; linear
// weight [out][in], bias), S = n_bn_stats (per BN op in model order: running mean[C], then
// running var[C]; 0 without BN), K = check_steps:
//   DIR/argv.txt     steptime's command line as given, one argument per line (the twin
//                    parses it itself and checks meta.txt against it)
//   DIR/meta.txt     key=value lines: format (3), preset, backend, batch, channels, image_size,
//                    classes, n_params, precision, lr (base), momentum, weight_decay,
//                    optimizer (sgd | adamw), beta1, beta2, eps (AdamW's; written for both),
//                    clip_norm (0: off), lr_warmup (linear warm-up steps, then constant),
//                    init_scale, growth_factor, backoff_factor, growth_interval (the
//                    GradScaler, used with fp16), check_steps, inject_steps (comma-separated
//                    step indices whose gradient gets an inf), inject_index (the flat
//                    gradient index it is written to: n_params / 2), grad_loss,
//                    bn_eps, bn_momentum (kernels/model.h), n_bn_stats, eval_loss and
//                    eval_accuracy (core_eval of the held-out batch after the K steps: BN
//                    with the running statistics)
//   DIR/params.bin   float32[P]  the initial parameters
//   DIR/bn_stats.bin float32[S]  the initial BN running statistics
//   DIR/images.bin   float32[N][C][H][W]  the batch;  DIR/labels.bin  int32[N]
//   DIR/grads.bin    float32[P]  core_loss_grad at the initial parameters on the batch:
//                    the unscaled fp32 gradient of the mean loss (no weight decay, no
//                    clipping), grad_loss its loss
//   DIR/steps.bin    float32[K][4]  per step: lr, loss, loss scale after the step's
//                    GradScaler update (1 unless fp16), skipped (1 or 0)
//   DIR/after.bin    float32[P]  the parameters after the K steps on the batch
//   DIR/bn_stats_after.bin  float32[S]  the BN running statistics after the K steps
//   DIR/eval_images.bin, DIR/eval_labels.bin  a held-out batch (the N synthetic samples
//                    after the training batch), as images.bin and labels.bin
// A GPT preset (gpt-tiny, gpt-mini, gpt2-small; the CPU backends) dumps token batches of
// synth_tokens_batch (kernels/synth.h: batch 0 for training, batch 1 held out) instead of
// images: DIR/tokens.bin and DIR/labels.bin int32[N][T] (T = seq_len; labels: the next
// token of each position), DIR/eval_tokens.bin and DIR/eval_labels.bin likewise, no
// images*.bin. Its meta.txt says channels=0, image_size=0, classes = the vocabulary, and
// adds kind=gpt, vocab, seq_len, width, layers, heads, attention (unfused | fused) after
// inject_steps; n_bn_stats is 0 (bn_stats*.bin empty). A CNN's meta.txt has no kind key.
// The timing line of a GPT counts sequences as images (images_per_s: sequences per second).
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cuda_runtime_api.h>

#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/model.h"
#include "kernels/synth.h"

#define MAX_INJECT 64

typedef struct Args {
    const char *preset, *dump_dir;
    const char *attention;            // --attention as given (GPT presets only)
    int steps, warmup, check_steps, threads;
    int inject[MAX_INJECT], n_inject; // steps (of the dump's check steps) given an inf
    bool input_host;                  // --input host: a host batch every step
    int argc;
    char **argv;                      // the command line, for the dump's argv.txt
} Args;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: steptime [flags]\n"
        "Times training steps of the shared core on one fixed synthetic batch.\n"
        "  --preset NAME        tiny | mlp | small | medium | resnet18 | gpt-tiny | gpt-mini |\n"
        "                       gpt2-small (default tiny; the gpt presets: CPU backends)\n"
        "  --backend B          auto | cpu | cpu-ref | cuda (default auto)\n"
        "  --threads N          CPU backend threads (default: the machine's cores)\n"
        "  --batch-size N       images (gpt: sequences) per step (default: the preset's)\n"
        "  --attention A        unfused | fused: a gpt preset's attention (default unfused)\n"
        "  --precision P        fp32 | fp32_strict | tf32 | fp16 | bf16 (default fp32; the\n"
        "                       CPU backends compute in fp32, fp16 runs the loss scaling)\n"
        "  --layout L           nchw | nhwc: activation layout on the GPU (default nchw)\n"
        "  --zero-grad Z        memset | set_to_none (default memset)\n"
        "  --conv-algo A        heuristic | autotune: cuDNN algorithm choice, as\n"
        "                       cudnn.benchmark False | True (default heuristic)\n"
        "  --readback R         every_step | deferred: read the loss back every step (.item())\n"
        "                       or every --readback-interval steps (default every_step)\n"
        "  --readback-interval N  steps between deferred read-backs (default 10)\n"
        "  --input I            device | host: the batch on the device once before the\n"
        "                       steps (as a PyTorch loop that moved it there), or a malloc'd\n"
        "                       host batch the core copies every step (default device; the\n"
        "                       same on the CPU backends)\n"
        "  --steps N            timed steps (default 10)\n"
        "  --warmup N           untimed steps first (default 2)\n"
        "  --lr X               base learning rate (default: the preset's)\n"
        "  --optimizer O        sgd | adamw: torch.optim.SGD or torch.optim.AdamW (default sgd;\n"
        "                       the gpt presets: adamw, beta2 0.95, weight decay 0.1, clip 1)\n"
        "  --momentum X         SGD momentum (default: the preset's)\n"
        "  --weight-decay X     weight decay: SGD's L2, AdamW's decoupled (default: the preset's)\n"
        "  --beta1 X            AdamW beta1 (default 0.9)\n"
        "  --beta2 X            AdamW beta2 (default 0.999)\n"
        "  --eps X              AdamW eps (default 1e-8)\n"
        "  --clip-norm X        clip gradients to this global L2 norm; 0: off (default 0)\n"
        "  --lr-warmup N        linear LR warm-up over N steps, then constant (default 0)\n"
        "  --init-scale X       GradScaler initial scale, fp16 (default 65536)\n"
        "  --growth-interval N  GradScaler growth interval, fp16 (default 2000)\n"
        "  --dump DIR           write the initial parameters, the batch, the first gradient,\n"
        "                       per-step LR, loss and scale, the parameters and BN running\n"
        "                       statistics after --check-steps steps and the eval loss of a\n"
        "                       held-out batch to DIR (layout: this file's header)\n"
        "  --check-steps K      steps replayed for DIR (default 3)\n"
        "  --inject-inf LIST    comma-separated step indices (< K) whose gradient gets an\n"
        "                       inf at index n_params/2 during the dump's steps (fp16 only)\n"
        "  --help               this text\n"
        "Prints one line: steptime: preset P backend B ... median_ms M min_ms M mean_ms M\n"
        "images_per_s X cpu_median_ms M input device|host batch_mib X peak_mib X\n"
        "device_used_mib X (peak_mib: core_stats peak_bytes + batch_mib, the batch on the\n"
        "device)\n");
}

static int int_arg(const char *flag, const char *v, int min, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < min || x > INT_MAX) {
        fprintf(stderr, "steptime: bad value '%s' for --%s: need an integer >= %d\n", v, flag, min);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int float_arg(const char *flag, const char *v, float *out)
{
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < 0.0f) {
        fprintf(stderr, "steptime: bad value '%s' for --%s: need a finite number >= 0\n", v, flag);
        return -1;
    }
    *out = x;
    return 0;
}

static int inject_arg(const char *v, Args *a)
{
    char buf[1024];
    if (strlen(v) >= sizeof buf) {
        fprintf(stderr, "steptime: --inject-inf list too long\n");
        return -1;
    }
    strcpy(buf, v);
    a->n_inject = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (a->n_inject == MAX_INJECT) {
            fprintf(stderr, "steptime: at most %d --inject-inf steps\n", MAX_INJECT);
            return -1;
        }
        if (int_arg("inject-inf", tok, 0, &a->inject[a->n_inject++])) return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int write_file(const char *dir, const char *name, const void *data, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes) {
        fprintf(stderr, "steptime: cannot write %s: %s\n", path, strerror(errno));
        if (f) fclose(f);
        return -1;
    }
    return fclose(f) == 0 ? 0 : -1;
}

static int parse(int argc, char **argv, CoreConfig *cfg, Args *a)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--preset") == 0 && i + 1 < argc) a->preset = argv[i + 1];
        else if (strncmp(argv[i], "--preset=", 9) == 0) a->preset = argv[i] + 9;
    }
    if (core_config_preset(cfg, a->preset) != 0) {
        fprintf(stderr, "steptime: unknown preset '%s'\n", a->preset);
        return -1;
    }
    cfg->optim.decay = CORE_LR_CONSTANT; // the same LR every step (after any warm-up)
    cfg->optim.warmup_steps = 0;
    cfg->optim.linear_scaling = false;
    static const struct option opts[] = {
        {"preset", 1, 0, 'p'}, {"backend", 1, 0, 'b'}, {"threads", 1, 0, 't'},
        {"batch-size", 1, 0, 'n'}, {"zero-grad", 1, 0, 'z'}, {"steps", 1, 0, 's'},
        {"warmup", 1, 0, 'w'}, {"dump", 1, 0, 'd'}, {"check-steps", 1, 0, 'k'},
        {"precision", 1, 0, 'P'}, {"layout", 1, 0, 'L'}, {"lr", 1, 0, 'r'},
        {"momentum", 1, 0, 'm'}, {"weight-decay", 1, 0, 'W'}, {"clip-norm", 1, 0, 'c'},
        {"lr-warmup", 1, 0, 'u'}, {"init-scale", 1, 0, 'S'}, {"growth-interval", 1, 0, 'g'},
        {"inject-inf", 1, 0, 'i'}, {"readback", 1, 0, 'R'}, {"readback-interval", 1, 0, 'I'},
        {"conv-algo", 1, 0, 'A'}, {"input", 1, 0, 'N'}, {"optimizer", 1, 0, 'O'},
        {"beta1", 1, 0, '1'}, {"beta2", 1, 0, '2'}, {"eps", 1, 0, 'e'}, {"attention", 1, 0, 'a'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'p': break;
        case 'b':
            if (core_backend_parse(optarg, &cfg->backend)) {
                fprintf(stderr, "steptime: bad --backend '%s'\n", optarg);
                return -1;
            }
            break;
        case 'P':
            if (core_precision_parse(optarg, &cfg->precision)) {
                fprintf(stderr, "steptime: bad --precision '%s'\n", optarg);
                return -1;
            }
            break;
        case 'L':
            if (core_layout_parse(optarg, &cfg->layout)) {
                fprintf(stderr, "steptime: bad --layout '%s'\n", optarg);
                return -1;
            }
            break;
        case 'z':
            if (core_zero_grad_parse(optarg, &cfg->zero_grad)) {
                fprintf(stderr, "steptime: bad --zero-grad '%s'\n", optarg);
                return -1;
            }
            break;
        case 'R':
            if (core_readback_parse(optarg, &cfg->readback)) {
                fprintf(stderr, "steptime: bad --readback '%s'\n", optarg);
                return -1;
            }
            break;
        case 'A':
            if (core_conv_algo_parse(optarg, &cfg->conv_algo)) {
                fprintf(stderr, "steptime: bad --conv-algo '%s'\n", optarg);
                return -1;
            }
            break;
        case 'N':
            if (strcmp(optarg, "device") != 0 && strcmp(optarg, "host") != 0) {
                fprintf(stderr, "steptime: bad --input '%s' (device | host)\n", optarg);
                return -1;
            }
            a->input_host = strcmp(optarg, "host") == 0;
            break;
        case 'O':
            if (core_optimizer_parse(optarg, &cfg->optim.optimizer)) {
                fprintf(stderr, "steptime: bad --optimizer '%s' (sgd | adamw)\n", optarg);
                return -1;
            }
            break;
        case 'a':
            if (core_attention_parse(optarg, &cfg->model.attention)) {
                fprintf(stderr, "steptime: bad --attention '%s' (unfused | fused)\n", optarg);
                return -1;
            }
            a->attention = optarg;
            break;
        case '1': if (float_arg("beta1", optarg, &cfg->optim.beta1)) return -1; break;
        case '2': if (float_arg("beta2", optarg, &cfg->optim.beta2)) return -1; break;
        case 'e': if (float_arg("eps", optarg, &cfg->optim.eps)) return -1; break;
        case 'I': if (int_arg("readback-interval", optarg, 1, &cfg->readback_interval)) return -1; break;
        case 't': if (int_arg("threads", optarg, 1, &a->threads)) return -1; break;
        case 'n': if (int_arg("batch-size", optarg, 1, &cfg->batch_size)) return -1; break;
        case 's': if (int_arg("steps", optarg, 1, &a->steps)) return -1; break;
        case 'w': if (int_arg("warmup", optarg, 0, &a->warmup)) return -1; break;
        case 'd': a->dump_dir = optarg; break;
        case 'k': if (int_arg("check-steps", optarg, 1, &a->check_steps)) return -1; break;
        case 'r': if (float_arg("lr", optarg, &cfg->optim.base_lr)) return -1; break;
        case 'm': if (float_arg("momentum", optarg, &cfg->optim.momentum)) return -1; break;
        case 'W': if (float_arg("weight-decay", optarg, &cfg->optim.weight_decay)) return -1; break;
        case 'c': if (float_arg("clip-norm", optarg, &cfg->optim.clip_norm)) return -1; break;
        case 'u': if (int_arg("lr-warmup", optarg, 0, &cfg->optim.warmup_steps)) return -1; break;
        case 'S': if (float_arg("init-scale", optarg, &cfg->scaler.init_scale)) return -1; break;
        case 'g': if (int_arg("growth-interval", optarg, 1, &cfg->scaler.growth_interval)) return -1; break;
        case 'i': if (inject_arg(optarg, a)) return -1; break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "steptime: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (a->attention && cfg->model.kind != CORE_MODEL_GPT) {
        fprintf(stderr, "steptime: --attention applies to the gpt presets only\n");
        return -1;
    }
    if (a->n_inject && (!a->dump_dir || cfg->precision != CORE_PRECISION_FP16)) {
        fprintf(stderr, "steptime: --inject-inf needs --dump and --precision fp16 (only the "
                        "GradScaler skips a step with an inf gradient)\n");
        return -1;
    }
    for (int i = 0; i < a->n_inject; i++)
        if (a->inject[i] >= a->check_steps) {
            fprintf(stderr, "steptime: --inject-inf step %d is not below --check-steps %d\n",
                    a->inject[i], a->check_steps);
            return -1;
        }
    if (core_config_validate(cfg) != 0) {
        fprintf(stderr, "steptime: bad configuration: %s\n", error_message());
        return -1;
    }
    return 0;
}

static bool injected_at(const Args *a, int step)
{
    for (int i = 0; i < a->n_inject; i++)
        if (a->inject[i] == step) return true;
    return false;
}

// The eval after the dump's steps, for meta.txt.
typedef struct EvalFigures { float loss, accuracy; } EvalFigures;

// meta.txt: the configuration the twin rebuilds (see the file's header).
static int write_meta(const Core *core, const CoreConfig *cfg, const CoreBatch *b,
                      const Args *a, float grad_loss, const EvalFigures *eval)
{
    const CoreModelConfig *m = &cfg->model;
    const AmpScalerConfig *s = &cfg->scaler;
    size_t np = core_param_count(core);
    bool gpt = m->kind == CORE_MODEL_GPT;
    char meta[8192];
    int len = snprintf(meta, sizeof meta,
        "format=3\npreset=%s\nbackend=%s\nbatch=%d\nchannels=%d\nimage_size=%d\nclasses=%d\n"
        "n_params=%zu\nprecision=%s\nlr=%.9g\nmomentum=%.9g\nweight_decay=%.9g\n"
        "clip_norm=%.9g\nlr_warmup=%d\ninit_scale=%.9g\ngrowth_factor=%.9g\n"
        "backoff_factor=%.9g\ngrowth_interval=%d\ncheck_steps=%d\ninject_index=%zu\n"
        "grad_loss=%.9g\nbn_eps=%.9g\nbn_momentum=%.9g\nn_bn_stats=%zu\neval_loss=%.9g\n"
        "eval_accuracy=%.9g\noptimizer=%s\nbeta1=%.9g\nbeta2=%.9g\neps=%.9g\ninject_steps=",
        a->preset, core_backend_name(cfg->backend), b->n, gpt ? 0 : m->in_channels,
        gpt ? 0 : m->image_size, m->num_classes, np, core_precision_name(cfg->precision), cfg->optim.base_lr,
        cfg->optim.momentum, cfg->optim.weight_decay, cfg->optim.clip_norm,
        cfg->optim.warmup_steps, s->init_scale, s->growth_factor, s->backoff_factor,
        s->growth_interval, a->check_steps, np / 2, grad_loss, MODEL_BN_EPS, MODEL_BN_MOMENTUM,
        core_buffer_count(core), eval->loss, eval->accuracy,
        core_optimizer_name(cfg->optim.optimizer), cfg->optim.beta1, cfg->optim.beta2,
        cfg->optim.eps);
    for (int i = 0; i < a->n_inject && len < (int)sizeof meta; i++)
        len += snprintf(meta + len, sizeof meta - len, "%s%d", i ? "," : "", a->inject[i]);
    if (len < (int)sizeof meta) len += snprintf(meta + len, sizeof meta - len, "\n");
    if (gpt && len < (int)sizeof meta)
        len += snprintf(meta + len, sizeof meta - len,
                        "kind=gpt\nvocab=%d\nseq_len=%d\nwidth=%d\nlayers=%d\nheads=%d\nattention=%s\n",
                        m->num_classes, m->seq_len, m->width, m->gpt_layers, m->gpt_heads,
                        core_attention_name(m->attention));
    if (len >= (int)sizeof meta) return error_set(ERROR_BAD_USAGE, "meta.txt too long");
    return write_file(a->dump_dir, "meta.txt", meta, strlen(meta));
}

// argv.txt: the command line exactly as given (not as parsed), one argument per line, so
// that the twin's own parse can catch a parsing bug here that meta.txt would echo.
static int write_argv(const Args *a)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/argv.txt", a->dump_dir);
    FILE *f = fopen(path, "w");
    if (!f) return error_set(ERROR_IO, "cannot write %s: %s", path, strerror(errno));
    for (int i = 1; i < a->argc; i++) fprintf(f, "%s\n", a->argv[i]);
    return fclose(f) == 0 ? 0 : error_set(ERROR_IO, "cannot write %s", path);
}

// Copies the BN running statistics (count floats) to host memory dst, from the device on
// CUDA (after the work queued on the core's stream).
static int bn_stats_get(Core *core, bool on_device, float *dst, size_t count)
{
    float *src;
    void *stream;
    if (count == 0) return 0;
    if (core_buffers(core, &src, &stream) != 0) return -1;
    if (!on_device) {
        memcpy(dst, src, count * sizeof *dst);
        return 0;
    }
    CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream));
    CUDA_TRY(cudaMemcpy(dst, src, count * sizeof *dst, cudaMemcpyDeviceToHost));
    return 0;
}

// The batch of the dump: the training batch and a held-out batch of as many images (the
// synthetic samples after it), in host memory; a GPT's: token batches (seq_len > 0).
typedef struct DumpBatches {
    CoreBatch train, held_out;
    size_t image_floats; // per image
    int seq_len;         // GPT: tokens (and labels) per sequence; 0: images
} DumpBatches;

// images.bin and labels.bin (prefix ""), or eval_images.bin and eval_labels.bin (prefix
// "eval_"); a GPT's tokens.bin and labels.bin, int32[n][seq_len] each.
static int write_batch(const char *dir, const char *prefix, const CoreBatch *b,
                       const DumpBatches *d)
{
    char images[64], labels[64];
    snprintf(images, sizeof images, "%s%s.bin", prefix, d->seq_len ? "tokens" : "images");
    snprintf(labels, sizeof labels, "%slabels.bin", prefix);
    if (d->seq_len) {
        size_t bytes = (size_t)b->n * d->seq_len * sizeof(int32_t);
        if (write_file(dir, images, b->tokens, bytes)) return -1;
        return write_file(dir, labels, b->labels, bytes);
    }
    if (write_file(dir, images, b->images, (size_t)b->n * d->image_floats * sizeof(float))) return -1;
    return write_file(dir, labels, b->labels, (size_t)b->n * sizeof(int32_t));
}

// Writes the initial state and the first gradient, runs check_steps steps (with the
// injected infs), writes their LR, loss, scale and skip flag, the parameters and BN running
// statistics after them and the eval of the held-out batch.
static int dump(Core *core, const CoreConfig *cfg, const DumpBatches *d, const Args *a)
{
    const CoreBatch *b = &d->train;
    size_t np = core_param_count(core), ns = core_buffer_count(core);
    float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g);
    float *bn = malloc((ns ? ns : 1) * sizeof *bn);
    float *steps = malloc((size_t)a->check_steps * 4 * sizeof *steps);
    CoreStats st;
    int rc = -1;
    if (!p || !g || !bn || !steps) {
        error_set(ERROR_OUT_OF_MEMORY, "steptime: no memory for the dump");
        goto out;
    }
    if (mkdir(a->dump_dir, 0755) != 0 && errno != EEXIST) {
        error_set(ERROR_BAD_USAGE, "cannot create %s: %s", a->dump_dir, strerror(errno));
        goto out;
    }
    if (core_stats(core, &st)) goto out;
    bool on_device = st.backend == CORE_BACKEND_CUDA;
    float grad_loss = 0.0f;
    if (write_argv(a) || core_params_get(core, p, np) || bn_stats_get(core, on_device, bn, ns) ||
        core_loss_grad(core, b, &grad_loss, g) || // training-mode BN; running stats untouched
        core_params_set(core, p, np) || // core_loss_grad leaves momentum alone; to be sure
        write_file(a->dump_dir, "params.bin", p, np * sizeof *p) ||
        write_file(a->dump_dir, "bn_stats.bin", bn, ns * sizeof *bn) ||
        write_batch(a->dump_dir, "", b, d) || write_batch(a->dump_dir, "eval_", &d->held_out, d) ||
        write_file(a->dump_dir, "grads.bin", g, np * sizeof *g))
        goto out;
    int skipped_before = 0;
    for (int s = 0; s < a->check_steps; s++) {
        CoreStepResult r;
        if (injected_at(a, s) && core_inject_grad_fault(core, INFINITY)) goto out;
        if (core_step(core, b, &r) || core_stats(core, &st)) goto out;
        float *row = steps + (size_t)s * 4;
        row[0] = r.lr;
        row[1] = r.loss;
        row[2] = st.loss_scale;
        row[3] = st.skipped_steps > skipped_before ? 1.0f : 0.0f;
        skipped_before = st.skipped_steps;
    }
    CoreEvalResult ev;
    if (write_file(a->dump_dir, "steps.bin", steps, (size_t)a->check_steps * 4 * sizeof *steps) ||
        core_params_get(core, p, np) || write_file(a->dump_dir, "after.bin", p, np * sizeof *p) ||
        bn_stats_get(core, on_device, bn, ns) ||
        write_file(a->dump_dir, "bn_stats_after.bin", bn, ns * sizeof *bn) ||
        core_eval(core, &d->held_out, &ev) ||
        write_meta(core, cfg, b, a, grad_loss, &(EvalFigures){ev.loss, ev.accuracy}))
        goto out;
    rc = 0;
out:
    free(p);
    free(g);
    free(bn);
    free(steps);
    return rc;
}

// The timed steps' batch on the device (--input device on CUDA): uploaded once, ready
// before the first step (the core's stream does not order against these copies).
typedef struct DeviceBatch { float *images; int32_t *labels; size_t bytes; } DeviceBatch;

static int device_batch_make(DeviceBatch *d, const CoreBatch *host, size_t image_floats)
{
    size_t ib = (size_t)host->n * image_floats * sizeof(float), lb = (size_t)host->n * sizeof(int32_t);
    *d = (DeviceBatch){NULL, NULL, ib + lb};
    CUDA_TRY(cudaMalloc((void **)&d->images, ib));
    CUDA_TRY(cudaMalloc((void **)&d->labels, lb));
    CUDA_TRY(cudaMemcpy(d->images, host->images, ib, cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(d->labels, host->labels, lb, cudaMemcpyHostToDevice));
    CUDA_TRY(cudaDeviceSynchronize());
    return 0;
}

static void device_batch_free(DeviceBatch *d)
{
    if (d->images) cudaFree(d->images);
    if (d->labels) cudaFree(d->labels);
    *d = (DeviceBatch){0};
}

int main(int argc, char **argv)
{
    CoreConfig cfg;
    Args a = {.preset = "tiny", .steps = 10, .warmup = 2, .check_steps = 3, .argc = argc, .argv = argv};
    int rc = parse(argc, argv, &cfg, &a);
    if (rc) return rc > 0 ? 0 : 1;
    if (a.threads > 0) core_cpu_set_threads(a.threads);

    const CoreModelConfig *m = &cfg.model;
    // a GPT's batch: n sequences of seq_len tokens and as many labels (synth_tokens_batch)
    bool gpt = m->kind == CORE_MODEL_GPT;
    size_t image_floats = gpt ? 0 : (size_t)m->in_channels * m->image_size * m->image_size;
    size_t per_label = gpt ? (size_t)m->seq_len : 1; // labels per sample
    float *images = gpt ? NULL : malloc((size_t)cfg.batch_size * image_floats * sizeof *images);
    int32_t *labels = malloc((size_t)cfg.batch_size * per_label * sizeof *labels);
    int32_t *tokens = gpt ? malloc((size_t)cfg.batch_size * per_label * sizeof *tokens) : NULL;
    float *eval_images = NULL;
    int32_t *eval_labels = NULL, *eval_tokens = NULL;
    DeviceBatch dev = {0};
    double *ms = malloc((size_t)a.steps * sizeof *ms), *cpu_ms = malloc((size_t)a.steps * sizeof *ms);
    Core *core = NULL;
    int status = 1;
    if ((gpt ? !tokens : !images) || !labels || !ms || !cpu_ms) {
        fprintf(stderr, "steptime: out of memory\n");
        goto out;
    }
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, 0.5f, cfg.seed};
    SynthTokens token_task = {0};
    if (gpt) {
        token_task = synth_tokens_task(m->num_classes, m->seq_len, cfg.seed);
        if (isnan(synth_tokens_batch(&token_task, 0, cfg.batch_size, tokens, labels))) {
            fprintf(stderr, "steptime: out of memory\n");
            goto out;
        }
    } else {
        synth_batch(&task, 0, cfg.batch_size, images, labels);
    }
    CoreBatch batch = {.images = images, .labels = labels, .n = cfg.batch_size, .memory = CORE_MEMORY_HOST,
                       .tokens = tokens};
    if (core_create(&cfg, &core) != 0) {
        fprintf(stderr, "steptime: cannot create the core: %s\n", error_message());
        goto out;
    }
    if (a.dump_dir) {
        if (gpt)
            eval_tokens = malloc((size_t)cfg.batch_size * per_label * sizeof *eval_tokens);
        else
            eval_images = malloc((size_t)cfg.batch_size * image_floats * sizeof *eval_images);
        eval_labels = malloc((size_t)cfg.batch_size * per_label * sizeof *eval_labels);
        if ((gpt ? !eval_tokens : !eval_images) || !eval_labels) {
            fprintf(stderr, "steptime: out of memory\n");
            goto out;
        }
        if (gpt) { // batch 1 of the token task: the held-out sequences
            if (isnan(synth_tokens_batch(&token_task, 1, cfg.batch_size, eval_tokens, eval_labels))) {
                fprintf(stderr, "steptime: out of memory\n");
                goto out;
            }
        } else {
            synth_batch(&task, (uint64_t)cfg.batch_size, cfg.batch_size, eval_images, eval_labels);
        }
        DumpBatches d = {batch, {.images = eval_images, .labels = eval_labels, .n = cfg.batch_size, .memory = CORE_MEMORY_HOST,
                                 .tokens = eval_tokens},
                         image_floats, gpt ? m->seq_len : 0};
        if (dump(core, &cfg, &d, &a) != 0) {
            fprintf(stderr, "steptime: dump failed: %s\n", error_message());
            goto out;
        }
        core_free(core); // timing starts again from the initial state
        core = NULL;
        if (core_create(&cfg, &core) != 0) {
            fprintf(stderr, "steptime: cannot create the core: %s\n", error_message());
            goto out;
        }
    }
    CoreStats st;
    if (core_stats(core, &st) != 0) {
        fprintf(stderr, "steptime: core_stats failed: %s\n", error_message());
        goto out;
    }
    bool input_device = st.backend == CORE_BACKEND_CUDA && !a.input_host;
    if (input_device && gpt) { // core_create refuses a gpt on CUDA today; when it runs one:
        fprintf(stderr, "steptime: a gpt batch on the device is not supported yet (--input host)\n");
        goto out;
    }
    if (input_device) {
        if (device_batch_make(&dev, &batch, image_floats) != 0) {
            fprintf(stderr, "steptime: cannot put the batch on the device: %s\n", error_message());
            goto out;
        }
        batch = (CoreBatch){.images = dev.images, .labels = dev.labels, .n = cfg.batch_size, .memory = CORE_MEMORY_DEVICE};
    }
    for (int s = 0; s < a.warmup + a.steps; s++) {
        double t0 = 1e3 * clock_seconds(), c0 = 1e3 * clock_process_cpu_seconds();
        CoreStepResult r;
        if (core_step(core, &batch, &r) != 0 || core_sync(core) != 0) {
            fprintf(stderr, "steptime: step %d failed: %s\n", s, error_message());
            goto out;
        }
        if (s >= a.warmup) {
            ms[s - a.warmup] = 1e3 * clock_seconds() - t0;
            cpu_ms[s - a.warmup] = 1e3 * clock_process_cpu_seconds() - c0;
        }
        if (r.loss_ready && !isfinite(r.loss)) {
            fprintf(stderr, "steptime: step %d: the loss is not finite (%g)\n", s, r.loss);
            goto out;
        }
    }
    if (core_stats(core, &st) != 0) {
        fprintf(stderr, "steptime: core_stats failed: %s\n", error_message());
        goto out;
    }
    double sum = 0.0;
    for (int s = 0; s < a.steps; s++) sum += ms[s];
    qsort(ms, (size_t)a.steps, sizeof *ms, cmp_double);
    qsort(cpu_ms, (size_t)a.steps, sizeof *cpu_ms, cmp_double);
    int h = a.steps / 2;
    double median = a.steps % 2 ? ms[h] : 0.5 * (ms[h - 1] + ms[h]);
    double cpu_median = a.steps % 2 ? cpu_ms[h] : 0.5 * (cpu_ms[h - 1] + cpu_ms[h]);
    printf("steptime: preset %s backend %s threads %d batch %d precision %s layout %s "
           "zero_grad %s readback %s steps %d median_ms %.3f min_ms %.3f mean_ms %.3f images_per_s %.1f "
           "cpu_median_ms %.3f input %s batch_mib %.1f peak_mib %.1f device_used_mib %.1f\n",
           a.preset, core_backend_name(st.backend),
           st.backend == CORE_BACKEND_CPU_REF ? 1 : core_cpu_threads(), cfg.batch_size,
           core_precision_name(cfg.precision), core_layout_name(cfg.layout),
           core_zero_grad_name(cfg.zero_grad), core_readback_name(cfg.readback), a.steps, median, ms[0], sum / a.steps,
           1e3 * cfg.batch_size / median, cpu_median, input_device ? "device" : "host",
           dev.bytes / 1048576.0, (st.peak_bytes + dev.bytes) / 1048576.0,
           st.device_used_bytes / 1048576.0);
    status = 0;
out:
    core_free(core);
    device_batch_free(&dev);
    free(images);
    free(labels);
    free(eval_images);
    free(eval_labels);
    free(tokens);
    free(eval_tokens);
    free(ms);
    free(cpu_ms);
    return status;
}
