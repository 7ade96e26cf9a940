// test_train_cli.c: the build/train program: --help names every practice and data flag,
// a bad value (unknown name, non-numeric, negative, nan, a model too large) is refused,
// the tiny preset on the CPU reaches the stated held-out accuracy on the tensor task and
// on the generated JPEG dataset (--target-accuracy makes train exit non-zero when it
// does not), and a missing folder, a corrupt JPEG
// and a class count that contradicts the dataset are clear errors naming the culprit; a
// FIFO named .jpg is named (and skipped with --skip-bad-files) without being opened, and
// a stopped loader worker ends training after --loader-timeout, naming its pid.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/dataset_gen.h"
#include "kernels/error.h"
#include "tests/support.h"

#define TINY_STEPS 120
#define TINY_TARGET "0.90"
// The default data with the tiny model: the "small" generated JPEG preset (10 classes,
// 240 train and 60 held-out files, read at 16x16) and 2 loader workers. Measured on 2
// cores: 200 steps in ~11 s give 0.90 held-out accuracy (0.85..0.90 over seeds 1..3;
// 100 steps give 0.75..0.85, 400 give 0.88..0.98).
#define IMAGES_STEPS 200
#define IMAGES_TARGET "0.80"

// Runs `train --help` and asserts that it mentions every string in flags.
static void assert_help_mentions(const char *const *flags, size_t count)
{
    char *dir = test_temp_dir();
    assert_non_null(dir);
    assert_int_equal(test_run("'%s/train' --help > '%s/help.txt' 2>&1", test_build_dir(), dir), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/help.txt", dir);
    char *help = test_read_file(path, NULL);
    assert_non_null(help);
    for (size_t i = 0; i < count; i++)
        if (!strstr(help, flags[i])) fail_msg("--help does not mention %s", flags[i]);
    free(help);
    test_remove_tree(dir);
    free(dir);
}

static void test_help_lists_every_practice(void **state)
{
    (void)state;
    const char *flags[] = {"--precision", "fp16", "bf16", "tf32", "--layout", "nhwc",
                           "--zero-grad", "set_to_none", "--conv-algo", "autotune",
                           "--readback", "deferred", "--readback-interval", "--batch-size",
                           "--lr", "--lr-decay", "cosine", "--warmup", "--step-size",
                           "--linear-scaling", "--clip-norm", "--momentum", "--weight-decay",
                           "--backend", "--preset", "--init-scale", "--growth-interval",
                           "cpu-ref", "--threads", "--checkpoint-segments", "--optimizer", "adamw",
                           "--beta1", "--beta2", "--eps", "gpt-tiny", "gpt2-small", "--seq-len",
                           "--layers", "--heads", "--attention", "fused", "--tokens"};
    assert_help_mentions(flags, sizeof flags / sizeof flags[0]);
}

static void test_bad_value_is_refused(void **state)
{
    (void)state;
    assert_int_equal(test_run("'%s/train' --precision fp8 > /dev/null 2>&1", test_build_dir()), 1);
    assert_int_equal(test_run("'%s/train' --preset huge > /dev/null 2>&1", test_build_dir()), 1);
    // a target that nothing is evaluated against is an error, not "accuracy 0 below target"
    assert_int_equal(test_run("'%s/train' --data tensor --eval-batches 0 --target-accuracy 0.5 "
                              "> /dev/null 2>&1", test_build_dir()), 1);
}

// Runs train and returns its exit status; its stdout and stderr go to <dir>/out.txt.
static int run_train(const char *dir, const char *flags)
{
    return test_run("'%s/train' --backend cpu --preset tiny %s > '%s/out.txt' 2>&1",
                    test_build_dir(), flags, dir);
}

static bool output_has(const char *dir, const char *what)
{
    char path[512];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    char *out = test_read_file(path, NULL);
    bool found = out && strstr(out, what);
    if (!found) printf("train output lacks '%s':\n%s\n", what, out ? out : "(none)");
    free(out);
    return found;
}

// Non-numeric, trailing-garbage, negative, overflowing and non-finite values are refused
// with a message naming the flag and the value, never read as 0 or as a wrapped number.
static void test_bad_number_is_refused(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    const char *bad[][2] = {
        {"--steps abc", "'abc' for --steps"}, {"--steps -1", "'-1' for --steps"},
        {"--steps 99999999999", "'99999999999' for --steps"},
        {"--batch-size 0", "'0' for --batch-size"}, {"--batch-size 12x", "'12x' for --batch-size"},
        {"--lr nan", "'nan' for --lr"}, {"--lr inf", "'inf' for --lr"},
        {"--momentum abc", "'abc' for --momentum"}, {"--seed -1", "'-1' for --seed"},
        {"--workspace-mb -1", "'-1' for --workspace-mb"},
        {"--clip-norm -1", "'-1' for --clip-norm"}, {"--num-workers abc", "'abc' for --num-workers"},
        {"--eval-batches abc", "'abc' for --eval-batches"},
        {"--target-accuracy nan", "'nan' for --target-accuracy"},
        {"--threads 0", "'0' for --threads"}, {"--threads two", "'two' for --threads"},
        {"--loader-timeout -1", "'-1' for --loader-timeout"},
        {"--loader-timeout 2m", "'2m' for --loader-timeout"},
        {"--loader-timeout 99999999", "'99999999' for --loader-timeout"},
        {"--max-image-pixels -5", "'-5' for --max-image-pixels"},
        {"--max-image-pixels 1e9", "'1e9' for --max-image-pixels"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char flags[256];
        snprintf(flags, sizeof flags, "--data tensor %s", bad[i][0]);
        if (run_train(dir, flags) != 1) fail_msg("train %s was not refused", flags);
        assert_true(output_has(dir, bad[i][1]));
    }
    test_remove_tree(dir);
    free(dir);
}

// A model whose per-sample tensors do not fit an int is refused before any allocation
// (an MLP's input size used to wrap around); one that merely does not fit in memory is
// a clear out-of-memory error.
static void test_too_large_is_a_clear_error(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_int_equal(run_train(dir, "--data tensor --steps 2 --image-size 100000"), 1);
    assert_true(output_has(dir, "image too large"));
    assert_int_equal(run_train(dir, "--data tensor --steps 2 --preset mlp --image-size 37838 "
                                    "--batch-size 1"), 1);
    assert_true(output_has(dir, "image too large"));
    assert_int_equal(run_train(dir, "--data tensor --steps 2 --width 1073741824"), 1);
    assert_true(output_has(dir, "model too large"));
    assert_int_equal(run_train(dir, "--data tensor --steps 2 --batch-size 100000000"), 1);
    assert_true(output_has(dir, "out of memory"));
    test_remove_tree(dir);
    free(dir);
}

// --threads N sets the fast CPU backend's threads and --backend cpu-ref runs the plain-C
// reference on one thread; the header names both.
static void test_cpu_backends_and_threads(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_non_null(dir);
    assert_int_equal(run_train(dir, "--data tensor --steps 2 --eval-batches 1 --threads 2"), 0);
    assert_true(output_has(dir, "backend cpu precision"));
    assert_true(output_has(dir, "train: cpu threads 2 (OpenBLAS"));
    assert_int_equal(run_train(dir, "--data tensor --steps 2 --eval-batches 1 --backend cpu-ref"), 0);
    assert_true(output_has(dir, "backend cpu-ref precision"));
    assert_true(output_has(dir, "train: cpu-ref threads 1"));
    test_remove_tree(dir);
    free(dir);
}

static void test_tiny_reaches_accuracy_on_cpu(void **state)
{
    (void)state;
    int rc = test_run("'%s/train' --backend cpu --preset tiny --steps %d --log-every 40 "
                      "--data tensor --target-accuracy " TINY_TARGET, test_build_dir(),
                      TINY_STEPS);
    assert_int_equal(rc, 0);
}

// A transformer preset trains on the generated token task, its loss beside the task's floor,
// with the fused attention; a bad attention form or a head count that does not divide the
// width is refused, naming it.
static void test_gpt_tiny_trains_on_cpu(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_int_equal(run_train(dir, "--preset gpt-tiny --steps 300 --log-every 100 "
                                    "--attention fused --target-accuracy 0.25"), 0);
    assert_true(output_has(dir, "data markov-tokens"));
    assert_true(output_has(dir, "attention fused"));
    assert_true(output_has(dir, "(floor "));
    assert_true(output_has(dir, "next-token accuracy"));
    assert_int_equal(run_train(dir, "--preset gpt-tiny --steps 1 --attention flash"), 1);
    assert_true(output_has(dir, "'flash' for --attention"));
    assert_int_equal(run_train(dir, "--preset gpt-tiny --steps 1 --heads 3"), 1);
    assert_true(output_has(dir, "multiple of gpt_heads"));
    test_remove_tree(dir);
    free(dir);
}

// Writes count uint16 tokens (token i = pattern(i)) to dir/name, after llm.c's header when
// llmc; returns the path (static buffer).
static const char *write_tokens(const char *dir, const char *name, size_t count, bool llmc, int max)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (llmc) {
        int32_t header[256] = {20240520, 1, (int32_t)count};
        assert_int_equal(fwrite(header, sizeof header, 1, f), 1);
    }
    for (size_t i = 0; i < count; i++) {
        uint16_t t = (uint16_t)((i * 7 + (i / 5) % 3) % (size_t)max);
        unsigned char le[2] = {(unsigned char)(t & 0xff), (unsigned char)(t >> 8)};
        assert_int_equal(fwrite(le, 2, 1, f), 1);
    }
    fclose(f);
    return path;
}

// A user's token file (raw uint16, and with llm.c's header) trains a gpt preset: a
// predictable sequence is learnt; a truncated file, a token outside the vocabulary, a file
// too short for a window, a missing one and --tokens with a CNN preset are refused, naming why.
static void test_gpt_trains_on_a_token_file(void **state)
{
    (void)state;
    char *dir = test_temp_dir(), flags[700];
    for (int llmc = 0; llmc < 2; llmc++) {
        snprintf(flags, sizeof flags, "--preset gpt-tiny --steps 100 --log-every 50 --tokens '%s' "
                 "--target-accuracy 0.9", write_tokens(dir, "t.bin", 40000, llmc, 50));
        assert_int_equal(run_train(dir, flags), 0);
        assert_true(output_has(dir, llmc ? "(llm.c): 40000 tokens" : "(raw uint16): 40000 tokens"));
        assert_true(output_has(dir, "floor unknown"));
    }
    snprintf(flags, sizeof flags, "--preset gpt-tiny --steps 1 --tokens '%s'", write_tokens(dir, "big.bin", 4000, false, 70) /* tokens up to 65 */);
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "token 65 is outside the model's vocabulary of 64 (give --classes 66"));
    snprintf(flags, sizeof flags, "--preset gpt-tiny --steps 1 --tokens '%s'", write_tokens(dir, "short.bin", 100, false, 50));
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "need a window of 65 tokens"));
    test_run("printf 'abc' > '%s/odd.bin'", dir);
    snprintf(flags, sizeof flags, "--preset gpt-tiny --steps 1 --tokens '%s/odd.bin'", dir);
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "not a whole number of uint16 tokens"));
    snprintf(flags, sizeof flags, "--preset gpt-tiny --steps 1 --tokens '%s/none.bin'", dir);
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "No such file"));
    snprintf(flags, sizeof flags, "--steps 1 --tokens '%s/t.bin'", dir);
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "--tokens needs a gpt preset"));
    test_remove_tree(dir);
    free(dir);
}

static void test_help_lists_data_flags(void **state)
{
    (void)state;
    const char *flags[] = {"--data ", "images", "tensor", "--data-dir", "--dataset-preset",
                           "--num-workers", "--skip-bad-files", "--holdout", "--crop-scale-min",
                           "BENCH_CACHE_DIR", "held-out", "--loader-timeout", "--max-image-pixels",
                           "FIFO"};
    assert_help_mentions(flags, sizeof flags / sizeof flags[0]);
}

// The default invocation (its defaults spelled out), with the generated JPEG dataset
// in a private cache.
static void test_tiny_reaches_accuracy_on_images(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_non_null(dir);
    int rc = test_run("cd '%s' && BENCH_CACHE_DIR='%s/cache' '%s/train' --backend cpu "
                      "--preset tiny --data images --dataset-preset small --num-workers 2 "
                      "--steps %d --log-every 50 --target-accuracy " IMAGES_TARGET
                      " > out.txt 2>&1; rc=$?; cat out.txt; exit $rc",
                      dir, dir, test_build_dir(), IMAGES_STEPS);
    assert_int_equal(rc, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    char *out = test_read_file(path, NULL);
    assert_non_null(out);
    assert_non_null(strstr(out, "240 train + 60 held-out images"));
    assert_non_null(strstr(out, "on 60 held-out images"));
    free(out);
    // The dataset went to BENCH_CACHE_DIR, not to the working folder's cache/.
    snprintf(path, sizeof path, "%s/cache/synth-c10-n30-64x64-q90-s1234/class_009", dir);
    assert_true(test_run("test -d '%s'", path) == 0);
    snprintf(path, sizeof path, "%s/cache/datasets", dir);
    assert_true(test_run("test -e '%s'", path) != 0);
    test_remove_tree(dir);
    free(dir);
}

// Writes the loaders' "tiny" preset (4 classes x 6 JPEGs) to <dir>/data.
static void make_tiny_dataset(const char *dir)
{
    DatasetGenConfig gen;
    char root[512];
    assert_int_equal(dataset_gen_preset("tiny", &gen), 0);
    snprintf(root, sizeof root, "%s/data", dir);
    if (dataset_generate(&gen, root) != 0) fail_msg("%s", error_message());
}

static void test_missing_dataset_is_named(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    char flags[512];
    snprintf(flags, sizeof flags, "--data-dir '%s/nowhere' --steps 2", dir);
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "nowhere"));
    assert_true(output_has(dir, "does not exist"));
    // Data flags that only mean something for images are refused with tensors.
    snprintf(flags, sizeof flags, "--data tensor --data-dir '%s' --steps 2", dir);
    assert_int_equal(run_train(dir, flags), 1);
    assert_int_equal(run_train(dir, "--data pictures"), 1);
    test_remove_tree(dir);
    free(dir);
}

// A corrupt JPEG stops training with an error naming it (through the workers), or is
// skipped and counted with --skip-bad-files.
static void test_corrupt_file_is_named_or_skipped(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    make_tiny_dataset(dir);
    char bad[512];
    snprintf(bad, sizeof bad, "%s/data/class_002/img_00003.jpg", dir);
    FILE *f = fopen(bad, "wb");
    assert_non_null(f);
    fputs("this is not a JPEG", f);
    fclose(f);
    char flags[1024];
    snprintf(flags, sizeof flags, "--data-dir '%s/data' --batch-size 8 --steps 10 "
             "--num-workers 2", dir);
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "img_00003.jpg"));
    snprintf(flags, sizeof flags, "--data-dir '%s/data' --batch-size 8 --steps 10 "
             "--num-workers 2 --skip-bad-files", dir);
    assert_int_equal(run_train(dir, flags), 0);
    assert_true(output_has(dir, "img_00003.jpg"));
    assert_true(output_has(dir, "eval: loss"));
    test_remove_tree(dir);
    free(dir);
}

// A FIFO named .jpg is counted and named in the scan summary and never opened (that
// would block: the command runs under `timeout`): without --skip-bad-files training
// stops with an error naming it; with it, it is skipped and counted, and training ends.
static void test_fifo_is_named_or_skipped(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    make_tiny_dataset(dir);
    assert_int_equal(test_run("mkfifo '%s/data/class_001/pipe.jpg'", dir), 0);
    char flags[1024];
    snprintf(flags, sizeof flags, "--data-dir '%s/data' --batch-size 8 --steps 10 "
             "--num-workers 2", dir);
    assert_int_equal(test_run("timeout 60 '%s/train' --backend cpu --preset tiny %s > '%s/out.txt' 2>&1",
                              test_build_dir(), flags, dir), 1);
    assert_true(output_has(dir, "pipe.jpg' is a FIFO, not a regular file"));
    snprintf(flags, sizeof flags, "--data-dir '%s/data' --batch-size 8 --steps 10 "
             "--num-workers 2 --skip-bad-files", dir);
    assert_int_equal(test_run("timeout 60 '%s/train' --backend cpu --preset tiny %s > '%s/out.txt' 2>&1",
                              test_build_dir(), flags, dir), 0);
    assert_true(output_has(dir, "1 of them not regular files"));
    assert_true(output_has(dir, "class_001/pipe.jpg (a FIFO)"));
    assert_true(output_has(dir, "eval: loss"));
    test_remove_tree(dir);
    free(dir);
}

// --max-image-pixels reaches the loaders' decoders: below the images' size every file is
// bad input, an error naming the limit; with --skip-bad-files nothing is left to train on.
static void test_max_image_pixels_reaches_the_loader(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    make_tiny_dataset(dir);
    char flags[1024];
    snprintf(flags, sizeof flags, "--data-dir '%s/data' --batch-size 8 --steps 2 --num-workers 2 "
             "--max-image-pixels 100", dir);
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "pixel limit of 100"));
    snprintf(flags, sizeof flags, "--data-dir '%s/data' --batch-size 8 --steps 2 --num-workers 0 "
             "--max-image-pixels 100000000", dir);
    assert_int_equal(run_train(dir, flags), 0);
    test_remove_tree(dir);
    free(dir);
}

// A stopped (SIGSTOP'd) loader worker: with --loader-timeout 1, train stops within
// seconds with an error naming the worker's pid, the batch and the epoch, instead of
// hanging; the stopped worker does not outlive it.
static void test_stopped_worker_times_out(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    make_tiny_dataset(dir);
    // train runs in the background under `timeout` (its child); once its loader workers
    // (train's children) exist, the first is stopped.
    int rc = test_run(
        "cd '%s' && { timeout 60 '%s/train' --backend cpu --preset tiny --data-dir data "
        "--batch-size 4 --steps 1000000 --log-every 100000 --num-workers 2 --loader-timeout 1 "
        "> out.txt 2>&1 & tp=$!; w=; for i in $(seq 100); do t=$(ps -o pid= --ppid $tp | head -n 1); "
        "[ -n \"$t\" ] && w=$(ps -o pid= --ppid $t | head -n 1 | tr -d ' '); "
        "[ -n \"$w\" ] && break; sleep 0.05; done; [ -n \"$w\" ] || exit 90; "
        "kill -STOP $w; echo $w > stopped.txt; wait $tp; echo $? > rc.txt; sleep 0.2; "
        "kill -0 $w 2>/dev/null && exit 91; exit 0; }", dir, test_build_dir());
    if (rc != 0) fail_msg("the script failed with %d (90: no worker found, 91: it survived)", rc);
    char path[512];
    snprintf(path, sizeof path, "%s/rc.txt", dir);
    char *text = test_read_file(path, NULL);
    assert_non_null(text);
    assert_int_equal(atoi(text), 1);  // an error, not the 124 of `timeout`
    free(text);
    snprintf(path, sizeof path, "%s/stopped.txt", dir);
    text = test_read_file(path, NULL);
    assert_non_null(text);
    char want[64];
    snprintf(want, sizeof want, "(pid %d, stopped (T))", atoi(text));
    free(text);
    assert_true(output_has(dir, "timed out after 1000 ms waiting for batch"));
    assert_true(output_has(dir, want));
    assert_true(output_has(dir, " of epoch "));
    test_remove_tree(dir);
    free(dir);
}

// The model's class count follows the dataset; a contradicting --classes is an error.
static void test_class_count_follows_dataset(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    make_tiny_dataset(dir);
    char flags[1024];
    snprintf(flags, sizeof flags, "--data-dir '%s/data' --batch-size 8 --steps 2 --classes 7",
             dir);
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "--classes 7 does not match the dataset's 4 classes"));
    snprintf(flags, sizeof flags, "--data-dir '%s/data' --batch-size 8 --steps 2 "
             "--num-workers 0 --classes 4", dir);
    assert_int_equal(run_train(dir, flags), 0);
    assert_true(output_has(dir, "classes 4"));
    assert_true(output_has(dir, "20 train + 4 held-out images"));
    snprintf(flags, sizeof flags, "--data-dir '%s/data' --steps 2", dir); // 20 < batch 32
    assert_int_equal(run_train(dir, flags), 1);
    assert_true(output_has(dir, "fewer than one batch"));
    test_remove_tree(dir);
    free(dir);
}

// --help says what the loss logged under --ddp is: the global batch's (the mean over the
// ranks, one all-reduce per logged step), not rank 0's local loss (tests/test_dist_ddp.c
// checks the logged values against one process).
static void test_help_says_ddp_logs_the_global_loss(void **state)
{
    (void)state;
    const char *says[] = {"logged every --log-every steps are", "the global batch's: the mean over the ranks",
                          "not rank 0's"};
    assert_help_mentions(says, sizeof says / sizeof says[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_lists_every_practice),
        cmocka_unit_test(test_help_says_ddp_logs_the_global_loss),
        cmocka_unit_test(test_bad_value_is_refused),
        cmocka_unit_test(test_bad_number_is_refused),
        cmocka_unit_test(test_too_large_is_a_clear_error),
        cmocka_unit_test(test_cpu_backends_and_threads),
        cmocka_unit_test(test_tiny_reaches_accuracy_on_cpu),
        cmocka_unit_test(test_gpt_tiny_trains_on_cpu),
        cmocka_unit_test(test_gpt_trains_on_a_token_file),
        cmocka_unit_test(test_help_lists_data_flags),
        cmocka_unit_test(test_tiny_reaches_accuracy_on_images),
        cmocka_unit_test(test_missing_dataset_is_named),
        cmocka_unit_test(test_corrupt_file_is_named_or_skipped),
        cmocka_unit_test(test_class_count_follows_dataset),
        cmocka_unit_test(test_fifo_is_named_or_skipped),
        cmocka_unit_test(test_max_image_pixels_reaches_the_loader),
        cmocka_unit_test(test_stopped_worker_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
