// harness.cc: adapts the C API of harness.h to Google Benchmark 1.7.1: registration and
// the run. It expands each benchmark's sweep axes into instances (each registered as its
// own benchmark, named practice/variant/axis:value...), sets their unit, timing and
// minimum time, puts the device/library context on the run, and runs them through the
// display teed into the tidy CSV (--harness_csv=FILE), with a cut by SIGINT/SIGTERM/SIGHUP
// handled. The harness is the suite's only C++; its other files are named in
// harness_internal.h.
#include <benchmark/benchmark.h>

#include <regex.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/driver/context.h"
#include "bench/driver/harness.h"
#include "bench/driver/harness_internal.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"

namespace harness {

Globals &g()
{
    static Globals globals;
    return globals;
}

const char *role_name(HarnessRole r)
{
    switch (r) {
    case HARNESS_BASELINE: return "baseline";
    case HARNESS_TUNED: return "tuned";
    case HARNESS_REFERENCE: return "reference";
    }
    return "unknown";
}

const char *cache_name(HarnessCache c)
{
    switch (c) {
    case HARNESS_CACHE_WARM: return "warm";
    case HARNESS_CACHE_COLD: return "cold";
    case HARNESS_CACHE_UNSTATED: break;
    }
    return "";
}

const char *timing_name(HarnessTiming t)
{
    switch (t) {
    case HARNESS_TIMING_CUDA_EVENTS: return "cuda_events";
    case HARNESS_TIMING_WALL: return "wall";
    case HARNESS_TIMING_MANUAL: return "manual";
    }
    return "unknown";
}

benchmark::TimeUnit gb_unit(HarnessUnit u)
{
    switch (u) {
    case HARNESS_US: return benchmark::kMicrosecond;
    case HARNESS_MS: return benchmark::kMillisecond;
    case HARNESS_S: return benchmark::kSecond;
    case HARNESS_NS: break;
    }
    return benchmark::kNanosecond;
}

namespace {

// Registers the instances of every benchmark with Google Benchmark; "" or why not.
// Whether a CUDA device is usable here (asked once).
bool gpu_usable()
{
    static int usable = -1;
    if (usable < 0) usable = gpu_device_available(nullptr, 0) ? 1 : 0;
    return usable == 1;
}

std::string register_instances()
{
    Globals &G = g();
    G.repetitions = (int)std::max(1L, strtol(gb_flag("benchmark_repetitions", "1").c_str(), nullptr, 10));
    if (G.max_repetitions < G.repetitions) G.max_repetitions = G.repetitions;
    std::set<std::string> known;
    for (auto &b : G.benches)
        for (Axis &a : b->axes) {
            known.insert(a.name);
            auto o = G.axis_overrides.find(a.name);
            if (o != G.axis_overrides.end()) a.values = o->second;
        }
    for (const auto &o : G.axis_overrides)
        if (!known.count(o.first))
            return "no benchmark of this program has an axis '" + o.first + "'" +
                   (o.first == "preset" ? " (--preset does not apply here)" : "");
    for (auto &b : G.benches) {
        std::vector<std::vector<std::string>> values(b->axes.size());
        for (size_t i = 0; i < b->axes.size(); i++) {
            std::string why = expand_axis(b->axes[i], &values[i]);
            if (!why.empty()) return why;
        }
        std::vector<size_t> at(b->axes.size(), 0);
        for (;;) {
            auto in = std::make_unique<Instance>();
            in->bench = b.get();
            in->name = b->practice + "/" + b->variant;
            for (size_t i = 0; i < b->axes.size(); i++) {
                in->params.emplace_back(b->axes[i].name, values[i][at[i]]);
                in->name += "/" + b->axes[i].name + ":" + values[i][at[i]];
            }
            Instance *raw = in.get();
            G.instances.push_back(std::move(in));
            auto *gb = benchmark::RegisterBenchmark(raw->name.c_str(),
                                                    [raw](benchmark::State &st) { run_one(st, raw); });
            raw->gb = gb;
            gb->Unit(gb_unit(b->unit));
            if (b->timing == HARNESS_TIMING_WALL) gb->UseRealTime();
            else gb->UseManualTime();
            // a fixed count always; a program's own minimum time only when the user gave none:
            // every repetition runs it whole, however many there are (each repetition
            // measures enough work of its own; else the library's 0.5 s)
            raw->gb_name = raw->name;
            // a row that will skip here (it needs a GPU, none is usable) takes no time: named
            // so, for the time plan; it runs no iteration whatever its count
            bool skips_here = raw->skips_here = b->gpu_only && !gpu_usable();
            if (b->iterations > 0 && !skips_here) {
                gb->Iterations(b->iterations);
            } else if (skips_here || (!G.user_min_time && b->min_time > 0)) {
                double min_time = skips_here ? 1e-9 : b->min_time;
                gb->MinTime(min_time);
                char suffix[64];
                snprintf(suffix, sizeof suffix, "/min_time:%0.3f", min_time);
                raw->gb_name += suffix;
            }
            if (b->iterations > 0 && !skips_here)
                raw->gb_name += "/iterations:" + std::to_string((long long)b->iterations);
            raw->gb_name += b->timing == HARNESS_TIMING_WALL ? "/real_time" : "/manual_time";
            size_t i = 0;  // next point of the product, the last axis fastest
            for (i = b->axes.size(); i > 0; i--) {
                if (++at[i - 1] < values[i - 1].size()) break;
                at[i - 1] = 0;
            }
            if (i == 0) break;
        }
    }
    return "";
}

// Instances that --benchmark_filter selects, as Google Benchmark matches them (an
// extended regular expression searched in the full name; a leading '-' negates), in the
// order they were registered.
std::vector<Instance *> selected_instances()
{
    std::string spec = gb_flag("benchmark_filter", "");
    if (spec.empty() || spec == "all") spec = ".";
    bool negate = spec[0] == '-';
    if (negate) spec = spec.substr(1);
    // POSIX regcomp, not std::regex: the same extended syntax, and GCC 12's std::regex
    // trips -Wmaybe-uninitialized under the sanitizers (make test-sanitize builds -Werror).
    std::vector<Instance *> out;
    regex_t re;
    bool ok = regcomp(&re, spec.c_str(), REG_EXTENDED | REG_NOSUB) == 0;
    for (const auto &in : g().instances)
        if (!ok || (regexec(&re, in->gb_name.c_str(), 0, nullptr, 0) == 0) != negate) out.push_back(in.get());
    if (ok) regfree(&re);
    return out;
}

int planned_instances() { return (int)selected_instances().size(); }

} // namespace

} // namespace harness

using namespace harness;

extern "C" {

HarnessBench *harness_register(const HarnessSpec *spec)
{
    if (!spec || !spec->practice || !spec->variant || !spec->fn) {
        fprintf(stderr, "harness: a benchmark needs a practice, a variant and a function\n");
        return nullptr;
    }
    auto b = std::make_unique<HarnessBench>();
    b->practice = spec->practice;
    b->variant = spec->variant;
    b->role = spec->role;
    b->timing = spec->timing;
    b->fn = spec->fn;
    b->user = spec->user;
    b->unit = spec->unit;
    b->min_time = spec->min_time;
    b->iterations = spec->iterations;
    b->cache = spec->cache;
    b->gpu_only = spec->gpu_only || spec->timing == HARNESS_TIMING_CUDA_EVENTS;
    for (int i = 0; i < HARNESS_MAX_AXES && spec->axes[i].name; i++) {
        if (!spec->axes[i].values) {
            fprintf(stderr, "harness: axis %s of %s/%s has no values\n", spec->axes[i].name,
                    spec->practice, spec->variant);
            return nullptr;
        }
        b->axes.push_back(Axis{spec->axes[i].name, spec->axes[i].values, spec->axes[i].is_string});
    }
    HarnessBench *raw = b.get();
    g().benches.push_back(std::move(b));
    return raw;
}

HarnessBench *harness_register_axes(const HarnessSpec *spec, const HarnessAxis *axes)
{
    if (!spec) return harness_register(spec);
    HarnessSpec copy = *spec;
    int n = 0;
    for (; axes && axes[n].name; n++) {
        if (n == HARNESS_MAX_AXES) {
            fprintf(stderr, "harness: %s/%s has more than %d axes\n", spec->practice ? spec->practice : "?",
                    spec->variant ? spec->variant : "?", HARNESS_MAX_AXES);
            return nullptr;
        }
        copy.axes[n] = axes[n];
    }
    for (int i = n; i < HARNESS_MAX_AXES; i++) copy.axes[i] = HarnessAxis{};
    return harness_register(&copy);
}

int harness_run(void)
{
    Globals &G = g();
    if (!G.initialised) {
        fprintf(stderr, "harness: harness_run before harness_init\n");
        return 2;
    }
    if (G.help) print_help();
    std::string bad = register_instances();
    if (!bad.empty()) {
        fprintf(stderr, "%s: error: %s (see --help)\n", G.prog.c_str(), bad.c_str());
        return 2;
    }
    // The harness runs each row group's repetitions as blocks, one library call each
    // (harness_schedule.cc): the row's benchmarks interleaved at random within a block
    // (unless the user says otherwise), and the --benchmark_out file opened here once.
    std::string interleave = "--benchmark_enable_random_interleaving=true";
    std::vector<std::string> gb_args;
    for (const std::string &a : G.gb_args)
        if (a.rfind("--benchmark_out=", 0) != 0 && a.rfind("--benchmark_out_format=", 0) != 0) gb_args.push_back(a);
    std::vector<char *> args;
    args.push_back(const_cast<char *>(G.prog.c_str()));
    args.push_back(&interleave[0]);
    for (std::string &a : gb_args) args.push_back(&a[0]);
    int n = (int)args.size();
    args.push_back(nullptr);
    auto display = make_display();
    benchmark::Initialize(&n, args.data());  // --help: prints the library's and exits
    if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
    if (gb_bool_flag("benchmark_list_tests")) {
        benchmark::RunSpecifiedBenchmarks(display.get());
        benchmark::Shutdown();
        return 0;
    }
    // An unwritable CSV is found now, not after a run of many minutes whose rows it loses.
    // It is written to FILE.tmp and renamed over FILE, so both must be writable.
    if (!G.csv_path.empty()) {
        for (const std::string &path : {G.csv_path, G.csv_path + ".tmp"}) {
            FILE *f = fopen(path.c_str(), "a");
            if (!f) {
                fprintf(stderr, "harness: cannot write tidy CSV %s: %s\n", path.c_str(), strerror(errno));
                return 1;
            }
            fclose(f);
        }
        remove((G.csv_path + ".tmp").c_str());
    }

    SuiteContext ctx;
    context_collect(&ctx);
    for (int i = 0; i < ctx.count; i++) benchmark::AddCustomContext(ctx.keys[i], ctx.values[i]);
    G.extra_context.emplace_back("tidy_schema", tidy_schema_version()); // the CSVs' columns
    for (const auto &kv : G.extra_context) benchmark::AddCustomContext(kv.first, kv.second);
    if (!ctx.has_gpu)
        fprintf(stderr, "harness: %s; GPU benchmarks will %s\n", ctx.no_gpu_reason,
                error_expect_gpu() ? "fail (SUITE_EXPECT_GPU=1: this machine should have one)" : "be skipped");
    G.gpu_state = ctx.has_gpu;
    context_clock_reference(&ctx, &G.clock_ref);

    if (G.precision < 0) G.precision = ctx.has_gpu ? 0.02 : 0.05;  // --harness_precision=auto

    TidyCsvTee tee(display.get(), G.csv_path, &ctx);
    the_tee = &tee;
    std::unique_ptr<benchmark::BenchmarkReporter> file_reporter = make_file_reporter();
    std::ofstream out_file;
    if (file_reporter) {  // opened once: Google Benchmark would reopen it for every block
        std::string path = gb_flag("benchmark_out", "");
        out_file.open(path);
        if (!out_file.is_open()) {
            fprintf(stderr, "harness: cannot write %s\n", path.c_str());
            return 1;
        }
        file_reporter->SetOutputStream(&out_file);
        file_reporter->SetErrorStream(&out_file);
        tee.set_file_reporter(file_reporter.get());
    }
    if (!G.csv_path.empty()) remove(partial_path(G.csv_path).c_str());  // an earlier run's
    int planned = planned_instances() * G.repetitions;
    std::thread watcher = cut_watch_start(&tee, planned);
    run_schedule(tee, selected_instances());
    resolve_pending(nullptr, 0);  // never left over after a block; kept for safety
    tee.finish_run();
    cut_watch_stop(watcher);
    the_tee = nullptr;
    benchmark::Shutdown();
    if (!tee.write_ok()) return 1;
    return tee.any_error() ? 1 : 0;
}

int harness_main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    return rc >= 0 ? rc : harness_run();
}

void harness_add_context(const char *key, const char *value)
{
    g().extra_context.emplace_back(key, value ? value : "");
}

} // extern "C"
