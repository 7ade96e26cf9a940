// train_options.c: the `train` tool's command line (train_options.h): its --help text, the
// flag table, strict number parsing (no "12x", "-1" or overflow silently accepted), and
// the checks of flags against each other. The training loop is train_main.c.
#include "bench/tools/train_options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/loader.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: train [flags]\n"
        "Trains a CNN (or MLP) with the shared core on JPEG images (by default a generated,\n"
        "learnable dataset) or on a synthetic tensor task, then reports held-out accuracy.\n"
        "\nData:\n"
        "  --data D               images | tensor (default images).\n"
        "                         images: an ImageFolder of JPEGs (DIR/<class>/*.jpg), decoded\n"
        "                         and augmented (random-resized crop, flip, normalise) by the\n"
        "                         loader at the model's --image-size; each class's files are\n"
        "                         split (fixed seed) into train and held-out, and the held-out\n"
        "                         files, never trained on, are evaluated (resized whole) at the\n"
        "                         end. The model's class count is the dataset's.\n"
        "                         tensor: plane waves generated in memory (kernels/synth.h);\n"
        "                         held-out batches are indices no training step uses.\n"
        "  --data-dir DIR         images: train on your own ImageFolder root instead of the\n"
        "                         generated dataset\n"
        "  --dataset-preset NAME  images: generated dataset tiny | small | bench | large | imagenet\n"
        "                         (default small for model inputs up to 64x64, else bench);\n"
        "                         written once to $BENCH_CACHE_DIR (default cache/datasets,\n"
        "                         relative to the working folder), reused afterwards\n"
        "  --num-workers N        images: loader worker processes; 0 decodes in this process\n"
        "                         (default 2). Workers are forked before CUDA is touched.\n"
        "  --skip-bad-files       images: skip (and count) bad files instead of stopping with\n"
        "                         an error that names the file: undecodable JPEGs, ones over\n"
        "                         --max-image-pixels, and .jpg names that are not regular\n"
        "                         files (a FIFO, a socket, a dangling link; never opened). A\n"
        "                         skipped file is remembered: later epochs skip it unread\n"
        "  --max-image-pixels N   images: the largest JPEG (width x height) decoded; a file\n"
        "                         whose header claims more is bad input, rejected before any\n"
        "                         allocation (default 0: PIL's limit, 178956970 pixels)\n"
        "  --loader-timeout S     images: seconds a batch may take before training stops with\n"
        "                         an error naming the stuck worker's pid, the batch and the\n"
        "                         epoch (with workers; default %d; 0: wait forever)\n"
        "  --holdout F            images: fraction of each class's files held out (default 0.2)\n"
        "  --crop-scale-min F     images: smallest area fraction of the random-resized crop\n"
        "                         (default 0.25; torchvision's is 0.08)\n"
        "\nWorkload:\n"
        "  --preset NAME          tiny | mlp | small | medium | resnet18 (default tiny);\n"
        "                         transformers gpt-tiny | gpt-mini | gpt2-small (train on the\n"
        "                         generated token task of kernels/synth.h: the loss is shown\n"
        "                         beside the task's floor; --data does not apply)\n"
        "  --steps N              training steps (default 200)\n"
        "  --batch-size N         images per step (default: the preset's)\n"
        "  --image-size N         override the preset's image size\n"
        "  --classes N            override the preset's class count (images: must equal the\n"
        "                         dataset's, which is used anyway)\n"
        "  --width N              override the preset's first-stage channels (gpt: model width)\n"
        "  --seq-len N            gpt: tokens per sequence (default: the preset's)\n"
        "  --layers N             gpt: transformer blocks (default: the preset's)\n"
        "  --heads N              gpt: attention heads, dividing --width (default: the preset's)\n"
        "  --tokens FILE          gpt: train on your token file instead of the generated task:\n"
        "                         uint16 tokens, raw (nanoGPT's train.bin) or with llm.c's\n"
        "                         256-int header; windows from its first 90%%, held-out ones\n"
        "                         from the last 10%%; every token < --classes (the vocabulary)\n"
        "  --noise F              tensor: noise std of the synthetic images (default 0.5)\n"
        "  --seed N               weight and data seed (default 1)\n"
        "  --log-every N          print every N steps (default 20)\n"
        "  --eval-batches N       held-out batches evaluated at the end (tensor default 4;\n"
        "                         images default: every held-out file; 0: no evaluation)\n"
        "  --target-accuracy F    exit with status 2 if final accuracy is below F\n"
        "\nPractices (config fields of the core):\n"
        "  --backend B            auto | cpu | cpu-ref | cuda (default auto: cuda if a GPU is\n"
        "                         usable, else cpu). cpu: OpenBLAS GEMMs, threads, SIMD loops;\n"
        "                         cpu-ref: the plain-C single-threaded reference (the oracle)\n"
        "  --threads N            CPU backend threads, as torch.set_num_threads (default:\n"
        "                         the machine's cores)\n"
        "  --device N             CUDA device ordinal (default 0)\n"
        "  --precision P          on the GPU (the CPU computes in fp32 throughout):\n"
        "                         fp32: PyTorch's default: cuDNN convolutions may use TF32\n"
        "                           (cudnn.allow_tf32 = True), cuBLAS GEMMs stay strict fp32\n"
        "                           (cuda.matmul.allow_tf32 = False) (the default)\n"
        "                         fp32_strict: no TF32 anywhere\n"
        "                         tf32: TF32 tensor-core math in convolutions and GEMMs\n"
        "                         fp16: fp16 compute, fp32 master weights, dynamic loss\n"
        "                           scaling with GradScaler's rules\n"
        "                         bf16: bf16 compute, fp32 master weights, no scaling\n"
        "  --layout L             nchw | nhwc activation layout on the GPU (default nchw)\n"
        "  --zero-grad Z          memset (memset + accumulate) | set_to_none (first write\n"
        "                         overwrites) (default memset)\n"
        "  --pointwise P          separate (BN, add and ReLU each a kernel, PyTorch eager) |\n"
        "                         fused (BN+ReLU and add+ReLU one op each) (default separate)\n"
        "  --checkpoint-segments K  activation checkpointing, as checkpoint_sequential(units, K)\n"
        "                         over the stem (gpt: embedding), each block and the head:\n"
        "                         0 off (default);\n"
        "                         1024: a checkpoint around every unit but the head\n"
        "  --conv-algo A          heuristic | autotune (time candidates per shape, cached)\n"
        "  --readback R           every_step (sync on the loss each step, like .item()) |\n"
        "                         deferred (accumulate on the device) (default every_step)\n"
        "  --readback-interval K  steps between loss reads when deferred (default 10)\n"
        "  --lr F                 base learning rate\n"
        "  --optimizer O          sgd | adamw (torch.optim.AdamW) (default sgd; gpt presets adamw)\n"
        "  --attention A          gpt: unfused (the T x T probabilities kept for backward) |\n"
        "                         fused (online softmax, FlashAttention-style) (default unfused)\n"
        "  --momentum F           SGD momentum (default 0.9)\n"
        "  --weight-decay F       weight decay: SGD's L2, AdamW's decoupled (default 5e-4)\n"
        "  --beta1 F              AdamW beta1 (default 0.9)\n"
        "  --beta2 F              AdamW beta2 (default 0.999)\n"
        "  --eps F                AdamW eps (default 1e-8)\n"
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
        "  --deterministic        only deterministic cuDNN algorithms\n"
        "                         (torch.backends.cudnn.deterministic = True)\n"
        "  --cuda-graph           CUDA backend: capture the whole training step as a CUDA\n"
        "                         graph once per batch shape and replay it (torch.cuda.graphs);\n"
        "                         the first step of a shape runs op by op. An error on the CPU\n"
        "                         backends and with --ddp (gradient hooks)\n"
        "  --verbose              print the cuDNN algorithm and math type used for every\n"
        "                         convolution shape after the first step\n"
        "\nDistributed (dist/):\n"
        "  --ddp                  DistributedDataParallel: this process is one rank of the\n"
        "                         world of torchrun variables (RANK, WORLD_SIZE, LOCAL_RANK,\n"
        "                         MASTER_ADDR, MASTER_PORT), mpirun or srun; --batch-size is\n"
        "                         the global batch, each rank takes batch/world of it. CPU\n"
        "                         ranks all-reduce over Open MPI (launch with mpirun), GPU\n"
        "                         ranks over NCCL, GPU = LOCAL_RANK (--device is ignored).\n"
        "                         --data images: each rank's loader (its own --num-workers)\n"
        "                         reads its DistributedSampler shard of every epoch (the\n"
        "                         one-process order, padded to a multiple of the world);\n"
        "                         --data tensor: rank r takes slice r of each global batch.\n"
        "                         The loss and accuracy logged every --log-every steps are\n"
        "                         the global batch's: the mean over the ranks (one\n"
        "                         all-reduce of 3 scalars per logged step), not rank 0's\n"
        "                         local loss\n"
        "  --nproc-per-node N     start N local ranks of this command with --ddp (mpirun on\n"
        "                         the CPU backend; forked ranks + TCP rendezvous on GPUs),\n"
        "                         a world of their own: inherited launcher variables (an\n"
        "                         sbatch script's SLURM_*, a parent torchrun's RANK,\n"
        "                         WORLD_SIZE, MASTER_*) are not passed on to them\n"
        "  --help                 this text\n", LOADER_PROGRAM_TIMEOUT_S);
}

enum {
    OPT_PRESET = 256, OPT_STEPS, OPT_BATCH, OPT_IMAGE, OPT_CLASSES, OPT_WIDTH, OPT_NOISE,
    OPT_SEED, OPT_LOG, OPT_EVAL, OPT_TARGET, OPT_BACKEND, OPT_DEVICE, OPT_PRECISION,
    OPT_LAYOUT, OPT_ZERO, OPT_ALGO, OPT_READBACK, OPT_INTERVAL, OPT_LR, OPT_MOMENTUM, OPT_WD,
    OPT_DECAY, OPT_WARMUP, OPT_STEP_SIZE, OPT_STEP_GAMMA, OPT_LINEAR, OPT_REF_BATCH, OPT_CLIP,
    OPT_INIT_SCALE, OPT_GROWTH, OPT_WORKSPACE, OPT_MIN_LR, OPT_DATA, OPT_DATA_DIR,
    OPT_DATASET_PRESET, OPT_NUM_WORKERS, OPT_SKIP_BAD, OPT_HOLDOUT, OPT_CROP_SCALE,
    OPT_DETERMINISTIC, OPT_VERBOSE, OPT_THREADS, OPT_LOADER_TIMEOUT, OPT_MAX_PIXELS, OPT_HELP,
    OPT_DDP, OPT_NPROC, OPT_POINTWISE, OPT_CUDA_GRAPH, OPT_CHECKPOINT, OPT_OPTIMIZER,
    OPT_BETA1, OPT_BETA2, OPT_EPS, OPT_SEQ_LEN, OPT_LAYERS, OPT_HEADS, OPT_ATTENTION, OPT_TOKENS,
};

static const struct option options[] = {
    {"preset", 1, 0, OPT_PRESET}, {"steps", 1, 0, OPT_STEPS}, {"batch-size", 1, 0, OPT_BATCH},
    {"image-size", 1, 0, OPT_IMAGE}, {"classes", 1, 0, OPT_CLASSES}, {"width", 1, 0, OPT_WIDTH},
    {"noise", 1, 0, OPT_NOISE}, {"seed", 1, 0, OPT_SEED}, {"log-every", 1, 0, OPT_LOG},
    {"eval-batches", 1, 0, OPT_EVAL}, {"target-accuracy", 1, 0, OPT_TARGET},
    {"backend", 1, 0, OPT_BACKEND}, {"device", 1, 0, OPT_DEVICE},
    {"precision", 1, 0, OPT_PRECISION}, {"layout", 1, 0, OPT_LAYOUT},
    {"zero-grad", 1, 0, OPT_ZERO}, {"conv-algo", 1, 0, OPT_ALGO}, {"pointwise", 1, 0, OPT_POINTWISE},
    {"readback", 1, 0, OPT_READBACK}, {"readback-interval", 1, 0, OPT_INTERVAL},
    {"lr", 1, 0, OPT_LR}, {"momentum", 1, 0, OPT_MOMENTUM}, {"weight-decay", 1, 0, OPT_WD},
    {"lr-decay", 1, 0, OPT_DECAY}, {"warmup", 1, 0, OPT_WARMUP},
    {"step-size", 1, 0, OPT_STEP_SIZE}, {"step-gamma", 1, 0, OPT_STEP_GAMMA},
    {"linear-scaling", 0, 0, OPT_LINEAR}, {"reference-batch", 1, 0, OPT_REF_BATCH},
    {"clip-norm", 1, 0, OPT_CLIP}, {"init-scale", 1, 0, OPT_INIT_SCALE},
    {"growth-interval", 1, 0, OPT_GROWTH}, {"workspace-mb", 1, 0, OPT_WORKSPACE},
    {"min-lr", 1, 0, OPT_MIN_LR}, {"data", 1, 0, OPT_DATA}, {"data-dir", 1, 0, OPT_DATA_DIR},
    {"dataset-preset", 1, 0, OPT_DATASET_PRESET}, {"num-workers", 1, 0, OPT_NUM_WORKERS},
    {"skip-bad-files", 0, 0, OPT_SKIP_BAD}, {"holdout", 1, 0, OPT_HOLDOUT},
    {"crop-scale-min", 1, 0, OPT_CROP_SCALE}, {"deterministic", 0, 0, OPT_DETERMINISTIC},
    {"verbose", 0, 0, OPT_VERBOSE}, {"loader-timeout", 1, 0, OPT_LOADER_TIMEOUT},
    {"max-image-pixels", 1, 0, OPT_MAX_PIXELS},
    {"threads", 1, 0, OPT_THREADS}, {"help", 0, 0, OPT_HELP},
    {"ddp", 0, 0, OPT_DDP}, {"nproc-per-node", 1, 0, OPT_NPROC},
    {"cuda-graph", 0, 0, OPT_CUDA_GRAPH}, {"checkpoint-segments", 1, 0, OPT_CHECKPOINT},
    {"optimizer", 1, 0, OPT_OPTIMIZER}, {"beta1", 1, 0, OPT_BETA1}, {"beta2", 1, 0, OPT_BETA2},
    {"eps", 1, 0, OPT_EPS}, {"seq-len", 1, 0, OPT_SEQ_LEN}, {"layers", 1, 0, OPT_LAYERS},
    {"heads", 1, 0, OPT_HEADS}, {"attention", 1, 0, OPT_ATTENTION}, {"tokens", 1, 0, OPT_TOKENS},
    {0, 0, 0, 0},
};

static int parse_fail(const char *flag, const char *value)
{
    fprintf(stderr, "train: bad value '%s' for --%s (see --help)\n", value, flag);
    return -1;
}

// A whole decimal integer in [min, INT_MAX]; -1 (message printed) for anything else,
// so that "abc", "12x", "-1" or an overflow never silently becomes 0 or a wrapped value.
static int parse_int(const char *flag, const char *v, int min, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < min || x > INT_MAX) {
        fprintf(stderr, "train: bad value '%s' for --%s: need an integer >= %d (see --help)\n",
                v, flag, min);
        return -1;
    }
    *out = (int)x;
    return 0;
}

// A whole decimal integer in [min, INT64_MAX]; -1 (message printed) otherwise.
static int parse_int64(const char *flag, const char *v, int64_t min, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < min) {
        fprintf(stderr, "train: bad value '%s' for --%s: need an integer >= %lld (see --help)\n",
                v, flag, (long long)min);
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

// A whole finite number >= min; -1 (message printed) for "abc", nan, inf or less than min.
static int parse_float(const char *flag, const char *v, float min, float *out)
{
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < min) {
        fprintf(stderr, "train: bad value '%s' for --%s: need a finite number >= %g (see --help)\n",
                v, flag, min);
        return -1;
    }
    *out = x;
    return 0;
}

int train_parse_args(int argc, char **argv, CoreConfig *cfg, TrainArgs *a)
{
    // The preset goes first so that other flags override its fields.
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--preset") == 0 && i + 1 < argc) a->preset = argv[i + 1];
        else if (strncmp(argv[i], "--preset=", 9) == 0) a->preset = argv[i] + 9;
    }
    if (core_config_preset(cfg, a->preset) != 0) return parse_fail("preset", a->preset);
    bool steps_set = false;
    // The flags that only set a number (at least min; the floats' min is 0).
    const struct { int opt; int *field; int min; } int_flags[] = {
        {OPT_BATCH, &cfg->batch_size, 1}, {OPT_IMAGE, &cfg->model.image_size, 1},
        {OPT_CHECKPOINT, &cfg->checkpoint_segments, 0},
        {OPT_WIDTH, &cfg->model.width, 1}, {OPT_LOG, &a->log_every, 1},
        {OPT_SEQ_LEN, &cfg->model.seq_len, 1}, {OPT_LAYERS, &cfg->model.gpt_layers, 1},
        {OPT_HEADS, &cfg->model.gpt_heads, 1},
        {OPT_EVAL, &a->eval_batches, 0}, {OPT_DEVICE, &cfg->device, 0},
        {OPT_INTERVAL, &cfg->readback_interval, 1}, {OPT_WARMUP, &cfg->optim.warmup_steps, 0},
        {OPT_STEP_SIZE, &cfg->optim.step_size, 1}, {OPT_REF_BATCH, &cfg->optim.reference_batch, 1},
        {OPT_GROWTH, &cfg->scaler.growth_interval, 1}, {OPT_NUM_WORKERS, &a->num_workers, 0},
    };
    const struct { int opt; float *field; } float_flags[] = {
        {OPT_NOISE, &a->noise}, {OPT_TARGET, &a->target_accuracy}, {OPT_LR, &cfg->optim.base_lr},
        {OPT_MOMENTUM, &cfg->optim.momentum}, {OPT_WD, &cfg->optim.weight_decay},
        {OPT_STEP_GAMMA, &cfg->optim.step_gamma}, {OPT_CLIP, &cfg->optim.clip_norm},
        {OPT_INIT_SCALE, &cfg->scaler.init_scale}, {OPT_MIN_LR, &cfg->optim.min_lr},
        {OPT_HOLDOUT, &a->holdout}, {OPT_CROP_SCALE, &a->crop_scale_min},
        {OPT_BETA1, &cfg->optim.beta1}, {OPT_BETA2, &cfg->optim.beta2}, {OPT_EPS, &cfg->optim.eps},
    };
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        const char *v = optarg;
        const char *name = "?";
        for (const struct option *o = options; o->name; o++)
            if (o->val == opt) name = o->name;
        bool numeric = false;
        for (size_t i = 0; i < sizeof int_flags / sizeof *int_flags; i++)
            if (int_flags[i].opt == opt) {
                if (parse_int(name, v, int_flags[i].min, int_flags[i].field)) return -1;
                numeric = true;
            }
        for (size_t i = 0; i < sizeof float_flags / sizeof *float_flags; i++)
            if (float_flags[i].opt == opt) {
                if (parse_float(name, v, 0.0f, float_flags[i].field)) return -1;
                numeric = true;
            }
        if (numeric) continue;
        switch (opt) {
        case OPT_PRESET: break;
        case OPT_STEPS: if (parse_int(name, v, 1, &a->steps)) return -1; steps_set = true; break;
        case OPT_CLASSES:
            if (parse_int(name, v, 2, &cfg->model.num_classes)) return -1;
            a->classes_set = true;
            break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            cfg->seed = strtoull(v, &end, 10);
            if (end == v || *end || errno || strchr(v, '-')) {
                fprintf(stderr, "train: bad value '%s' for --seed: need an integer >= 0 "
                                "(see --help)\n", v);
                return -1;
            }
            break;
        }
        case OPT_BACKEND: if (core_backend_parse(v, &cfg->backend)) return parse_fail(name, v); break;
        case OPT_THREADS: {
            int threads;
            if (parse_int(name, v, 1, &threads)) return -1;
            core_cpu_set_threads(threads);
            break;
        }
        case OPT_PRECISION: if (core_precision_parse(v, &cfg->precision)) return parse_fail(name, v); break;
        case OPT_LAYOUT: if (core_layout_parse(v, &cfg->layout)) return parse_fail(name, v); break;
        case OPT_ZERO: if (core_zero_grad_parse(v, &cfg->zero_grad)) return parse_fail(name, v); break;
        case OPT_POINTWISE: if (core_pointwise_parse(v, &cfg->pointwise)) return parse_fail(name, v); break;
        case OPT_ALGO: if (core_conv_algo_parse(v, &cfg->conv_algo)) return parse_fail(name, v); break;
        case OPT_READBACK: if (core_readback_parse(v, &cfg->readback)) return parse_fail(name, v); break;
        case OPT_DECAY: if (core_lr_decay_parse(v, &cfg->optim.decay)) return parse_fail(name, v); break;
        case OPT_OPTIMIZER: if (core_optimizer_parse(v, &cfg->optim.optimizer)) return parse_fail(name, v); break;
        case OPT_ATTENTION: if (core_attention_parse(v, &cfg->model.attention)) return parse_fail(name, v); break;
        case OPT_LINEAR: cfg->optim.linear_scaling = true; break;
        case OPT_WORKSPACE: {
            int mb;
            if (parse_int(name, v, 0, &mb)) return -1;
            cfg->workspace_limit = (size_t)mb << 20;
            break;
        }
        case OPT_DATA:
            if (strcmp(v, "images") == 0) a->data = TRAIN_DATA_IMAGES;
            else if (strcmp(v, "tensor") == 0) a->data = TRAIN_DATA_TENSOR;
            else return parse_fail(name, v);
            break;
        case OPT_DATA_DIR: a->data_dir = v; break;
        case OPT_TOKENS: a->tokens_file = v; break;
        case OPT_DATASET_PRESET: a->dataset_preset = v; break;
        case OPT_SKIP_BAD: a->skip_bad_files = true; break;
        case OPT_LOADER_TIMEOUT:
            // seconds, in milliseconds an int must hold
            if (parse_int(name, v, 0, &a->loader_timeout_s)) return -1;
            if (a->loader_timeout_s > INT_MAX / 1000) return parse_fail(name, v);
            break;
        case OPT_MAX_PIXELS: if (parse_int64(name, v, 0, &a->max_image_pixels)) return -1; break;
        case OPT_DETERMINISTIC: cfg->deterministic = true; break;
        case OPT_CUDA_GRAPH: cfg->cuda_graph = true; break;
        case OPT_VERBOSE: a->verbose = true; break;
        case OPT_DDP: a->ddp = true; break;
        case OPT_NPROC: if (parse_int(name, v, 1, &a->nproc_per_node)) return -1; a->ddp = true; break;
        case OPT_HELP: usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) { fprintf(stderr, "train: unexpected argument '%s'\n", argv[optind]); return -1; }
    if (steps_set) cfg->optim.total_steps = a->steps;  // the cosine ends with the run
    if (a->steps <= 0 || a->log_every <= 0 || a->eval_batches < -1) {
        fprintf(stderr, "train: --steps and --log-every must be > 0, --eval-batches >= 0\n");
        return -1;
    }
    if (a->target_accuracy >= 0.0f && a->eval_batches == 0) {
        fprintf(stderr, "train: --target-accuracy needs an evaluation, and --eval-batches 0 "
                        "evaluates nothing\n");
        return -1;
    }
    if (a->data == TRAIN_DATA_TENSOR && (a->data_dir || a->dataset_preset)) {
        fprintf(stderr, "train: --data-dir and --dataset-preset need --data images\n");
        return -1;
    }
    if (a->tokens_file && cfg->model.kind != CORE_MODEL_GPT) {
        fprintf(stderr, "train: --tokens needs a gpt preset (--preset gpt-tiny, ...)\n");
        return -1;
    }
    if (a->data_dir && a->dataset_preset) {
        fprintf(stderr, "train: give --data-dir or --dataset-preset, not both\n");
        return -1;
    }
    if (a->num_workers < 0 || !(a->holdout > 0.0f && a->holdout < 1.0f) ||
        !(a->crop_scale_min > 0.0f && a->crop_scale_min <= 1.0f)) {
        fprintf(stderr, "train: need --num-workers >= 0, 0 < --holdout < 1, "
                        "0 < --crop-scale-min <= 1\n");
        return -1;
    }
    return 0;
}
