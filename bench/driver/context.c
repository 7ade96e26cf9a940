// context.c: device facts from the CUDA runtime (and NVML, loaded at run time for the
// driver version and current SM clock), library versions from each library's own API.
#include "bench/driver/context.h"

#include <ctype.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/core.h"
#include "kernels/gpu_device.h"

static void put(SuiteContext *c, const char *key, const char *value)
{
    if (c->count >= CONTEXT_MAX_KEYS) return;
    snprintf(c->keys[c->count], sizeof c->keys[0], "%s", key);
    snprintf(c->values[c->count], sizeof c->values[0], "%s", value);
    c->count++;
}

static void putf_int(SuiteContext *c, const char *key, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    put(c, key, buf);
}

static void version_string(char *out, size_t n, int major, int minor, int patch)
{
    snprintf(out, n, "%d.%d.%d", major, minor, patch);
}

// NVML's driver version ("580.65.06") and current SM clock; the library comes with
// the driver, so it is opened at run time and its absence is not an error.
typedef int (*NvmlFn)(void);
typedef int (*NvmlDriverFn)(char *, unsigned);
typedef int (*NvmlHandleFn)(unsigned, void **);
typedef int (*NvmlClockFn)(void *, int, unsigned *);
typedef int (*NvmlBusFn)(const char *, void **);

// NVML's handle of CUDA device 0. NVML numbers the GPUs in PCI order and ignores
// CUDA_VISIBLE_DEVICES, so NVML index 0 can be another GPU than the one measured: look
// the device up by CUDA device 0's PCI bus id; index 0 only when that id is unavailable.
static int nvml_device_of_cuda0(void *lib, void **dev)
{
    NvmlBusFn by_bus = (NvmlBusFn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    NvmlHandleFn by_index = (NvmlHandleFn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    char bus[32];
    if (by_bus && cudaDeviceGetPCIBusId(bus, (int)sizeof bus, 0) == cudaSuccess)
        return by_bus(bus, dev) == 0 ? 0 : -1;
    (void)cudaGetLastError();
    return by_index && by_index(0, dev) == 0 ? 0 : -1;
}

static void nvml_facts(char *driver, size_t n, unsigned *sm_clock_now_mhz)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return;
    NvmlFn init = (NvmlFn)dlsym(lib, "nvmlInit_v2");
    NvmlFn shutdown = (NvmlFn)dlsym(lib, "nvmlShutdown");
    NvmlDriverFn get_driver = (NvmlDriverFn)dlsym(lib, "nvmlSystemGetDriverVersion");
    NvmlClockFn get_clock = (NvmlClockFn)dlsym(lib, "nvmlDeviceGetClockInfo");
    if (init && init() == 0) {
        if (get_driver) get_driver(driver, (unsigned)n);
        void *dev = NULL;
        if (get_clock && nvml_device_of_cuda0(lib, &dev) == 0)
            get_clock(dev, 1 /* NVML_CLOCK_SM */, sm_clock_now_mhz);
        if (shutdown) shutdown();
    }
    dlclose(lib);
}

typedef int (*NvmlTempFn)(void *, int, unsigned *);
typedef int (*NvmlReasonsFn)(void *, unsigned long long *);

// The NVML functions context_gpu_state samples with, resolved once (NULL: unavailable).
static struct {
    bool tried;
    void *device;
    NvmlClockFn clock;
    NvmlTempFn temperature;
    NvmlReasonsFn reasons;
} nvml_sampler;

static void nvml_sampler_open(void)
{
    nvml_sampler.tried = true;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return;
    NvmlFn init = (NvmlFn)dlsym(lib, "nvmlInit_v2");
    if (!init || init() != 0 || nvml_device_of_cuda0(lib, &nvml_sampler.device) != 0) {
        nvml_sampler.device = NULL;
        dlclose(lib);
        return;
    }
    // kept open for the life of the process: sampling before and after every run
    nvml_sampler.clock = (NvmlClockFn)dlsym(lib, "nvmlDeviceGetClockInfo");
    nvml_sampler.temperature = (NvmlTempFn)dlsym(lib, "nvmlDeviceGetTemperature");
    // renamed in newer drivers; the old name is kept as an alias there
    nvml_sampler.reasons = (NvmlReasonsFn)dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!nvml_sampler.reasons)
        nvml_sampler.reasons = (NvmlReasonsFn)dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
}

bool context_gpu_state(GpuState *s)
{
    memset(s, 0, sizeof *s);
    if (!nvml_sampler.tried) nvml_sampler_open();
    void *dev = nvml_sampler.device;
    if (!dev) return false;
    s->has_clock = nvml_sampler.clock && nvml_sampler.clock(dev, 1 /* NVML_CLOCK_SM */, &s->sm_clock_mhz) == 0;
    s->has_temperature = nvml_sampler.temperature &&
                         nvml_sampler.temperature(dev, 0 /* NVML_TEMPERATURE_GPU */, &s->temperature_c) == 0;
    s->has_throttle = nvml_sampler.reasons && nvml_sampler.reasons(dev, &s->throttle_reasons) == 0;
    return s->has_clock || s->has_temperature || s->has_throttle;
}

static void host_cpu(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *v = strchr(line, ':');
            if (v) {
                v++;
                while (*v == ' ') v++;
                v[strcspn(v, "\n")] = '\0';
                snprintf(out, n, "%s", v);
            }
            break;
        }
    }
    fclose(f);
}

static void add_device(SuiteContext *c)
{
    c->has_gpu = gpu_device_available(c->no_gpu_reason, sizeof c->no_gpu_reason);
    char driver[80] = "none";
    unsigned clock_now = 0;
    int driver_api = 0;
    if (cudaDriverGetVersion(&driver_api) == cudaSuccess && driver_api > 0) {
        char buf[32];
        version_string(buf, sizeof buf, driver_api / 1000, (driver_api % 1000) / 10, 0);
        nvml_facts(driver, sizeof driver, &clock_now);
        put(c, "driver_version", driver);
        put(c, "cuda_driver_api", buf);
    } else {
        (void)cudaGetLastError();
        put(c, "driver_version", "none");
        put(c, "cuda_driver_api", "none");
    }
    struct cudaDeviceProp p;
    if (!c->has_gpu || cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        const char *keys[] = {"gpu_name", "gpu_compute_capability", "gpu_sm_count",
                              "gpu_memory_mib", "gpu_sm_clock_max_mhz", "gpu_sm_clock_mhz"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) put(c, keys[i], "none");
        putf_int(c, "gpu_count", 0);
        return;
    }
    int count = 0, clock_khz = 0;
    cudaGetDeviceCount(&count);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", p.major, p.minor);
    put(c, "gpu_name", p.name);
    put(c, "gpu_compute_capability", cc);
    putf_int(c, "gpu_sm_count", p.multiProcessorCount);
    putf_int(c, "gpu_memory_mib", (long long)(p.totalGlobalMem >> 20));
    putf_int(c, "gpu_sm_clock_max_mhz", clock_khz / 1000);
    if (clock_now) putf_int(c, "gpu_sm_clock_mhz", clock_now);
    else put(c, "gpu_sm_clock_mhz", "unknown");
    putf_int(c, "gpu_count", count);
}

static void add_libraries(SuiteContext *c)
{
    char buf[32];
    int v = 0;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) {
        version_string(buf, sizeof buf, v / 1000, (v % 1000) / 10, 0);
        put(c, "cuda_runtime", buf);
    }
    int major = 0, minor = 0, patch = 0;
    cublasGetProperty(MAJOR_VERSION, &major);
    cublasGetProperty(MINOR_VERSION, &minor);
    cublasGetProperty(PATCH_LEVEL, &patch);
    version_string(buf, sizeof buf, major, minor, patch);
    put(c, "cublas_version", buf);
    size_t dnn = cudnnGetVersion(); // 9.x: major*10000 + minor*100 + patch
    version_string(buf, sizeof buf, (int)(dnn / 10000), (int)(dnn % 10000 / 100), (int)(dnn % 100));
    put(c, "cudnn_version", buf);
    int nccl = 0;
    if (ncclGetVersion(&nccl) == ncclSuccess) { // 2.x: major*10000 + minor*100 + patch
        version_string(buf, sizeof buf, nccl / 10000, nccl % 10000 / 100, nccl % 100);
        put(c, "nccl_version", buf);
    }
}

// The files the dynamic loader actually mapped for each CUDA library (after following
// symlinks), so a result says which cuDNN or NCCL it ran with, not only its version.
typedef struct LoadedLib { const char *prefix, *key; char path[PATH_MAX]; } LoadedLib;

static int note_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    LoadedLib *libs = data;
    const char *name = info->dlpi_name, *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    for (LoadedLib *l = libs; l->prefix; l++)
        if (!l->path[0] && strncmp(base, l->prefix, strlen(l->prefix)) == 0) {
            if (!realpath(name, l->path)) snprintf(l->path, sizeof l->path, "%s", name);
        }
    return 0;
}

static void add_loaded_libraries(SuiteContext *c)
{
    LoadedLib libs[] = {{"libcudart.so.", "cudart_library", ""},
                        {"libcublas.so.", "cublas_library", ""},
                        {"libcudnn.so.", "cudnn_library", ""},
                        {"libnccl.so.", "nccl_library", ""},
                        {NULL, NULL, ""}};
    dl_iterate_phdr(note_loaded, libs);
    for (LoadedLib *l = libs; l->prefix; l++) put(c, l->key, l->path[0] ? l->path : "not loaded");
}

static void add_host(SuiteContext *c)
{
    char host[128] = "unknown", cpu[128];
    gethostname(host, sizeof host - 1);
    host_cpu(cpu, sizeof cpu);
    put(c, "host", host);
    put(c, "host_cpu", cpu);
    putf_int(c, "host_cores", sysconf(_SC_NPROCESSORS_ONLN));
    putf_int(c, "cpu_threads", core_cpu_threads()); // the CPU backend's (--threads=N)
    put(c, "cpu_kernels", core_cpu_kernels());
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    put(c, "run_date", date);
}

void context_collect(SuiteContext *c)
{
    memset(c, 0, sizeof *c);
    add_device(c);
    add_libraries(c);
    add_loaded_libraries(c);
    add_host(c);
}

const char *context_get(const SuiteContext *c, const char *key)
{
    for (int i = 0; i < c->count; i++)
        if (strcmp(c->keys[i], key) == 0) return c->values[i];
    return "";
}

// Lower-case, [a-z0-9.-] only, runs of anything else become one '-'.
static void slugify(const char *in, char *out, size_t n)
{
    size_t j = 0;
    bool dash = false;
    for (; *in && j + 1 < n; in++) {
        if (isalnum((unsigned char)*in) || *in == '.') {
            if (dash && j > 0 && j + 2 < n) out[j++] = '-';
            out[j++] = (char)tolower((unsigned char)*in);
            dash = false;
        } else {
            dash = true;
        }
    }
    out[j] = '\0';
}

void context_slug(const SuiteContext *c, char *out, size_t out_size)
{
    char a[96], b[64];
    if (c->has_gpu) {
        const char *name = context_get(c, "gpu_name");
        if (strncmp(name, "NVIDIA ", 7) == 0) name += 7;
        slugify(name, a, sizeof a);
        slugify(context_get(c, "driver_version"), b, sizeof b);
        snprintf(out, out_size, "%s_%s", a, b[0] ? b : "unknown");
    } else {
        slugify(context_get(c, "host"), a, sizeof a);
        snprintf(out, out_size, "cpu_%s", a[0] ? a : "host");
    }
}
