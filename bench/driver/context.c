// context.c: device facts from the CUDA runtime and NVML (loaded at run time: the driver
// version, the clock, and what makes GPU numbers comparable: persistence, clocks, power
// limits, ECC, MIG, PCIe, NVLink, other processes), NVML's samples around each run and the
// rule that says whether one was throttled; library versions from each library's own API.
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
    snprintf(c->values[c->count], sizeof c->values[0], "%.*s", (int)sizeof c->values[0] - 1, value);
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

// NVML, the library that comes with the driver: opened at run time on first use and kept
// open for the life of the process (the context reads it once, the harness samples it
// before and after every run); its absence is not an error, only a reason to say so.
typedef int (*NvmlFn)(void);
typedef const char *(*NvmlErrorFn)(int);
typedef int (*NvmlDriverFn)(char *, unsigned);
typedef int (*NvmlHandleFn)(unsigned, void **);
typedef int (*NvmlBusFn)(const char *, void **);
typedef int (*NvmlUintFn)(void *, unsigned *);
typedef int (*NvmlTypedFn)(void *, int, unsigned *);      // a clock or temperature of a type
typedef int (*NvmlPairFn)(void *, unsigned *, unsigned *); // current and pending mode
typedef int (*NvmlRangeFn)(void *, int, int, unsigned *, unsigned *);
typedef int (*NvmlReasonsFn)(void *, unsigned long long *);

enum { NVML_OK = 0, NVML_NOT_SUPPORTED = 3, NVML_INSUFFICIENT_SIZE = 7, NVML_MISSING = -1 /* not in this NVML */ };
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_PSTATE_0 = 0, NVML_TEMPERATURE_GPU = 0 };
#define NVML_NVLINK_MAX_LINKS 18

static struct {
    bool tried;
    void *lib;     // NULL: no NVML, or it did not start (why)
    void *device;  // CUDA device 0's handle; NULL: not found (why)
    char why[160];
} nvml;

static void *nvml_sym(const char *name) { return nvml.lib ? dlsym(nvml.lib, name) : NULL; }

static const char *nvml_why(int r)
{
    if (r == NVML_MISSING) return "not in this driver's NVML";
    NvmlErrorFn text = (NvmlErrorFn)nvml_sym("nvmlErrorString");
    return text ? text(r) : "NVML error";
}

// NVML's handle of CUDA device 0. NVML numbers the GPUs in PCI order and ignores
// CUDA_VISIBLE_DEVICES, so NVML index 0 can be another GPU than the one measured: look
// the device up by CUDA device 0's PCI bus id; index 0 only when that id is unavailable.
static int nvml_device_of_cuda0(void **dev)
{
    NvmlBusFn by_bus = (NvmlBusFn)nvml_sym("nvmlDeviceGetHandleByPciBusId_v2");
    NvmlHandleFn by_index = (NvmlHandleFn)nvml_sym("nvmlDeviceGetHandleByIndex_v2");
    char bus[32];
    if (by_bus && cudaDeviceGetPCIBusId(bus, (int)sizeof bus, 0) == cudaSuccess) return by_bus(bus, dev);
    (void)cudaGetLastError();
    return by_index ? by_index(0, dev) : NVML_MISSING;
}

static void nvml_open(void)
{
    if (nvml.tried) return;
    nvml.tried = true;
    nvml.lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!nvml.lib) {
        snprintf(nvml.why, sizeof nvml.why, "no NVML: %s", dlerror());
        return;
    }
    NvmlFn init = (NvmlFn)nvml_sym("nvmlInit_v2");
    int r = init ? init() : NVML_MISSING;
    if (r != NVML_OK) {
        snprintf(nvml.why, sizeof nvml.why, "NVML did not start: %s", nvml_why(r));
        dlclose(nvml.lib);
        nvml.lib = NULL;
        return;
    }
    r = nvml_device_of_cuda0(&nvml.device);
    if (r != NVML_OK) {
        nvml.device = NULL;
        snprintf(nvml.why, sizeof nvml.why, "NVML does not find CUDA device 0: %s", nvml_why(r));
    }
}

// Calls an NVML device query by name; NVML_MISSING when this NVML lacks it.
static int nvml_uint(const char *name, unsigned *v)
{
    NvmlUintFn f = (NvmlUintFn)nvml_sym(name);
    return f ? f(nvml.device, v) : NVML_MISSING;
}

static int nvml_typed(const char *name, int type, unsigned *v)
{
    NvmlTypedFn f = (NvmlTypedFn)nvml_sym(name);
    return f ? f(nvml.device, type, v) : NVML_MISSING;
}

static int nvml_pair(const char *name, unsigned *current, unsigned *pending)
{
    NvmlPairFn f = (NvmlPairFn)nvml_sym(name);
    return f ? f(nvml.device, current, pending) : NVML_MISSING;
}

// The NVML functions context_gpu_state samples with, resolved once (NULL: unavailable).
static struct {
    bool tried;
    NvmlTypedFn clock, temperature;
    NvmlReasonsFn reasons;
    NvmlUintFn power;
} nvml_sampler;

static void nvml_sampler_open(void)
{
    nvml_sampler.tried = true;
    nvml_open();
    if (!nvml.device) return;
    nvml_sampler.clock = (NvmlTypedFn)nvml_sym("nvmlDeviceGetClockInfo");
    nvml_sampler.temperature = (NvmlTypedFn)nvml_sym("nvmlDeviceGetTemperature");
    // renamed in newer drivers; the old name is kept as an alias there
    nvml_sampler.reasons = (NvmlReasonsFn)nvml_sym("nvmlDeviceGetCurrentClocksEventReasons");
    if (!nvml_sampler.reasons)
        nvml_sampler.reasons = (NvmlReasonsFn)nvml_sym("nvmlDeviceGetCurrentClocksThrottleReasons");
    nvml_sampler.power = (NvmlUintFn)nvml_sym("nvmlDeviceGetPowerUsage"); // milliwatts
}

bool context_gpu_state(GpuState *s)
{
    memset(s, 0, sizeof *s);
    if (!nvml_sampler.tried) nvml_sampler_open();
    void *dev = nvml.device;
    if (!dev) return false;
    s->has_clock = nvml_sampler.clock && nvml_sampler.clock(dev, NVML_CLOCK_SM, &s->sm_clock_mhz) == NVML_OK;
    s->has_temperature = nvml_sampler.temperature &&
                         nvml_sampler.temperature(dev, NVML_TEMPERATURE_GPU, &s->temperature_c) == NVML_OK;
    s->has_throttle = nvml_sampler.reasons && nvml_sampler.reasons(dev, &s->throttle_reasons) == NVML_OK;
    unsigned milliwatts = 0;
    s->has_power = nvml_sampler.power && nvml_sampler.power(dev, &milliwatts) == NVML_OK;
    s->power_w = milliwatts / 1000.0;
    return s->has_clock || s->has_temperature || s->has_throttle || s->has_power;
}

static void state_counter(GpuStateCounter *out, int *n, const char *what, const char *when, const char *unit,
                          double value)
{
    snprintf(out[*n].name, sizeof out[*n].name, "gpu_%s_%s%s", what, when, unit);
    out[*n].value = value;
    (*n)++;
}

int context_gpu_state_counters(const GpuState *s, const char *when, GpuStateCounter out[GPU_STATE_MAX_COUNTERS])
{
    int n = 0;
    if (s->has_clock) state_counter(out, &n, "sm_clock", when, "_mhz", (double)s->sm_clock_mhz);
    if (s->has_temperature) state_counter(out, &n, "temp", when, "_c", (double)s->temperature_c);
    if (s->has_throttle) state_counter(out, &n, "throttle", when, "", (double)s->throttle_reasons);
    if (s->has_power) state_counter(out, &n, "power", when, "_w", s->power_w);
    return n;
}

// Bits of NVML's clock-event reasons that are not throttling but say something of a sample.
#define GPU_REASON_IDLE 0x1ULL

bool gpu_sample_throttled(const GpuState *before, const GpuState *after, const GpuClockReference *ref)
{
    const GpuState *samples[2] = {before, after};
    for (int i = 0; i < 2; i++)
        if (samples[i] && samples[i]->has_throttle && (samples[i]->throttle_reasons & GPU_THROTTLE_REASONS))
            return true;
    if (!after || !after->has_clock || !ref) return false;
    // an idle GPU lowers its clock because nothing runs (the run ended, or was host-bound)
    if (after->has_throttle && (after->throttle_reasons & GPU_REASON_IDLE)) return false;
    unsigned against = ref->locked_sm_mhz ? ref->locked_sm_mhz : ref->default_sm_mhz;
    return against > 0 && (double)after->sm_clock_mhz < GPU_THROTTLE_CLOCK_FRACTION * (double)against;
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
        nvml_open();
        NvmlDriverFn get_driver = (NvmlDriverFn)nvml_sym("nvmlSystemGetDriverVersion");
        if (get_driver) get_driver(driver, (unsigned)sizeof driver);
        if (nvml.device) nvml_typed("nvmlDeviceGetClockInfo", NVML_CLOCK_SM, &clock_now);
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

// What makes GPU numbers comparable between runs and machines (docs/gpu-quiet.md): one
// key each, in this order, on every machine: "n/a (no GPU)" without one, "unknown (why)"
// where NVML cannot say.
enum {
    Q_PERSISTENCE, Q_APP_SM, Q_APP_MEM, Q_DEFAULT_APP_SM, Q_DEFAULT_APP_MEM, Q_SM_RANGE, Q_MEM_RANGE,
    Q_LOCKED, Q_POWER_LIMIT, Q_POWER_DEFAULT, Q_POWER_ENFORCED, Q_ECC, Q_MIG, Q_PCIE_GEN, Q_PCIE_GEN_MAX,
    Q_PCIE_WIDTH, Q_PCIE_WIDTH_MAX, Q_NVLINK, Q_OTHER_PROCESSES, Q_COUNT
};
static const char *const quiet_keys[Q_COUNT] = {
    "gpu_persistence_mode", "gpu_app_sm_clock_mhz", "gpu_app_mem_clock_mhz", "gpu_default_app_sm_clock_mhz",
    "gpu_default_app_mem_clock_mhz", "gpu_sm_clock_p0_range_mhz", "gpu_mem_clock_p0_range_mhz",
    "gpu_clocks_locked", "gpu_power_limit_w", "gpu_power_limit_default_w", "gpu_power_limit_enforced_w",
    "gpu_ecc_mode", "gpu_mig_mode", "gpu_pcie_gen", "gpu_pcie_gen_max", "gpu_pcie_width", "gpu_pcie_width_max",
    "gpu_nvlink_active", "gpu_other_processes"};

typedef char QuietValue[192];

static void unknown(QuietValue out, int r)
{
    snprintf(out, sizeof(QuietValue), "unknown (%s)", nvml_why(r));
}

static void number_or_unknown(QuietValue out, int r, unsigned v)
{
    if (r == NVML_OK) snprintf(out, sizeof(QuietValue), "%u", v);
    else unknown(out, r);
}

static void watts_or_unknown(QuietValue out, int r, unsigned milliwatts)
{
    if (r == NVML_OK) snprintf(out, sizeof(QuietValue), "%g", milliwatts / 1000.0);
    else unknown(out, r);
}

// A current/pending mode pair (ECC, MIG: 1 is enabled) as "on", "off", "off (on after a
// reset)" when a change is pending, or "off (not supported)" on a GPU without the mode.
static void mode_or_unknown(QuietValue out, int r, unsigned current, unsigned pending)
{
    if (r == NVML_NOT_SUPPORTED) {
        snprintf(out, sizeof(QuietValue), "off (not supported)");
        return;
    }
    if (r != NVML_OK) {
        unknown(out, r);
        return;
    }
    const char *now = current ? "on" : "off";
    if (pending != current) snprintf(out, sizeof(QuietValue), "%s (%s after a reset)", now, pending ? "on" : "off");
    else snprintf(out, sizeof(QuietValue), "%s", now);
}

// The P0 clock range of a clock domain; *min, *max set when NVML gave it.
static int p0_range(QuietValue out, int type, unsigned *min, unsigned *max)
{
    NvmlRangeFn f = (NvmlRangeFn)nvml_sym("nvmlDeviceGetMinMaxClockOfPState");
    int r = f ? f(nvml.device, type, NVML_PSTATE_0, min, max) : NVML_MISSING;
    if (r == NVML_OK) snprintf(out, sizeof(QuietValue), "%u-%u", *min, *max);
    else unknown(out, r);
    return r;
}

static void nvlink_active(QuietValue out)
{
    typedef int (*LinkFn)(void *, unsigned, unsigned *);
    LinkFn state = (LinkFn)nvml_sym("nvmlDeviceGetNvLinkState");
    if (!state) {
        unknown(out, NVML_MISSING);
        return;
    }
    unsigned active = 0, link = 0, enabled = 0;
    int r = NVML_OK;
    for (; link < NVML_NVLINK_MAX_LINKS && (r = state(nvml.device, link, &enabled)) == NVML_OK; link++)
        active += enabled ? 1 : 0;
    if (link == 0) snprintf(out, sizeof(QuietValue), "0 (no NVLink: %s)", nvml_why(r));
    else snprintf(out, sizeof(QuietValue), "%u", active);
}

// Compute processes on the GPU other than this one: "0", or their count and first pids.
static void other_processes(QuietValue out)
{
    typedef struct { unsigned pid; unsigned long long used_memory; unsigned gpu_instance, compute_instance; } Info;
    typedef int (*ProcsFn)(void *, unsigned *, Info *);
    ProcsFn list = (ProcsFn)nvml_sym("nvmlDeviceGetComputeRunningProcesses_v3");
    if (!list) list = (ProcsFn)nvml_sym("nvmlDeviceGetComputeRunningProcesses_v2"); // the same Info
    if (!list) {
        unknown(out, NVML_MISSING);
        return;
    }
    Info infos[64];
    unsigned count = sizeof infos / sizeof infos[0];
    int r = list(nvml.device, &count, infos);
    if (r != NVML_OK) { // NVML_INSUFFICIENT_SIZE: more than 64, count says how many
        if (r == NVML_INSUFFICIENT_SIZE) snprintf(out, sizeof(QuietValue), "%u", count);
        else unknown(out, r);
        return;
    }
    unsigned others = 0;
    char pids[128] = "";
    for (unsigned i = 0; i < count; i++) {
        if (infos[i].pid == (unsigned)getpid()) continue;
        others++;
        size_t used = strlen(pids);
        if (used + 16 < sizeof pids) snprintf(pids + used, sizeof pids - used, "%s%u", others > 1 ? " " : "", infos[i].pid);
    }
    if (others) snprintf(out, sizeof(QuietValue), "%u (pid %s)", others, pids);
    else snprintf(out, sizeof(QuietValue), "0");
}

static void quiet_values(QuietValue v[Q_COUNT])
{
    unsigned a = 0, b = 0, max = 0;
    int r = nvml_uint("nvmlDeviceGetPersistenceMode", &a);
    if (r == NVML_OK) snprintf(v[Q_PERSISTENCE], sizeof v[0], "%s", a ? "on" : "off");
    else unknown(v[Q_PERSISTENCE], r);
    r = nvml_typed("nvmlDeviceGetApplicationsClock", NVML_CLOCK_SM, &a);
    number_or_unknown(v[Q_APP_SM], r, a);
    r = nvml_typed("nvmlDeviceGetApplicationsClock", NVML_CLOCK_MEM, &a);
    number_or_unknown(v[Q_APP_MEM], r, a);
    r = nvml_typed("nvmlDeviceGetDefaultApplicationsClock", NVML_CLOCK_SM, &a);
    number_or_unknown(v[Q_DEFAULT_APP_SM], r, a);
    r = nvml_typed("nvmlDeviceGetDefaultApplicationsClock", NVML_CLOCK_MEM, &a);
    number_or_unknown(v[Q_DEFAULT_APP_MEM], r, a);
    // Locked clocks (nvidia-smi -lgc) narrow the P0 range; one clock (-lgc F,F) is a lock.
    r = p0_range(v[Q_SM_RANGE], NVML_CLOCK_SM, &a, &max);
    if (r == NVML_OK && a == max) snprintf(v[Q_LOCKED], sizeof v[0], "yes (SM %u MHz)", a);
    else if (r == NVML_OK) snprintf(v[Q_LOCKED], sizeof v[0], "no");
    else unknown(v[Q_LOCKED], r);
    p0_range(v[Q_MEM_RANGE], NVML_CLOCK_MEM, &a, &max);
    r = nvml_uint("nvmlDeviceGetPowerManagementLimit", &a);
    watts_or_unknown(v[Q_POWER_LIMIT], r, a);
    r = nvml_uint("nvmlDeviceGetPowerManagementDefaultLimit", &a);
    watts_or_unknown(v[Q_POWER_DEFAULT], r, a);
    r = nvml_uint("nvmlDeviceGetEnforcedPowerLimit", &a);
    watts_or_unknown(v[Q_POWER_ENFORCED], r, a);
    r = nvml_pair("nvmlDeviceGetEccMode", &a, &b);
    mode_or_unknown(v[Q_ECC], r, a, b);
    r = nvml_pair("nvmlDeviceGetMigMode", &a, &b);
    mode_or_unknown(v[Q_MIG], r, a, b);
    r = nvml_uint("nvmlDeviceGetCurrPcieLinkGeneration", &a);
    number_or_unknown(v[Q_PCIE_GEN], r, a);
    r = nvml_uint("nvmlDeviceGetMaxPcieLinkGeneration", &a);
    number_or_unknown(v[Q_PCIE_GEN_MAX], r, a);
    r = nvml_uint("nvmlDeviceGetCurrPcieLinkWidth", &a);
    number_or_unknown(v[Q_PCIE_WIDTH], r, a);
    r = nvml_uint("nvmlDeviceGetMaxPcieLinkWidth", &a);
    number_or_unknown(v[Q_PCIE_WIDTH_MAX], r, a);
    nvlink_active(v[Q_NVLINK]);
    other_processes(v[Q_OTHER_PROCESSES]);
}

static void add_gpu_quietness(SuiteContext *c)
{
    QuietValue v[Q_COUNT];
    if (!c->has_gpu) {
        for (int i = 0; i < Q_COUNT; i++) snprintf(v[i], sizeof v[i], "n/a (no GPU)");
    } else {
        nvml_open();
        if (nvml.device) quiet_values(v);
        else
            for (int i = 0; i < Q_COUNT; i++) snprintf(v[i], sizeof v[i], "unknown (%s)", nvml.why);
    }
    for (int i = 0; i < Q_COUNT; i++) put(c, quiet_keys[i], v[i]);
}

void context_clock_reference(const SuiteContext *c, GpuClockReference *ref)
{
    memset(ref, 0, sizeof *ref);
    if (sscanf(context_get(c, "gpu_clocks_locked"), "yes (SM %u MHz)", &ref->locked_sm_mhz) != 1)
        ref->locked_sm_mhz = 0;
    if (sscanf(context_get(c, "gpu_sm_clock_max_mhz"), "%u", &ref->default_sm_mhz) != 1) ref->default_sm_mhz = 0;
}

static void add_libraries(SuiteContext *c)
{
    char buf[32];
    int v = 0;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) {
        version_string(buf, sizeof buf, v / 1000, (v % 1000) / 10, 0);
        put(c, "cuda_runtime", buf);
    } else {
        put(c, "cuda_runtime", "unknown");
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
    } else {
        put(c, "nccl_version", "unknown");
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
    add_gpu_quietness(c);
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
