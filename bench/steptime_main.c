// steptime_main.c: build/steptime, the training-step time of one core config on one
// fixed synthetic batch, for side-by-side comparisons with other frameworks
// (scripts/torch_cpu_twin.py): untimed warm-up steps, then each timed step alone; prints
// the median, min and mean ms per step. The LR is constant (no warm-up or decay) so a
// twin can replay the same steps. cpu_median_ms is the process CPU time of a step (all
// threads, spinning included): at one thread, the step time without preemption. --dump DIR writes what a twin needs to start from the
// same state and to check it computed the same step:
//   DIR/params.bin   the initial parameters, float32, the order of kernels/model.h
//   DIR/images.bin   the batch, float32 (N, C, H, W);  DIR/labels.bin int32 (N)
//   DIR/after.bin    the parameters after --check-steps steps on that batch
//   DIR/meta.txt     key=value lines: preset, batch, lr, momentum, weight_decay, losses
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kernels/check.h"
#include "kernels/clock.h"
#include "kernels/clock.h"
#include "kernels/core.h"
#include "kernels/synth.h"

typedef struct Args {
    const char *preset, *dump_dir;
    int steps, warmup, check_steps, threads;
} Args;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: steptime [flags]\n"
        "Times training steps of the shared core on one fixed synthetic batch.\n"
        "  --preset NAME       tiny | mlp | small | medium | resnet18 (default tiny)\n"
        "  --backend B         auto | cpu | cpu-ref | cuda (default auto)\n"
        "  --threads N         CPU backend threads (default: the machine's cores)\n"
        "  --batch-size N      images per step (default: the preset's)\n"
        "  --zero-grad Z       memset | set_to_none (default memset)\n"
        "  --steps N           timed steps (default 10)\n"
        "  --warmup N          untimed steps first (default 2)\n"
        "  --dump DIR          write the initial parameters, the batch and the parameters\n"
        "                      after --check-steps steps to DIR (see the file's header)\n"
        "  --check-steps K     steps before DIR/after.bin (default 3)\n"
        "  --help              this text\n");
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
    static const struct option opts[] = {
        {"preset", 1, 0, 'p'}, {"backend", 1, 0, 'b'}, {"threads", 1, 0, 't'},
        {"batch-size", 1, 0, 'n'}, {"zero-grad", 1, 0, 'z'}, {"steps", 1, 0, 's'},
        {"warmup", 1, 0, 'w'}, {"dump", 1, 0, 'd'}, {"check-steps", 1, 0, 'k'},
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
        case 't': if (int_arg("threads", optarg, 1, &a->threads)) return -1; break;
        case 'n': if (int_arg("batch-size", optarg, 1, &cfg->batch_size)) return -1; break;
        case 'z':
            if (core_zero_grad_parse(optarg, &cfg->zero_grad)) {
                fprintf(stderr, "steptime: bad --zero-grad '%s'\n", optarg);
                return -1;
            }
            break;
        case 's': if (int_arg("steps", optarg, 1, &a->steps)) return -1; break;
        case 'w': if (int_arg("warmup", optarg, 0, &a->warmup)) return -1; break;
        case 'd': a->dump_dir = optarg; break;
        case 'k': if (int_arg("check-steps", optarg, 1, &a->check_steps)) return -1; break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "steptime: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

// Writes the initial state, runs check_steps steps, writes the parameters after them.
static int dump(Core *core, const CoreConfig *cfg, const CoreBatch *b, const Args *a,
                size_t image_floats)
{
    size_t np = core_param_count(core);
    float *p = malloc(np * sizeof *p);
    if (!p) return -1;
    mkdir(a->dump_dir, 0755);
    int rc = core_params_get(core, p, np);
    rc = rc || write_file(a->dump_dir, "params.bin", p, np * sizeof *p) ||
         write_file(a->dump_dir, "images.bin", b->images, (size_t)b->n * image_floats * sizeof(float)) ||
         write_file(a->dump_dir, "labels.bin", b->labels, (size_t)b->n * sizeof(int32_t));
    char meta[4096];
    int len = snprintf(meta, sizeof meta,
                       "preset=%s\nbatch=%d\nlr=%.9g\nmomentum=%.9g\nweight_decay=%.9g\n"
                       "check_steps=%d\nlosses=", a->preset, b->n, cfg->optim.base_lr,
                       cfg->optim.momentum, cfg->optim.weight_decay, a->check_steps);
    for (int s = 0; !rc && s < a->check_steps; s++) {
        CoreStepResult r;
        rc = core_step(core, b, &r);
        if (!rc && len < (int)sizeof meta)
            len += snprintf(meta + len, sizeof meta - len, "%s%.9g", s ? "," : "", r.loss);
    }
    if (!rc && len < (int)sizeof meta) snprintf(meta + len, sizeof meta - len, "\n");
    rc = rc || core_params_get(core, p, np) ||
         write_file(a->dump_dir, "after.bin", p, np * sizeof *p) ||
         write_file(a->dump_dir, "meta.txt", meta, strlen(meta));
    free(p);
    return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    CoreConfig cfg;
    Args a = {.preset = "tiny", .steps = 10, .warmup = 2, .check_steps = 3};
    int rc = parse(argc, argv, &cfg, &a);
    if (rc) return rc > 0 ? 0 : 1;
    if (a.threads > 0) core_cpu_set_threads(a.threads);
    cfg.optim.decay = CORE_LR_CONSTANT; // the same LR every step, for twins to replay
    cfg.optim.warmup_steps = 0;
    cfg.optim.linear_scaling = false;

    const CoreModelConfig *m = &cfg.model;
    size_t image_floats = (size_t)m->in_channels * m->image_size * m->image_size;
    float *images = malloc((size_t)cfg.batch_size * image_floats * sizeof *images);
    int32_t *labels = malloc((size_t)cfg.batch_size * sizeof *labels);
    double *ms = malloc((size_t)a.steps * sizeof *ms), *cpu_ms = malloc((size_t)a.steps * sizeof *ms);
    Core *core = NULL;
    int status = 1;
    if (!images || !labels || !ms || !cpu_ms) {
        fprintf(stderr, "steptime: out of memory\n");
        goto out;
    }
    SynthTask task = {m->in_channels, m->image_size, m->num_classes, 0.5f, cfg.seed};
    synth_batch(&task, 0, cfg.batch_size, images, labels);
    CoreBatch batch = {images, labels, cfg.batch_size, CORE_MEMORY_HOST};
    if (core_create(&cfg, &core) != 0) {
        fprintf(stderr, "steptime: cannot create the core: %s\n", error_message());
        goto out;
    }
    if (a.dump_dir) {
        if (dump(core, &cfg, &batch, &a, image_floats) != 0) {
            fprintf(stderr, "steptime: dump failed: %s\n", error_message());
            goto out;
        }
        core_free(core); // timing starts again from the initial state
        if (core_create(&cfg, &core) != 0) goto out;
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
    }
    CoreStats st;
    core_stats(core, &st);
    double sum = 0.0;
    for (int s = 0; s < a.steps; s++) sum += ms[s];
    qsort(ms, (size_t)a.steps, sizeof *ms, cmp_double);
    qsort(cpu_ms, (size_t)a.steps, sizeof *cpu_ms, cmp_double);
    int h = a.steps / 2;
    double median = a.steps % 2 ? ms[h] : 0.5 * (ms[h - 1] + ms[h]);
    double cpu_median = a.steps % 2 ? cpu_ms[h] : 0.5 * (cpu_ms[h - 1] + cpu_ms[h]);
    printf("steptime: preset %s backend %s threads %d batch %d zero_grad %s steps %d "
           "median_ms %.3f min_ms %.3f mean_ms %.3f images_per_s %.1f cpu_median_ms %.3f\n", a.preset,
           core_backend_name(st.backend), st.backend == CORE_BACKEND_CPU_REF ? 1 : core_cpu_threads(),
           cfg.batch_size, core_zero_grad_name(cfg.zero_grad), a.steps, median, ms[0],
           sum / a.steps, 1e3 * cfg.batch_size / median, cpu_median);
    status = 0;
out:
    core_free(core);
    free(images);
    free(labels);
    free(ms);
    free(cpu_ms);
    return status;
}
