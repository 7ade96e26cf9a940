// test_error.c: the one error store (kernels/error.h) and the kinds the modules give it:
// file:line and kind recorded, kept through a wrap and a restore, per thread; CUDA,
// cuBLAS and cuDNN statuses mapped to out of memory / no device / library; and what the
// loaders, the pinned-memory helpers and the core report for a missing file, bad bytes, a
// bad config, no device and a batch beyond the machine's memory.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/check.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"
#include "kernels/pinned.h"
#include "loaders/jpeg.h"
#include "loaders/loader.h"
#include "tests/support.h"

static void test_set_wrap_restore_clear(void **state)
{
    (void)state;
    error_clear();
    assert_int_equal(error_kind(), ERROR_NONE);
    assert_string_equal(error_message(), "");
    int line = __LINE__ + 1;
    assert_int_equal(error_set(ERROR_BAD_DATA, "file %s is %d bytes", "x.jpg", 3), -1);
    char want[128];
    snprintf(want, sizeof want, "tests/test_error.c:%d: file x.jpg is 3 bytes", line);
    assert_string_equal(error_message(), want);
    assert_int_equal(error_kind(), ERROR_BAD_DATA);
    assert_false(error_is_machine_limit());
    assert_int_equal(error_wrap("loading batch %d", 7), -1);
    assert_int_equal(error_kind(), ERROR_BAD_DATA);  // the kind survives the context
    assert_true(strncmp(error_message(), "loading batch 7: tests/test_error.c:", 36) == 0);
    char saved[2048];
    snprintf(saved, sizeof saved, "%s", error_message());
    error_clear();
    assert_int_equal(error_restore(ERROR_OUT_OF_MEMORY, saved), -1);
    assert_string_equal(error_message(), saved);
    assert_true(error_is_machine_limit());
    assert_string_equal(error_kind_name(ERROR_NO_DEVICE), "no device");
}

static void *other_thread(void *arg)
{
    (void)arg;
    error_set(ERROR_IO, "in another thread");
    return NULL;
}

static void test_each_thread_has_its_own(void **state)
{
    (void)state;
    error_set(ERROR_BAD_USAGE, "mine");
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, NULL);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_non_null(strstr(error_message(), "mine"));
}

static void test_library_statuses_map_to_kinds(void **state)
{
    (void)state;
    assert_int_equal(check_cuda_kind(cudaErrorMemoryAllocation), ERROR_OUT_OF_MEMORY);
    assert_int_equal(check_cuda_kind(cudaErrorNoDevice), ERROR_NO_DEVICE);
    assert_int_equal(check_cuda_kind(cudaErrorInsufficientDriver), ERROR_NO_DEVICE);
    assert_int_equal(check_cuda_kind(cudaErrorInvalidValue), ERROR_LIBRARY);
    check_cublas_failed(CUBLAS_STATUS_ALLOC_FAILED, "f.c", 1, "cublasCreate");
    assert_int_equal(error_kind(), ERROR_OUT_OF_MEMORY);
    check_cudnn_failed(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, "f.c", 2, "cudnnFind");
    assert_int_equal(error_kind(), ERROR_OUT_OF_MEMORY);
    check_cudnn_failed(CUDNN_STATUS_NOT_SUPPORTED, "f.c", 3, "cudnnConvolutionForward");
    assert_int_equal(error_kind(), ERROR_LIBRARY);
    assert_non_null(strstr(error_message(), "f.c:3: cudnnConvolutionForward: CUDNN_STATUS_NOT_SUPPORTED"));
}

static void test_modules_report_their_kinds(void **state)
{
    (void)state;
    char *dir = test_temp_dir();
    assert_non_null(dir);
    JpegDecoder *dec = jpeg_decoder_create();
    Image img = {0};
    char path[600];
    snprintf(path, sizeof path, "%s/missing.jpg", dir);
    assert_int_equal(jpeg_decode_file(dec, path, &img), -1);
    assert_int_equal(error_kind(), ERROR_IO);
    snprintf(path, sizeof path, "%s/text.jpg", dir);
    assert_true(test_write_file(dir, "text.jpg", "not a jpeg at all"));
    assert_int_equal(jpeg_decode_file(dec, path, &img), -1);
    assert_int_equal(error_kind(), ERROR_BAD_DATA);
    jpeg_decoder_destroy(dec);
    image_free(&img);

    LoaderConfig lc = loader_default_config(NULL, 0);
    Loader *l = NULL;
    assert_int_equal(loader_create(&lc, &l), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);

    CoreConfig cfg;
    assert_int_equal(core_config_preset(&cfg, "no_such_preset"), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.optim.momentum = -1.0f;
    Core *core = NULL;
    assert_int_equal(core_create(&cfg, &core), -1);
    assert_int_equal(error_kind(), ERROR_BAD_USAGE);
#ifndef __SANITIZE_ADDRESS__  // ASan reports a refused terabyte allocation as an error
    assert_int_equal(core_config_preset(&cfg, "tiny"), 0);
    cfg.backend = CORE_BACKEND_CPU;
    cfg.model.image_size = 224;
    cfg.batch_size = 1 << 20;  // terabytes of activations: more than any host here
    // core_create plans nothing; the first step plans its batch, and that fails before the
    // batch is read (its one image and label stand for a million)
    assert_int_equal(core_create(&cfg, &core), 0);
    float image[3 * 224 * 224] = {0};
    int32_t label = 0;
    CoreBatch huge = {.images = image, .labels = &label, .n = 1 << 20, .memory = CORE_MEMORY_HOST};
    error_clear();
    assert_int_equal(core_step(core, &huge, NULL), -1);
    printf("huge batch on the CPU: %s\n", error_message());
    assert_int_equal(error_kind(), ERROR_OUT_OF_MEMORY);
    core_free(core);
    core = NULL;
#else
    printf("skipped under AddressSanitizer: the terabyte batch (its refusal is an ASan report)\n");
#endif

    if (!gpu_device_available(NULL, 0)) {
        void *p = NULL;
        assert_int_equal(pinned_alloc(4096, &p), -1);
        assert_int_equal(error_kind(), ERROR_NO_DEVICE);
        assert_null(p);
    }
    test_remove_tree(dir);
    free(dir);
}

// cudaErrorInvalidDevice is a device-index bug, not a fact about the machine: a failure.
// A missing program (mpirun) has its own kind, neither a machine limit nor a skip.
static void test_invalid_device_fails_and_missing_tool_has_its_kind(void **state)
{
    (void)state;
    assert_int_equal(check_cuda_kind(cudaErrorInvalidDevice), ERROR_LIBRARY);
    error_set(ERROR_MISSING_TOOL, "mpirun not found");
    assert_int_equal(error_kind(), ERROR_MISSING_TOOL);
    assert_false(error_is_machine_limit());
    assert_string_equal(error_kind_name(ERROR_MISSING_TOOL), "missing tool");
    error_clear();
    // the caller's values (the GPU check sets both) come back afterwards, for the tests after this one
    char *check = getenv("SUITE_GPU_CHECK"), *expect = getenv("SUITE_EXPECT_GPU");
    check = check ? strdup(check) : NULL;
    expect = expect ? strdup(expect) : NULL;
    setenv("SUITE_GPU_CHECK", "1", 1);
    setenv("SUITE_EXPECT_GPU", "1", 1);
    assert_true(error_in_gpu_check());
    assert_true(error_expect_gpu());
    setenv("SUITE_GPU_CHECK", "0", 1);
    unsetenv("SUITE_EXPECT_GPU");
    assert_false(error_in_gpu_check());
    assert_false(error_expect_gpu());
    if (check) setenv("SUITE_GPU_CHECK", check, 1);
    else unsetenv("SUITE_GPU_CHECK");
    if (expect) setenv("SUITE_EXPECT_GPU", expect, 1);
    else unsetenv("SUITE_EXPECT_GPU");
    free(check);
    free(expect);
}

static void requires_gpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
}

// The tests' GPU skip (REQUIRE_GPU) fails under SUITE_EXPECT_GPU=1 on a machine without a
// usable GPU, and skips (exit 0) without it.
static void test_expect_gpu_fails_the_gpu_skip(void **state)
{
    (void)state;
    int plain = test_run("SUITE_EXPECT_GPU=0 /proc/%d/exe --child-require-gpu >/dev/null 2>&1", (int)getpid());
    int expected = test_run("SUITE_EXPECT_GPU=1 /proc/%d/exe --child-require-gpu >/dev/null 2>&1", (int)getpid());
    assert_int_equal(plain, 0);
    if (gpu_device_available(NULL, 0)) assert_int_equal(expected, 0);
    else assert_int_not_equal(expected, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child-require-gpu") == 0) {
        const struct CMUnitTest child[] = {cmocka_unit_test(requires_gpu)};
        return cmocka_run_group_tests(child, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_device_fails_and_missing_tool_has_its_kind),
        cmocka_unit_test(test_expect_gpu_fails_the_gpu_skip),
        cmocka_unit_test(test_set_wrap_restore_clear),
        cmocka_unit_test(test_each_thread_has_its_own),
        cmocka_unit_test(test_library_statuses_map_to_kinds),
        cmocka_unit_test(test_modules_report_their_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
