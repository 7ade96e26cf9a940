// harness.cc: adapts the C API of harness.h to Google Benchmark 1.7.1. The only C++
// file in the suite. It registers benchmarks, labels every run with its role and
// timing, adds the device/library context to the JSON, and tees the runs into a
// tidy CSV (--harness_csv=FILE) next to whatever output the library writes itself.
#include "bench/harness.h"

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench/context.h"
#include "kernels/core.h"

struct HarnessBench {
    std::string practice, variant;
    HarnessRole role;
    HarnessTiming timing;
    HarnessFn fn;
    void *user;
    std::vector<std::string> params;
    benchmark::internal::Benchmark *gb;
};

struct HarnessState {
    benchmark::State *gb;
    const HarnessBench *bench;
    std::string label;
    bool loop_done;
};

namespace {

const char kSkipPrefix[] = "skipped: ";
const char kErrorPrefix[] = "error: ";

std::vector<std::unique_ptr<HarnessBench>> &registry()
{
    static std::vector<std::unique_ptr<HarnessBench>> benches;
    return benches;
}

std::vector<std::pair<std::string, std::string>> &extra_context()
{
    static std::vector<std::pair<std::string, std::string>> kv;
    return kv;
}

const char *role_name(HarnessRole r) { return r == HARNESS_BASELINE ? "baseline" : "tuned"; }

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

const char *unit_name(benchmark::TimeUnit u)
{
    switch (u) {
    case benchmark::kMicrosecond: return "us";
    case benchmark::kMillisecond: return "ms";
    case benchmark::kSecond: return "s";
    case benchmark::kNanosecond: break;
    }
    return "ns";
}

void run_one(benchmark::State &gb, HarnessBench *b)
{
    HarnessState st{&gb, b, std::string(), false};
    b->fn(&st, b->user);
    if (!st.loop_done && !gb.error_occurred())
        gb.SkipWithError("error: benchmark returned before finishing its loop");
    std::string label = std::string("role=") + role_name(b->role) + " timing=" + timing_name(b->timing);
    if (!st.label.empty()) label += " " + st.label;
    gb.SetLabel(label);
}

// ---- tidy CSV ------------------------------------------------------------------

// A CSV field: no commas, quotes or newlines, so gnuplot and awk can split on ','.
std::string field(const std::string &s)
{
    std::string out;
    for (char ch : s) {
        if (ch == ',') out += ';';
        else if (ch == '\n' || ch == '\r') out += ' ';
        else if (ch != '"') out += ch;
    }
    return out;
}

std::string num(double v)
{
    if (!std::isfinite(v)) return "";
    char buf[64];
    snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

struct Instance {
    std::string function_name, args;
    std::vector<benchmark::BenchmarkReporter::Run> runs;
    std::map<std::string, benchmark::BenchmarkReporter::Run> aggregates;
};

double mean_of(const std::vector<double> &v)
{
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? NAN : s / (double)v.size();
}

class TidyCsvTee : public benchmark::BenchmarkReporter {
public:
    TidyCsvTee(benchmark::BenchmarkReporter *display, std::string path, const SuiteContext *ctx)
        : display_(display), path_(std::move(path)), ctx_(ctx) {}

    bool ReportContext(const Context &ctx) override { return display_->ReportContext(ctx); }

    void ReportRuns(const std::vector<Run> &runs) override
    {
        display_->ReportRuns(runs);
        for (const Run &r : runs) {
            std::string key = r.run_name.str();
            if (!index_.count(key)) {
                index_[key] = instances_.size();
                instances_.push_back(Instance{r.run_name.function_name, r.run_name.args, {}, {}});
            }
            Instance &in = instances_[index_[key]];
            if (r.run_type == Run::RT_Aggregate) in.aggregates[r.aggregate_name] = r;
            else in.runs.push_back(r);
            if (r.error_occurred && r.error_message.rfind(kSkipPrefix, 0) != 0) any_error_ = true;
        }
        // Rewritten after every instance, so a run stopped by a timeout or Ctrl-C keeps
        // the rows it measured.
        if (!path_.empty()) write_ok_ = write_csv();
    }

    void Finalize() override
    {
        display_->Finalize();
        if (!path_.empty()) write_ok_ = write_csv();
    }

    bool any_error() const { return any_error_; }
    bool write_ok() const { return write_ok_; }

private:
    const HarnessBench *find_bench(const std::string &function_name) const
    {
        for (const auto &b : registry())
            if (b->practice + "/" + b->variant == function_name) return b.get();
        return nullptr;
    }

    bool write_csv()
    {
        const SuiteContext &ctx = *ctx_;
        std::set<std::string> param_names, counter_names;
        for (const auto &b : registry())
            for (const auto &p : b->params) param_names.insert(p);
        for (const Instance &in : instances_) {
            for (const Run &r : in.runs)
                for (const auto &c : r.counters) counter_names.insert(c.first);
            for (const auto &a : in.aggregates)
                for (const auto &c : a.second.counters) counter_names.insert(c.first);
        }
        // Written beside and renamed over, so that a kill never leaves half a CSV.
        std::string tmp = path_ + ".tmp";
        std::ofstream out(tmp);
        if (!out) {
            fprintf(stderr, "harness: cannot write tidy CSV %s\n", tmp.c_str());
            return false;
        }
        out << "practice,variant,role,timing,params,status,reason,repetitions,iterations,"
               "time,cpu_time,time_unit,time_median,time_stddev,time_min,time_max";
        for (const auto &p : param_names) out << ",param_" << field(p);
        for (const auto &c : counter_names) out << "," << field(c);
        for (int i = 0; i < ctx.count; i++) out << ",ctx_" << ctx.keys[i];
        for (const auto &kv : extra_context()) out << ",ctx_" << field(kv.first);
        out << "\n";
        for (const Instance &in : instances_) write_row(out, in, ctx, param_names, counter_names);
        out.close();
        if (!out || rename(tmp.c_str(), path_.c_str()) != 0) {
            fprintf(stderr, "harness: error writing tidy CSV %s\n", path_.c_str());
            remove(tmp.c_str());
            return false;
        }
        return true;
    }

    void write_row(std::ofstream &out, const Instance &in, const SuiteContext &ctx,
                   const std::set<std::string> &param_names,
                   const std::set<std::string> &counter_names)
    {
        const HarnessBench *b = find_bench(in.function_name);
        // args look like "bytes:1024/streams:2"
        std::map<std::string, std::string> params;
        std::string params_field;
        size_t pos = 0;
        while (pos < in.args.size()) {
            size_t end = in.args.find('/', pos);
            if (end == std::string::npos) end = in.args.size();
            std::string kv = in.args.substr(pos, end - pos);
            size_t colon = kv.find(':');
            if (colon != std::string::npos) params[kv.substr(0, colon)] = kv.substr(colon + 1);
            params_field += (params_field.empty() ? "" : ";") + kv;
            pos = end + 1;
        }
        const Run *first = !in.runs.empty() ? &in.runs[0]
                           : !in.aggregates.empty() ? &in.aggregates.begin()->second : nullptr;
        std::string status = "ok", reason;
        for (const Run &r : in.runs)
            if (r.error_occurred) {
                bool skip = r.error_message.rfind(kSkipPrefix, 0) == 0;
                status = skip ? "skipped" : "error";
                reason = r.error_message.substr(skip ? strlen(kSkipPrefix)
                                                : r.error_message.rfind(kErrorPrefix, 0) == 0
                                                    ? strlen(kErrorPrefix) : 0);
            }
        std::vector<double> times, cpu, iters;
        for (const Run &r : in.runs)
            if (!r.error_occurred) {
                times.push_back(r.GetAdjustedRealTime());
                cpu.push_back(r.GetAdjustedCPUTime());
                iters.push_back((double)r.iterations);
            }
        auto agg = [&](const char *name, bool real) -> double {
            auto it = in.aggregates.find(name);
            if (it == in.aggregates.end()) return NAN;
            return real ? it->second.GetAdjustedRealTime() : it->second.GetAdjustedCPUTime();
        };
        double time = agg("mean", true), cpu_time = agg("mean", false);
        double median = agg("median", true), stddev = agg("stddev", true);
        if (std::isnan(time)) time = mean_of(times);
        if (std::isnan(cpu_time)) cpu_time = mean_of(cpu);
        std::vector<double> sorted = times;
        std::sort(sorted.begin(), sorted.end());
        if (std::isnan(median) && !sorted.empty()) {
            size_t n = sorted.size();
            median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
        }
        if (std::isnan(stddev) && !sorted.empty()) {
            double m = mean_of(sorted), s = 0;
            for (double x : sorted) s += (x - m) * (x - m);
            stddev = sorted.size() > 1 ? std::sqrt(s / (double)(sorted.size() - 1)) : 0.0;
        }
        size_t reps = in.runs.size();
        if (in.aggregates.count("mean")) reps = (size_t)in.aggregates.at("mean").repetitions;
        if (status != "ok") time = cpu_time = median = stddev = NAN;
        std::string practice = b ? b->practice : in.function_name, variant = b ? b->variant : "";
        out << field(practice) << "," << field(variant) << ","
            << (b ? role_name(b->role) : "") << "," << (b ? timing_name(b->timing) : "") << ","
            << field(params_field) << "," << status << "," << field(reason) << "," << reps << ","
            << num(mean_of(iters)) << "," << num(time) << "," << num(cpu_time) << ","
            << (first ? unit_name(first->time_unit) : "") << "," << num(median) << ","
            << num(stddev) << "," << (status == "ok" && !sorted.empty() ? num(sorted.front()) : "")
            << "," << (status == "ok" && !sorted.empty() ? num(sorted.back()) : "");
        for (const auto &p : param_names) out << "," << (params.count(p) ? field(params[p]) : "");
        for (const auto &c : counter_names) {
            double v = NAN;
            auto mean_it = in.aggregates.find("mean");
            if (mean_it != in.aggregates.end() && mean_it->second.counters.count(c)) {
                v = mean_it->second.counters.at(c).value;
            } else {
                std::vector<double> vals;
                for (const Run &r : in.runs)
                    if (!r.error_occurred && r.counters.count(c)) vals.push_back(r.counters.at(c).value);
                v = mean_of(vals);
            }
            out << "," << (status == "ok" ? num(v) : "");
        }
        for (int i = 0; i < ctx.count; i++) out << "," << field(ctx.values[i]);
        for (const auto &kv : extra_context()) out << "," << field(kv.second);
        out << "\n";
    }

    benchmark::BenchmarkReporter *display_;
    std::string path_;
    const SuiteContext *ctx_;
    std::vector<Instance> instances_;
    std::map<std::string, size_t> index_;
    bool any_error_ = false;
    bool write_ok_ = true;
};

// The flags Google Benchmark uses to choose its display reporter, read from argv
// because the library keeps them private.
std::string flag_value(int argc, char **argv, const char *name, const char *fallback)
{
    std::string prefix = std::string("--") + name + "=";
    std::string value = fallback;
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) value = argv[i] + prefix.size();
    return value;
}

std::unique_ptr<benchmark::BenchmarkReporter> make_display(int argc, char **argv)
{
    std::string format = flag_value(argc, argv, "benchmark_format", "console");
    if (format == "json") return std::make_unique<benchmark::JSONReporter>();
    // Deprecated upstream but still a documented --benchmark_format; keep it working.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    if (format == "csv") return std::make_unique<benchmark::CSVReporter>();
#pragma GCC diagnostic pop
    std::string color = flag_value(argc, argv, "benchmark_color", "auto");
    std::string tabular = flag_value(argc, argv, "benchmark_counters_tabular", "false");
    int opts = benchmark::ConsoleReporter::OO_None;
    bool tty = isatty(STDOUT_FILENO) && getenv("TERM") && strcmp(getenv("TERM"), "dumb") != 0;
    if (color == "true" || color == "yes" || (color == "auto" && tty))
        opts |= benchmark::ConsoleReporter::OO_Color;
    if (tabular == "true" || tabular == "yes" || tabular == "1")
        opts |= benchmark::ConsoleReporter::OO_Tabular;
    return std::make_unique<benchmark::ConsoleReporter>(
        (benchmark::ConsoleReporter::OutputOptions)opts);
}

// Flag values Google Benchmark would abort on (a negative repetition count), silently run
// nothing for (0 repetitions) or answer with its usage and exit status 0 (an unknown
// format or time unit); "" when every value is usable.
std::string bad_flag_value(int argc, char **argv)
{
    std::string reps = flag_value(argc, argv, "benchmark_repetitions", "1");
    char *end;
    long n = strtol(reps.c_str(), &end, 10);
    if (reps.empty() || *end || n < 1)
        return "--benchmark_repetitions=" + reps + ": need an integer >= 1";
    for (const char *name : {"benchmark_format", "benchmark_out_format"}) {
        std::string v = flag_value(argc, argv, name, "console");
        if (v != "console" && v != "json" && v != "csv")
            return std::string("--") + name + "=" + v + ": need console, json or csv";
    }
    std::string unit = flag_value(argc, argv, "benchmark_time_unit", "ms");
    if (unit != "ns" && unit != "us" && unit != "ms" && unit != "s")
        return "--benchmark_time_unit=" + unit + ": need ns, us, ms or s";
    return "";
}

void print_help(const char *prog)
{
    printf("%s: a practice benchmark of the tuning-practice suite.\n\n"
           "Suite flag:\n"
           "  --harness_csv=FILE   also write a tidy CSV (one row per benchmark instance,\n"
           "                       role, parameters, time, counters and device/library\n"
           "                       context on every row)\n"
           "  --threads=N          threads of the core's CPU backend, as torch.set_num_threads\n"
           "                       (default: the machine's cores; context key cpu_threads)\n\n"
           "Google Benchmark flags (all accepted), most useful:\n"
           "  --benchmark_list_tests             list the benchmarks and exit\n"
           "  --benchmark_filter=REGEX           run only matching benchmarks\n"
           "  --benchmark_repetitions=N          repeat each; adds mean/median/stddev/cv\n"
           "  --benchmark_min_time=SECONDS       minimum time per benchmark\n"
           "  --benchmark_format=console|json|csv  standard output format\n"
           "  --benchmark_out=FILE --benchmark_out_format=json|console|csv\n"
           "  --benchmark_enable_random_interleaving=true\n"
           "  --benchmark_counters_tabular=true  counters as columns\n\n"
           "Library help follows.\n\n", prog);
}

} // namespace

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
    for (int i = 0; i < HARNESS_MAX_PARAMS && spec->param_names[i]; i++)
        b->params.push_back(spec->param_names[i]);
    std::string name = b->practice + "/" + b->variant;
    HarnessBench *raw = b.get();
    b->gb = benchmark::RegisterBenchmark(name.c_str(), [raw](benchmark::State &st) { run_one(st, raw); });
    b->gb->Unit(gb_unit(spec->unit));
    if (!b->params.empty()) b->gb->ArgNames(b->params);
    if (spec->timing == HARNESS_TIMING_WALL) b->gb->UseRealTime();
    else b->gb->UseManualTime();
    registry().push_back(std::move(b));
    return raw;
}

void harness_add_instance(HarnessBench *b, const int64_t *values)
{
    if (!b) return;
    b->gb->Args(std::vector<int64_t>(values, values + b->params.size()));
}

void harness_add_values(HarnessBench *b, const int64_t *values, int count)
{
    if (!b) return;
    for (int i = 0; i < count; i++) b->gb->Arg(values[i]);
}

void harness_set_iterations(HarnessBench *b, int64_t iterations)
{
    if (b) b->gb->Iterations(iterations);
}

void harness_set_min_time(HarnessBench *b, double seconds)
{
    if (b) b->gb->MinTime(seconds);
}

bool harness_keep_running(HarnessState *st)
{
    bool more = st->gb->KeepRunning();
    if (!more) st->loop_done = true;
    return more;
}

int64_t harness_param(const HarnessState *st, int i)
{
    // Google Benchmark aborts on an index past the instance's arguments; fail the run instead
    if (i < 0 || (size_t)i >= st->bench->params.size()) {
        if (!st->gb->error_occurred()) st->gb->SkipWithError("error: harness_param index out of range");
        return 0;
    }
    return st->gb->range((size_t)i);
}

void harness_set_iteration_time(HarnessState *st, double seconds) { st->gb->SetIterationTime(seconds); }

void harness_counter(HarnessState *st, const char *name, double value, HarnessCounterKind kind)
{
    benchmark::Counter::Flags flags = benchmark::Counter::kDefaults;
    if (kind == HARNESS_COUNTER_RATE) flags = benchmark::Counter::kIsRate;
    if (kind == HARNESS_COUNTER_AVG_ITERATIONS) flags = benchmark::Counter::kAvgIterations;
    st->gb->counters[name] = benchmark::Counter(value, flags);
}

void harness_set_bytes_processed(HarnessState *st, int64_t bytes) { st->gb->SetBytesProcessed(bytes); }

void harness_set_items_processed(HarnessState *st, int64_t items) { st->gb->SetItemsProcessed(items); }

void harness_set_label(HarnessState *st, const char *label) { st->label = label ? label : ""; }

void harness_skip(HarnessState *st, const char *reason)
{
    st->gb->SkipWithError((std::string(kSkipPrefix) + (reason ? reason : "")).c_str());
}

void harness_fail(HarnessState *st, const char *message)
{
    st->gb->SkipWithError((std::string(kErrorPrefix) + (message ? message : "")).c_str());
}

void harness_pause_timing(HarnessState *st) { st->gb->PauseTiming(); }

void harness_resume_timing(HarnessState *st) { st->gb->ResumeTiming(); }

int64_t harness_max_iterations(const HarnessState *st) { return (int64_t)st->gb->max_iterations; }

void harness_add_context(const char *key, const char *value)
{
    extra_context().emplace_back(key, value ? value : "");
}

int harness_main(int argc, char **argv)
{
    std::string csv_path;
    bool csv_given = false;
    std::vector<char *> args;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--harness_csv=", 14) == 0) {
            csv_path = argv[i] + 14;
            csv_given = true;
        } else if (strncmp(argv[i], "--threads=", 10) == 0) {
            char *end;
            errno = 0;
            long t = strtol(argv[i] + 10, &end, 10);
            if (end == argv[i] + 10 || *end || errno || t < 1 || t > 4096) {
                fprintf(stderr, "%s: error: %s: need an integer >= 1 (see --help)\n", argv[0], argv[i]);
                return 2;
            }
            core_cpu_set_threads((int)t);
        } else {
            args.push_back(argv[i]);
        }
        if (strcmp(argv[i], "--help") == 0) print_help(argv[0]);
    }
    std::string bad = bad_flag_value(argc, argv);
    if (bad.empty() && csv_given && csv_path.empty()) bad = "--harness_csv= needs a file name";
    if (!bad.empty()) {
        fprintf(stderr, "%s: error: %s (see --help)\n", argv[0], bad.c_str());
        return 2;
    }
    int n = (int)args.size();
    args.push_back(nullptr);
    // read before Initialize, which removes the flags it recognises from argv
    auto display = make_display(n, args.data());
    benchmark::Initialize(&n, args.data());
    if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
    // An unwritable CSV is found now, not after a run of many minutes whose rows it loses.
    // It is written to FILE.tmp and renamed over FILE, so both must be writable.
    if (!csv_path.empty()) {
        for (const std::string &path : {csv_path, csv_path + ".tmp"}) {
            FILE *f = fopen(path.c_str(), "a");
            if (!f) {
                fprintf(stderr, "harness: cannot write tidy CSV %s: %s\n", path.c_str(), strerror(errno));
                return 1;
            }
            fclose(f);
        }
        remove((csv_path + ".tmp").c_str());
    }

    SuiteContext ctx;
    context_collect(&ctx);
    for (int i = 0; i < ctx.count; i++) benchmark::AddCustomContext(ctx.keys[i], ctx.values[i]);
    for (const auto &kv : extra_context()) benchmark::AddCustomContext(kv.first, kv.second);
    if (!ctx.has_gpu) fprintf(stderr, "harness: %s; GPU benchmarks will be skipped\n", ctx.no_gpu_reason);

    TidyCsvTee tee(display.get(), csv_path, &ctx);
    benchmark::RunSpecifiedBenchmarks(&tee);
    benchmark::Shutdown();
    if (!tee.write_ok()) return 1;
    return tee.any_error() ? 1 : 0;
}

} // extern "C"
