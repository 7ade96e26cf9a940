// train_main.c: build/train, a command-line trainer over the shared core.
// Trains a preset model with every practice of the core as a flag; prints step, loss,
// accuracy, loss scale and images/s, then the accuracy on held-out data; runs on the
// CPU when there is no GPU. `train --help` lists every flag.
// Data (--data): `images` (default) is an ImageFolder of JPEGs, the loaders' generated
// dataset or the user's own, decoded and augmented by the loader (loaders/) at the
// model's image size and split into train and held-out files; `tensor` is the
// synthetic plane-wave task of kernels/synth.h, generated in memory.
// This file is the run: data, the core (and DDP), the training loop and its log, the
// held-out evaluation and the summary; the flags are train_options.c.
#include <stdio.h>
#include <stdlib.h>

#include "bench/driver/image_data.h"
#include "bench/tools/train_gpt.h"
#include "bench/tools/train_options.h"
#include "dist/env.h"
#include "dist/sampler.h"
#include "dist/train_ddp.h"
#include "kernels/gpu_device.h"
#include "kernels/clock.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/synth.h"

// --verbose: the cuDNN algorithms and math types chosen for each convolution shape.
static void print_conv_algos(Core *core, CoreBackend backend);

// What the first step planned (a core plans when its first batch arrives): the memory plan's
// arena and, with --verbose, the convolution algorithms; then the log's column header.
static void print_plan(Core *core, const CoreConfig *cfg, bool verbose)
{
    CoreStats st;
    if (core_stats(core, &st) != 0) {
        fprintf(stderr, "train: cannot read the core's figures: %s\n", error_message());
        return;
    }
    printf("train: pointwise %s, activations and their gradients %.1f MiB (memory plan)",
           core_pointwise_name(cfg->pointwise), st.activation_bytes / 1048576.0);
    if (st.checkpointed_segments > 0)
        printf(", %d segments recomputed in backward (activation checkpointing)", st.checkpointed_segments);
    printf("\n");
    if (verbose) print_conv_algos(core, st.backend);
    printf("%8s %10s %9s %10s %12s %12s\n", "step", "loss", "accuracy", "lr", "loss_scale",
           "images/s");
}

static void print_conv_algos(Core *core, CoreBackend backend)
{
    CoreConvAlgoInfo info[64];
    int n = core_conv_algos(core, info, 64);
    if (n < 0) {
        fprintf(stderr, "train: cannot list the convolution algorithms: %s\n", error_message());
        return;
    }
    if (n == 0) {
        printf("conv algorithms: none (the %s backend does not use cuDNN)\n",
               core_backend_name(backend));
        return;
    }
    printf("conv algorithms (cuDNN, per shape: input NxCxHxW -> K channels, RxR kernel, stride):\n");
    for (int i = 0; i < n; i++)
        printf("  %dx%dx%dx%d -> %d, %dx%d s%d, %d layer%s: fwd %s (%s), bwd_data %s (%s), "
               "bwd_filter %s (%s)\n", info[i].n, info[i].c, info[i].h, info[i].w, info[i].k,
               info[i].r, info[i].r, info[i].stride, info[i].layers, info[i].layers == 1 ? "" : "s",
               info[i].fwd, info[i].fwd_math, info[i].bwd_data, info[i].bwd_data_math,
               info[i].bwd_filter, info[i].bwd_filter_math);
}

// Scans the dataset (generating the default one on first use), makes the model's
// class count and input channels follow it, splits it and creates both loaders.
// Runs before core_create, so loader workers are forked before CUDA is initialised.
// The image data of this run: the generated dataset or --data-dir, split, with loaders.
// Sets the model's class count (and RGB input) from the dataset. 0, or -1 (printed).
// DDP (env != NULL): the training loader reads this rank's shard, batch/world at a time.
static int open_images(const TrainArgs *a, CoreConfig *cfg, const DistEnv *env, ImageData *d)
{
    CoreModelConfig *m = &cfg->model;
    int batch = cfg->batch_size;
    if (env && dist_local_batch(cfg->batch_size, env->world, env->rank, &batch) != 0) {
        fprintf(stderr, "train: --ddp: %s\n", error_message());
        return -1;
    }
    ImageDataConfig ic = image_data_default_config(m->image_size, batch);
    if (env) {
        ic.world = env->world;
        ic.rank = env->rank;
    }
    ic.data_dir = a->data_dir;
    ic.dataset_preset = a->dataset_preset;
    ic.seed = cfg->seed;
    ic.num_workers = a->num_workers;
    ic.skip_bad_files = a->skip_bad_files;
    ic.timeout_ms = a->loader_timeout_s * 1000;
    ic.max_image_pixels = a->max_image_pixels;
    ic.holdout = a->holdout;
    ic.crop_scale_min = a->crop_scale_min;
    if (image_data_open(&ic, d) != 0) {
        fprintf(stderr, "train: %s\n", error_message());
        return -1;
    }
    if (d->preset_note[0]) printf("train: %s\n", d->preset_note);
    if (a->classes_set && m->num_classes != d->all.num_classes) {
        fprintf(stderr, "train: --classes %d does not match the dataset's %d classes in %s "
                        "(the model's class count follows the dataset; drop --classes)\n",
                m->num_classes, d->all.num_classes, d->root);
        return -1;
    }
    m->num_classes = d->all.num_classes;
    m->in_channels = 3; // the loader delivers RGB
    printf("train: dataset %s: %d classes, %lld train + %lld held-out images, "
           "%d loader workers\n", d->root, d->all.num_classes, (long long)d->train.num_samples,
           (long long)d->heldout.num_samples, a->num_workers);
    if (d->all.num_irregular > 0) {  // counted and named, never silently dropped
        char summary[4096];
        dataset_summary(&d->all, summary, sizeof summary);
        printf("train: dataset %s\n", summary);
    }
    return 0;
}

// Sums one evaluated batch into running totals weighted by its size.
static int eval_batch(Core *core, const CoreBatch *batch, double *loss_sum, double *correct,
                      int64_t *seen)
{
    CoreEvalResult er;
    if (core_eval(core, batch, &er) != 0) {
        fprintf(stderr, "train: eval failed: %s\n", error_message());
        return -1;
    }
    *loss_sum += (double)er.loss * batch->n;
    *correct += (double)er.accuracy * batch->n;
    *seen += batch->n;
    return 0;
}

int main(int argc, char **argv)
{
    CoreConfig cfg;
    TrainArgs a = {.preset = "tiny", .steps = 200, .log_every = 20, .eval_batches = -1,
                   .noise = 0.5f, .target_accuracy = -1.0f, .data = TRAIN_DATA_IMAGES,
                   .num_workers = 2, .loader_timeout_s = LOADER_PROGRAM_TIMEOUT_S,
                   .holdout = 0.2f, .crop_scale_min = 0.25f};
    int rc = train_parse_args(argc, argv, &cfg, &a);
    if (rc != 0) return rc > 0 ? 0 : 1;
    if (cfg.model.kind == CORE_MODEL_GPT) return train_gpt(&cfg, &a);  // the token task
    bool images = a.data == TRAIN_DATA_IMAGES;
    if (!images && a.eval_batches < 0) a.eval_batches = 4;
    if (a.ddp) {  // --nproc-per-node: start the ranks and wait for them; a rank goes on
        int code = 0;
        bool cpu = cfg.backend == CORE_BACKEND_CPU || cfg.backend == CORE_BACKEND_CPU_REF ||
                   (cfg.backend == CORE_BACKEND_AUTO && !gpu_device_available(NULL, 0));
        int launched = dist_train_launch(a.nproc_per_node, cpu, argc, argv, &code);
        if (launched < 0) fprintf(stderr, "train: %s\n", error_message());
        if (launched != 0) return launched < 0 ? 1 : code;
        const char *local_rank = getenv("LOCAL_RANK") ? getenv("LOCAL_RANK") : getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        if (!cpu && local_rank) cfg.device = atoi(local_rank);  // one GPU per rank
    }

    // The loader (and its workers) first: fork must come before CUDA is initialised.
    ImageData data = {0};
    Core *core = NULL;
    DistTrain *ddp = NULL;  // --ddp
    float *images_buf = NULL;
    int32_t *labels_buf = NULL;
    int status = 1;
    DistEnv env;  // --ddp: who this rank is, before its loader forks its workers
    if (a.ddp && dist_env_detect(&env) != 0) {
        fprintf(stderr, "train: --ddp: %s\n", error_message());
        return 1;
    }
    if (images && open_images(&a, &cfg, a.ddp ? &env : NULL, &data) != 0) goto out;
    if (core_create(&cfg, &core) != 0) {
        fprintf(stderr, "train: cannot create the core: %s\n", error_message());
        goto out;
    }
    if (a.ddp && dist_train_create(core, &cfg, cfg.batch_size, &ddp) != 0) {
        fprintf(stderr, "train: --ddp: %s\n", error_message());
        goto out;
    }
    if (ddp) printf("train: DDP rank %d of %d, %d images per rank\n", dist_train_rank(ddp), dist_train_world(ddp),
                    cfg.batch_size / dist_train_world(ddp));
    CoreStats st;
    core_stats(core, &st);
    const CoreModelConfig *m = &cfg.model;
    printf("train: preset %s data %s backend %s precision %s layout %s zero_grad %s "
           "conv_algo %s readback %s batch %d image %dx%d classes %d params %zu optimizer %s\n", a.preset,
           images ? "images" : "tensor", core_backend_name(st.backend),
           core_precision_name(cfg.precision), core_layout_name(cfg.layout),
           core_zero_grad_name(cfg.zero_grad), core_conv_algo_name(cfg.conv_algo),
           core_readback_name(cfg.readback), cfg.batch_size, m->image_size, m->image_size,
           m->num_classes, st.param_count, core_optimizer_name(cfg.optim.optimizer));
    if (st.backend == CORE_BACKEND_CPU)
        printf("train: cpu threads %d (%s)\n", core_cpu_threads(), core_cpu_kernels());
    else if (st.backend == CORE_BACKEND_CPU_REF)
        printf("train: cpu-ref threads 1 (plain C reference)\n");

    SynthTask task = {m->in_channels, m->image_size, m->num_classes, a.noise, cfg.seed};
    CoreBatch batch = {0};
    if (!images) {
        size_t img = (size_t)m->in_channels * m->image_size * m->image_size;
        images_buf = malloc((size_t)cfg.batch_size * img * sizeof(float));
        labels_buf = malloc((size_t)cfg.batch_size * sizeof(int32_t));
        if (!images_buf || !labels_buf) {
            fprintf(stderr, "train: out of memory (host): a batch of %d images is %.1f GiB\n",
                    cfg.batch_size, (double)cfg.batch_size * img * sizeof(float) / 1073741824.0);
            goto out;
        }
        batch = (CoreBatch){.images = images_buf, .labels = labels_buf, .n = cfg.batch_size, .memory = CORE_MEMORY_HOST};
    }

    double t0 = clock_seconds(), t_log = t0;
    int64_t images_seen = 0, since_log = 0;
    for (int s = 0; s < a.steps; s++) {
        if (images) {
            if (image_data_next(&data, &batch) != 0) {
                fprintf(stderr, "train: %s\n", error_message());
                goto out;
            }
        } else {
            synth_batch(&task, (uint64_t)s, cfg.batch_size, images_buf, labels_buf);
        }
        CoreStepResult r;
        CoreBatch local = batch;  // images: the loader already gave this rank's share
        if (ddp ? (!images && dist_train_local_batch(ddp, &batch, &local) != 0) || dist_train_step(ddp, &local, &r) != 0
                : core_step(core, &batch, &r) != 0) {
            fprintf(stderr, "train: step %d failed%s: %s\n", s,
                    error_kind() == ERROR_OUT_OF_MEMORY ? " (out of memory)" : "", error_message());
            goto out;
        }
        if (s == 0) print_plan(core, &cfg, a.verbose);  // the core plans on its first step
        int global_n = ddp && images ? batch.n * dist_train_world(ddp) : batch.n;  // every rank's
        since_log += global_n;
        images_seen += global_n;
        if ((s + 1) % a.log_every == 0 || s + 1 == a.steps) {
            core_sync(core);
            double t = clock_seconds();
            core_stats(core, &st);
            char loss[32] = "-", acc[32] = "-";
            // --ddp: the global batch's loss and accuracy (the mean over the ranks, whose
            // batches are equal), not rank 0's local ones; every rank takes part
            float shown[3] = {r.loss_ready ? r.loss : 0.0f, r.loss_ready ? r.accuracy : 0.0f, r.loss_ready ? 1.0f : 0.0f};
            if (ddp && dist_train_global_mean(ddp, shown, 3) != 0) {
                fprintf(stderr, "train: step %d: the global loss: %s\n", s + 1, error_message());
                goto out;
            }
            if (shown[2] > 0.999f) {  // every rank had its loss read
                snprintf(loss, sizeof loss, "%.4f", shown[0]);
                snprintf(acc, sizeof acc, "%.3f", shown[1]);
            }
            printf("%8d %10s %9s %10.5f %12g %12.1f\n", s + 1, loss, acc, r.lr, st.loss_scale,
                   since_log / (t - t_log));
            fflush(stdout);
            t_log = t;
            since_log = 0;
        }
    }
    double train_s = clock_seconds() - t0;

    // Held-out data: files no training epoch reads, or tensor indices beyond any step.
    double loss_sum = 0.0, correct = 0.0;
    int64_t seen = 0;
    if (images) {
        if (a.eval_batches != 0 &&
            image_data_eval(&data, core, a.eval_batches, &loss_sum, &correct, &seen) != 0) {
            fprintf(stderr, "train: %s\n", error_message());
            goto out;
        }
    } else {
        for (int e = 0; e < a.eval_batches; e++) {
            synth_batch(&task, (uint64_t)1000000000 + e, cfg.batch_size, images_buf, labels_buf);
            if (eval_batch(core, &batch, &loss_sum, &correct, &seen) != 0) goto out;
        }
    }
    core_stats(core, &st);
    float acc = seen ? (float)(correct / seen) : 0.0f;
    printf("train: %d steps in %.2f s (%.1f images/s), skipped %d, loss scale %g, "
           "autotune %.1f ms (cache hits %d, misses %d), peak %.1f MiB",
           a.steps, train_s, images_seen / train_s, st.skipped_steps, st.loss_scale,
           st.autotune_ms, st.algo_cache_hits, st.algo_cache_misses, st.peak_bytes / 1048576.0);
    if (st.backend == CORE_BACKEND_CUDA)
        printf(" (device memory used %.1f MiB, libraries included)", st.device_used_bytes / 1048576.0);
    printf("\n");
    if (images) {
        LoaderStats ls, es;
        loader_get_stats(data.train_loader, &ls);
        loader_get_stats(data.eval_loader, &es);
        printf("loader: %d workers, %lld epochs started, waited %.2f s for batches, "
               "skipped %lld bad files in training (%lld distinct, each read at most once) "
               "and %lld held out\n", a.num_workers, (long long)data.epoch + 1, ls.wait_seconds,
               (long long)ls.skipped, (long long)ls.bad_files, (long long)es.skipped);
        if (ls.last_skip[0]) printf("loader: last skipped in training: %s\n", ls.last_skip);
        if (es.last_skip[0]) printf("loader: last skipped held out: %s\n", es.last_skip);
    }
    if (seen)
        printf("eval: loss %.4f accuracy %.4f on %lld held-out images\n", loss_sum / seen, acc,
               (long long)seen);
    status = 0;
    if (a.target_accuracy >= 0.0f && acc < a.target_accuracy) {
        fprintf(stderr, "train: accuracy %.4f below target %.4f\n", acc, a.target_accuracy);
        status = 2;
    }
out:
    dist_train_free(ddp);
    core_free(core);
    image_data_close(&data);
    free(images_buf);
    free(labels_buf);
    return status;
}
