// harness.cc: adapts the C API of harness.h to Google Benchmark 1.7.1. The only C++
// file in the suite. It parses the suite's flags and the programs' options, expands each
// benchmark's sweep axes into instances (each registered as its own benchmark, named
// practice/variant/axis:value...), labels every run with its role and timing, adds the
// device/library context to the JSON, and tees the runs into a tidy CSV
// (--harness_csv=FILE) and curve points into FILE.curves.csv.
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

namespace {

struct Axis {
    std::string name, values; // values as declared (or as overridden), unexpanded
    bool is_string;
};

struct Instance;

} // namespace

struct HarnessBench {
    std::string practice, variant;
    HarnessRole role;
    HarnessTiming timing;
    HarnessFn fn;
    void *user;
    std::vector<Axis> axes;
    HarnessUnit unit;
    double min_time;
    int64_t iterations;
    HarnessCache cache;
};

namespace {

// One point of the product of a benchmark's axes: a registered Google Benchmark.
struct Instance {
    HarnessBench *bench;
    std::vector<std::pair<std::string, std::string>> params; // axis name -> value, in order
    std::string name;                                        // practice/variant/axis:value...
    int calls = 0;                                           // runs so far (curve rows)
};

struct CurvePoint {
    const Instance *instance;
    int run;
    std::string metric;
    int64_t step, images;
    double seconds, value;
};

} // namespace

struct HarnessState {
    benchmark::State *gb;
    Instance *instance;
    std::string label;
    bool loop_done;
};

namespace {

const char kSkipPrefix[] = "skipped: ";
const char kErrorPrefix[] = "error: ";

struct Option {
    std::string name, env, help, def, value;
    bool is_int;
    int64_t min, max, int_value;
    bool given;
};

struct Globals {
    std::vector<std::unique_ptr<HarnessBench>> benches;
    std::vector<std::unique_ptr<Instance>> instances;
    std::vector<std::pair<std::string, std::string>> extra_context;
    std::vector<Option> options;
    std::map<std::string, std::string> axis_overrides; // --harness_axis, --preset
    std::vector<CurvePoint> curves;
    std::vector<std::string> gb_args;                  // argv for Google Benchmark
    std::string prog = "bench", csv_path;
    HarnessCommon common = {"auto", nullptr, nullptr, 0};
    std::string backend, data, data_dir;
    bool initialised = false, help = false, user_min_time = false;
    bool gpu_state = false; // sample NVML's view of the GPU around every run
};

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

// ---- values ------------------------------------------------------------------------

bool parse_int64(const std::string &s, int64_t *out)
{
    if (s.empty()) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s.c_str(), &end, 10);
    if (*end || errno) return false;
    *out = v;
    return true;
}

std::vector<std::string> split(const std::string &s, char sep)
{
    std::vector<std::string> parts;
    size_t pos = 0;
    for (;;) {
        size_t end = s.find(sep, pos);
        parts.push_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
        if (end == std::string::npos) return parts;
        pos = end + 1;
    }
}

// Expands an axis's values ("8,64", "4096:268435456:*4", "0:30:+10", "tiny,mlp");
// "" on success, else why not.
std::string expand_axis(const Axis &a, std::vector<std::string> *out)
{
    out->clear();
    if (a.values.empty()) return "axis '" + a.name + "' has no values";
    for (const std::string &item : split(a.values, ',')) {
        if (item.empty()) return "axis '" + a.name + "': empty value in '" + a.values + "'";
        if (a.is_string) {
            if (item.find_first_of("/:;= ") != std::string::npos)
                return "axis '" + a.name + "': value '" + item + "' may not contain / : ; = or spaces";
            out->push_back(item);
            continue;
        }
        std::vector<std::string> r = split(item, ':');
        int64_t lo, hi, step;
        if (r.size() == 1) {
            if (!parse_int64(r[0], &lo)) return "axis '" + a.name + "': '" + item + "' is not an integer";
            out->push_back(std::to_string(lo));
            continue;
        }
        bool geometric = r.size() == 3 && !r[2].empty() && r[2][0] == '*';
        bool arithmetic = r.size() == 3 && !r[2].empty() && r[2][0] == '+';
        if (!(geometric || arithmetic) || !parse_int64(r[0], &lo) || !parse_int64(r[1], &hi) ||
            !parse_int64(r[2].substr(1), &step) || hi < lo || (geometric && (step < 2 || lo < 1)) ||
            (arithmetic && step < 1))
            return "axis '" + a.name + "': '" + item + "' is not a range lo:hi:*k (k >= 2, lo >= 1) or lo:hi:+k";
        for (int64_t v = lo; v <= hi; v = geometric ? v * step : v + step) {
            out->push_back(std::to_string(v));
            if (out->size() > 10000) return "axis '" + a.name + "': more than 10000 values";
            if ((geometric && v > hi / step) || (arithmetic && v > hi - step)) break;
        }
    }
    return "";
}

// ---- the run of one instance -----------------------------------------------------------

// NVML's view of the GPU as counters of this run (named "<prefix>_..._<when>").
void gpu_state_counters(benchmark::State &gb, const GpuState &s, const char *when)
{
    std::string w = when;
    if (s.has_clock) gb.counters["gpu_sm_clock_" + w + "_mhz"] = (double)s.sm_clock_mhz;
    if (s.has_temperature) gb.counters["gpu_temp_" + w + "_c"] = (double)s.temperature_c;
    if (s.has_throttle) gb.counters["gpu_throttle_" + w] = (double)s.throttle_reasons;
}

void run_one(benchmark::State &gb, Instance *in)
{
    HarnessState st{&gb, in, std::string(), false};
    in->calls++;
    GpuState before{}, after{};
    bool sampled = g().gpu_state && context_gpu_state(&before);
    in->bench->fn(&st, in->bench->user);
    if (sampled && context_gpu_state(&after)) {
        gpu_state_counters(gb, before, "before");
        gpu_state_counters(gb, after, "after");
    }
    if (!st.loop_done && !gb.error_occurred())
        gb.SkipWithError("error: benchmark returned before finishing its loop");
    std::string label = std::string("role=") + role_name(in->bench->role) +
                        " timing=" + timing_name(in->bench->timing);
    if (in->bench->cache != HARNESS_CACHE_UNSTATED)
        label += std::string(" cache=") + cache_name(in->bench->cache);
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

std::string params_field(const Instance &in)
{
    std::string s;
    for (const auto &p : in.params) s += (s.empty() ? "" : ";") + p.first + ":" + p.second;
    return s;
}

struct Results {
    const Instance *instance = nullptr;
    std::string function_name;
    std::vector<benchmark::BenchmarkReporter::Run> runs;
    std::map<std::string, benchmark::BenchmarkReporter::Run> aggregates;
};

double mean_of(const std::vector<double> &v)
{
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? NAN : s / (double)v.size();
}

// Writes path through path.tmp and a rename, so that a kill never leaves half a file.
bool write_atomically(const std::string &path, const std::string &text)
{
    std::string tmp = path + ".tmp";
    std::ofstream out(tmp);
    if (out) out << text;
    out.close();
    if (!out || rename(tmp.c_str(), path.c_str()) != 0) {
        fprintf(stderr, "harness: error writing %s\n", path.c_str());
        remove(tmp.c_str());
        return false;
    }
    return true;
}

std::string curves_path(const std::string &csv)
{
    std::string stem = csv;
    if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".csv") == 0) stem.resize(stem.size() - 4);
    return stem + ".curves.csv";
}

// FILE.csv -> FILE.reps.csv (the repetitions beside the tidy CSV)
std::string reps_path(const std::string &csv)
{
    std::string stem = csv;
    if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".csv") == 0) stem.resize(stem.size() - 4);
    return stem + ".reps.csv";
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
                index_[key] = results_.size();
                Results res;
                res.function_name = r.run_name.function_name;
                for (const auto &in : g().instances)
                    if (in->name == res.function_name) res.instance = in.get();
                results_.push_back(res);
            }
            Results &res = results_[index_[key]];
            if (r.run_type == Run::RT_Aggregate) res.aggregates[r.aggregate_name] = r;
            else res.runs.push_back(r);
            if (r.error_occurred && r.error_message.rfind(kSkipPrefix, 0) != 0) any_error_ = true;
        }
        // Rewritten after every instance, so a run stopped by a timeout or Ctrl-C keeps
        // the rows it measured.
        if (!path_.empty()) write_ok_ = write_csv() && write_reps() && write_curves();
    }

    void Finalize() override
    {
        display_->Finalize();
        if (!path_.empty()) write_ok_ = write_csv() && write_reps() && write_curves();
    }

    bool any_error() const { return any_error_; }
    bool write_ok() const { return write_ok_; }

private:
    std::set<std::string> param_names() const
    {
        std::set<std::string> names;
        for (const auto &b : g().benches)
            for (const Axis &a : b->axes) names.insert(a.name);
        return names;
    }

    bool write_csv()
    {
        const SuiteContext &ctx = *ctx_;
        std::set<std::string> params = param_names(), counter_names;
        for (const Results &res : results_) {
            for (const Run &r : res.runs)
                for (const auto &c : r.counters) counter_names.insert(c.first);
            for (const auto &a : res.aggregates)
                for (const auto &c : a.second.counters) counter_names.insert(c.first);
        }
        std::string out = "practice,variant,role,timing,params,status,reason,repetitions,iterations,"
                          "time,cpu_time,time_unit,time_median,time_stddev,time_min,time_max,time_cv,cache";
        for (const auto &p : params) out += ",param_" + field(p);
        for (const auto &c : counter_names) out += "," + field(c);
        for (int i = 0; i < ctx.count; i++) out += std::string(",ctx_") + ctx.keys[i];
        for (const auto &kv : g().extra_context) out += ",ctx_" + field(kv.first);
        out += "\n";
        for (const Results &res : results_) out += row(res, ctx, params, counter_names);
        return write_atomically(path_, out);
    }

    // FILE.reps.csv: one row per measured repetition of every instance, so the summary
    // can compute medians, intervals and tests over repetitions (the tidy row has only
    // their aggregates).
    bool write_reps()
    {
        std::set<std::string> params = param_names(), counter_names;
        for (const Results &res : results_)
            for (const Run &r : res.runs)
                for (const auto &c : r.counters) counter_names.insert(c.first);
        std::string out = "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations";
        for (const auto &p : params) out += ",param_" + field(p);
        for (const auto &c : counter_names) out += "," + field(c);
        out += "\n";
        for (const Results &res : results_) {
            const Instance *in = res.instance;
            if (!in) continue;
            bool failed = false;
            for (const Run &r : res.runs) failed = failed || r.error_occurred;
            if (failed) continue; // a skipped or failed instance has no times to keep
            for (const Run &r : res.runs) {
                const HarnessBench *b = in->bench;
                out += field(b->practice) + "," + field(b->variant) + "," + role_name(b->role) + "," +
                       timing_name(b->timing) + "," + field(params_field(*in)) + "," +
                       std::to_string(r.repetition_index + 1) + "," + num(r.GetAdjustedRealTime()) + "," +
                       num(r.GetAdjustedCPUTime()) + "," + unit_name(r.time_unit) + "," +
                       std::to_string((long long)r.iterations);
                for (const auto &p : params) {
                    std::string v;
                    for (const auto &kv : in->params)
                        if (kv.first == p) v = kv.second;
                    out += "," + field(v);
                }
                for (const auto &c : counter_names) {
                    auto it = r.counters.find(c);
                    out += "," + (it != r.counters.end() ? num(it->second.value) : std::string());
                }
                out += "\n";
            }
        }
        return write_atomically(reps_path(path_), out);
    }

    bool write_curves()
    {
        if (g().curves.empty()) return true;
        std::set<std::string> params = param_names();
        std::string out = "practice,variant,role,params";
        for (const auto &p : params) out += ",param_" + field(p);
        out += ",run,metric,step,images,seconds,value\n";
        for (const CurvePoint &c : g().curves) {
            const Instance &in = *c.instance;
            out += field(in.bench->practice) + "," + field(in.bench->variant) + "," +
                   role_name(in.bench->role) + "," + field(params_field(in));
            for (const auto &p : params) {
                std::string v;
                for (const auto &kv : in.params)
                    if (kv.first == p) v = kv.second;
                out += "," + field(v);
            }
            out += "," + std::to_string(c.run) + "," + field(c.metric) + "," + std::to_string(c.step) +
                   "," + std::to_string(c.images) + "," + num(c.seconds) + "," + num(c.value) + "\n";
        }
        return write_atomically(curves_path(path_), out);
    }

    std::string row(const Results &res, const SuiteContext &ctx, const std::set<std::string> &params,
                    const std::set<std::string> &counter_names)
    {
        const Instance *in = res.instance;
        const HarnessBench *b = in ? in->bench : nullptr;
        const Run *first = !res.runs.empty() ? &res.runs[0]
                           : !res.aggregates.empty() ? &res.aggregates.begin()->second : nullptr;
        std::string status = "ok", reason;
        for (const Run &r : res.runs)
            if (r.error_occurred) {
                bool skip = r.error_message.rfind(kSkipPrefix, 0) == 0;
                status = skip ? "skipped" : "error";
                reason = r.error_message.substr(skip ? strlen(kSkipPrefix)
                                                : r.error_message.rfind(kErrorPrefix, 0) == 0
                                                    ? strlen(kErrorPrefix) : 0);
            }
        std::vector<double> times, cpu, iters;
        for (const Run &r : res.runs)
            if (!r.error_occurred) {
                times.push_back(r.GetAdjustedRealTime());
                cpu.push_back(r.GetAdjustedCPUTime());
                iters.push_back((double)r.iterations);
            }
        auto agg = [&](const char *name, bool real) -> double {
            auto it = res.aggregates.find(name);
            if (it == res.aggregates.end()) return NAN;
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
        size_t reps = res.runs.size();
        if (res.aggregates.count("mean")) reps = (size_t)res.aggregates.at("mean").repetitions;
        if (status != "ok") time = cpu_time = median = stddev = NAN;
        std::string out = field(b ? b->practice : res.function_name) + "," + field(b ? b->variant : "") +
                          "," + (b ? role_name(b->role) : "") + "," + (b ? timing_name(b->timing) : "") +
                          "," + field(in ? params_field(*in) : "") + "," + status + "," + field(reason) +
                          "," + std::to_string(reps) + "," + num(mean_of(iters)) + "," + num(time) + "," +
                          num(cpu_time) + "," + (first ? unit_name(first->time_unit) : "") + "," +
                          num(median) + "," + num(stddev) + "," +
                          (status == "ok" && !sorted.empty() ? num(sorted.front()) : "") + "," +
                          (status == "ok" && !sorted.empty() ? num(sorted.back()) : "") + "," +
                          (status == "ok" && sorted.size() > 1 && time > 0 ? num(stddev / time) : "") +
                          "," + (b ? cache_name(b->cache) : "");
        for (const auto &p : params) {
            std::string v;
            if (in)
                for (const auto &kv : in->params)
                    if (kv.first == p) v = kv.second;
            out += "," + field(v);
        }
        for (const auto &c : counter_names) {
            double v = NAN;
            auto mean_it = res.aggregates.find("mean");
            if (mean_it != res.aggregates.end() && mean_it->second.counters.count(c)) {
                v = mean_it->second.counters.at(c).value;
            } else {
                std::vector<double> vals;
                for (const Run &r : res.runs)
                    if (!r.error_occurred && r.counters.count(c)) vals.push_back(r.counters.at(c).value);
                v = mean_of(vals);
            }
            out += "," + (status == "ok" ? num(v) : std::string());
        }
        for (int i = 0; i < ctx.count; i++) out += "," + field(ctx.values[i]);
        for (const auto &kv : g().extra_context) out += "," + field(kv.second);
        return out + "\n";
    }

    benchmark::BenchmarkReporter *display_;
    std::string path_;
    const SuiteContext *ctx_;
    std::vector<Results> results_;
    std::map<std::string, size_t> index_;
    bool any_error_ = false;
    bool write_ok_ = true;
};

// ---- flags -------------------------------------------------------------------------

// The value of --name=VALUE in the Google Benchmark arguments (last one wins).
std::string gb_flag(const char *name, const char *fallback)
{
    std::string prefix = std::string("--") + name + "=";
    std::string value = fallback;
    for (const std::string &a : g().gb_args)
        if (a.compare(0, prefix.size(), prefix) == 0) value = a.substr(prefix.size());
    return value;
}

// ---- the console display ------------------------------------------------------------
// Google Benchmark 1.7.1 has no skip-with-message: a harness_skip is a SkipWithError whose
// message starts with kSkipPrefix, and the stock console prints it as "ERROR OCCURRED:
// 'skipped: ...'". This console prints those runs as "SKIPPED (reason)" and leaves real
// errors (harness_fail, library errors) as the stock ERROR OCCURRED lines. Console only:
// the JSON and the tidy CSV are written by their own reporters and say what they said.
class SkipAwareConsoleReporter : public benchmark::ConsoleReporter {
public:
    using benchmark::ConsoleReporter::ConsoleReporter;

protected:
    void PrintRunData(const Run &run) override
    {
        if (!run.error_occurred || run.error_message.rfind(kSkipPrefix, 0) != 0) {
            benchmark::ConsoleReporter::PrintRunData(run);
            return;
        }
        std::ostream &out = GetOutputStream();
        bool color = (output_options_ & OO_Color) != 0;
        std::string name = run.benchmark_name();
        out << (color ? "\033[32m" : "") << name;
        if (name.size() < name_field_width_) out << std::string(name_field_width_ - name.size(), ' ');
        out << (color ? "\033[33m" : "") << " SKIPPED ("
            << run.error_message.substr(strlen(kSkipPrefix)) << ")" << (color ? "\033[0m" : "")
            << "\n";
    }
};
// ---- end of the console display block ------------------------------------------------

std::unique_ptr<benchmark::BenchmarkReporter> make_display()
{
    std::string format = gb_flag("benchmark_format", "console");
    if (format == "json") return std::make_unique<benchmark::JSONReporter>();
    // Deprecated upstream but still a documented --benchmark_format; keep it working.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    if (format == "csv") return std::make_unique<benchmark::CSVReporter>();
#pragma GCC diagnostic pop
    std::string color = gb_flag("benchmark_color", "auto");
    std::string tabular = gb_flag("benchmark_counters_tabular", "false");
    int opts = benchmark::ConsoleReporter::OO_None;
    bool tty = isatty(STDOUT_FILENO) && getenv("TERM") && strcmp(getenv("TERM"), "dumb") != 0;
    if (color == "true" || color == "yes" || (color == "auto" && tty))
        opts |= benchmark::ConsoleReporter::OO_Color;
    if (tabular == "true" || tabular == "yes" || tabular == "1")
        opts |= benchmark::ConsoleReporter::OO_Tabular;
    return std::make_unique<SkipAwareConsoleReporter>(
        (benchmark::ConsoleReporter::OutputOptions)opts);
}

// Flag values Google Benchmark would abort on (a negative repetition count), silently run
// nothing for (0 repetitions) or answer with its usage and exit status 0 (an unknown
// format or time unit); "" when every value is usable.
std::string bad_gb_flag_value()
{
    std::string reps = gb_flag("benchmark_repetitions", "1");
    char *end;
    long n = strtol(reps.c_str(), &end, 10);
    if (reps.empty() || *end || n < 1)
        return "--benchmark_repetitions=" + reps + ": need an integer >= 1";
    for (const char *name : {"benchmark_format", "benchmark_out_format"}) {
        std::string v = gb_flag(name, "console");
        if (v != "console" && v != "json" && v != "csv")
            return std::string("--") + name + "=" + v + ": need console, json or csv";
    }
    std::string unit = gb_flag("benchmark_time_unit", "ms");
    if (unit != "ns" && unit != "us" && unit != "ms" && unit != "s")
        return "--benchmark_time_unit=" + unit + ": need ns, us, ms or s";
    return "";
}

Option *find_option(const std::string &name)
{
    for (Option &o : g().options)
        if (o.name == name) return &o;
    return nullptr;
}

// Checks and stores an option's value; "" or why not.
std::string set_option(Option &o, const std::string &value, const std::string &source)
{
    if (o.is_int) {
        int64_t v;
        if (!parse_int64(value, &v) || v < o.min || v > o.max)
            return source + "='" + value + "' is not an integer in " + std::to_string(o.min) + ".." +
                   std::to_string(o.max);
        o.int_value = v;
    }
    o.value = value;
    o.given = true;
    return "";
}

// The common flags and harness flags; "" or why not. Returns true in *used when arg was ours.
std::string parse_suite_flag(const std::string &arg, bool *used)
{
    Globals &G = g();
    *used = true;
    auto value_of = [&](const char *prefix) -> const char * {
        size_t n = strlen(prefix);
        return arg.compare(0, n, prefix) == 0 ? arg.c_str() + n : nullptr;
    };
    const char *v;
    if ((v = value_of("--harness_csv="))) {
        if (!*v) return "--harness_csv= needs a file name";
        G.csv_path = v;
    } else if ((v = value_of("--harness_axis="))) {
        std::string s = v;
        size_t eq = s.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
            return "--harness_axis=" + s + ": need NAME=V1,V2,... (e.g. --harness_axis=batch=32,64)";
        G.axis_overrides[s.substr(0, eq)] = s.substr(eq + 1);
    } else if ((v = value_of("--preset="))) {
        if (!*v) return "--preset= needs one or more preset names";
        G.axis_overrides["preset"] = v;
    } else if ((v = value_of("--backend="))) {
        CoreBackend b;
        if (core_backend_parse(v, &b) != 0) return std::string("--backend=") + v + ": need auto, cpu, cpu-ref or cuda";
        G.backend = v;
        G.common.backend = G.backend.c_str();
    } else if ((v = value_of("--data="))) {
        if (strcmp(v, "synthetic") != 0 && strcmp(v, "images") != 0)
            return std::string("--data=") + v + ": need synthetic or images";
        G.data = v;
        G.common.data = G.data.c_str();
    } else if ((v = value_of("--data_dir="))) {
        if (!*v) return "--data_dir= needs a folder";
        G.data_dir = v;
        G.common.data_dir = G.data_dir.c_str();
    } else if ((v = value_of("--threads="))) {
        int64_t t;
        if (!parse_int64(v, &t) || t < 1 || t > 4096) return std::string("--threads=") + v + ": need an integer >= 1";
        G.common.threads = (int)t;
        core_cpu_set_threads((int)t);
    } else {
        *used = false;
        if (arg.compare(0, 2, "--") == 0) {
            std::string s = arg.substr(2);
            size_t eq = s.find('=');
            Option *o = find_option(s.substr(0, eq));
            if (o) {
                *used = true;
                if (eq == std::string::npos) return "--" + o->name + " needs a value: --" + o->name + "=VALUE";
                return set_option(*o, s.substr(eq + 1), "--" + o->name);
            }
        }
    }
    return "";
}

void print_help()
{
    Globals &G = g();
    printf("%s: a practice benchmark of the tuning-practice suite.\n\n"
           "Suite flags:\n"
           "  --harness_csv=FILE       also write a tidy CSV (one row per benchmark instance:\n"
           "                           role, axes, time, counters and the device/library\n"
           "                           context) and, for curves, FILE.curves.csv\n"
           "  --harness_axis=NAME=V,...  replace the values of a sweep axis (below), e.g.\n"
           "                           --harness_axis=batch=32,64,128; integer ranges lo:hi:*k\n"
           "                           (geometric) or lo:hi:+k; repeat for several axes\n"
           "  --preset=NAME[,NAME]     the core presets to run (the 'preset' axis): tiny, mlp,\n"
           "                           small, medium, resnet18\n"
           "  --backend=B              auto | cpu | cpu-ref | cuda (default auto: CUDA when a\n"
           "                           GPU is usable, else the fast CPU backend)\n"
           "  --data=synthetic|images  the training data where a practice can use either\n"
           "  --data_dir=DIR           your ImageFolder (DIR/<class>/*.jpg) for --data=images\n"
           "  --threads=N              threads of the core's CPU backend, as torch.set_num_threads\n"
           "                           (default: the machine's cores; context key cpu_threads)\n",
           G.prog.c_str());
    if (!G.options.empty()) {
        printf("\nOptions of this program (environment variable read when the flag is absent):\n");
        for (const Option &o : G.options) {
            std::string head = "  --" + o.name + "=" + (o.is_int ? "N" : "VALUE");
            printf("%-27s %s [%s]%s%s\n", head.c_str(), o.help.c_str(),
                   o.def.empty() ? "unset" : o.def.c_str(), o.env.empty() ? "" : "; env ",
                   o.env.c_str());
        }
    }
    std::map<std::string, std::set<std::string>> axes; // practice -> "name=values"
    for (const auto &b : G.benches)
        for (const Axis &a : b->axes) axes[b->practice].insert(a.name + "=" + a.values);
    if (!axes.empty()) {
        printf("\nSweep axes and their values (override with --harness_axis=NAME=...):\n");
        for (const auto &p : axes) {
            printf("  %s:", p.first.c_str());
            for (const std::string &a : p.second) printf(" %s", a.c_str());
            printf("\n");
        }
    }
    printf("\nGoogle Benchmark flags (all accepted), most useful:\n"
           "  --benchmark_list_tests             list the benchmarks and exit\n"
           "  --benchmark_filter=REGEX           run only matching benchmarks\n"
           "  --benchmark_repetitions=N          repeat each; adds mean/median/stddev/cv, and\n"
           "                                     FILE.reps.csv beside --harness_csv=FILE.csv\n"
           "                                     (one row per repetition); each repetition\n"
           "                                     runs 1/N of the benchmark's minimum time\n"
           "                                     (at least 0.05 s) unless the next flag is given\n"
           "  --benchmark_min_time=SECONDS       minimum time per benchmark and repetition\n"
           "                                     (else each benchmark's own default)\n"
           "  --benchmark_format=console|json|csv  standard output format\n"
           "  --benchmark_out=FILE --benchmark_out_format=json|console|csv\n"
           "  --benchmark_enable_random_interleaving=true\n"
           "  --benchmark_counters_tabular=true  counters as columns\n\n"
           "Library help follows.\n\n");
}

// Registers the instances of every benchmark with Google Benchmark; "" or why not.
std::string register_instances()
{
    Globals &G = g();
    const double kLibraryMinTime = 0.5;        // Google Benchmark 1.7.1's default
    const double kMinTimePerRepetition = 0.05;
    double repetitions = (double)std::max(1L, strtol(gb_flag("benchmark_repetitions", "1").c_str(), nullptr, 10));
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
            gb->Unit(gb_unit(b->unit));
            if (b->timing == HARNESS_TIMING_WALL) gb->UseRealTime();
            else gb->UseManualTime();
            // a fixed count always; a program's own minimum time only when the user gave none,
            // shared out over the repetitions so that N repetitions measure about as long
            // as one did (each at least kMinTimePerRepetition)
            if (b->iterations > 0) gb->Iterations(b->iterations);
            else if (!G.user_min_time && (b->min_time > 0 || repetitions > 1))
                gb->MinTime(std::max((b->min_time > 0 ? b->min_time : kLibraryMinTime) / repetitions,
                                     repetitions > 1 ? kMinTimePerRepetition : 0.0));
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

} // namespace

extern "C" {

void harness_option_int(const char *name, int64_t def, int64_t min, int64_t max, const char *env,
                        const char *help)
{
    Option o{name, env ? env : "", help ? help : "", std::to_string(def), std::to_string(def),
             true, min, max, def, false};
    g().options.push_back(o);
}

void harness_option_str(const char *name, const char *def, const char *env, const char *help)
{
    Option o{name, env ? env : "", help ? help : "", def ? def : "", def ? def : "", false, 0, 0, 0, false};
    g().options.push_back(o);
}

int64_t harness_option_int_value(const char *name)
{
    Option *o = find_option(name);
    return o ? o->int_value : 0;
}

const char *harness_option_str_value(const char *name)
{
    Option *o = find_option(name);
    return o && !o->value.empty() ? o->value.c_str() : nullptr;
}

const HarnessCommon *harness_common(void) { return &g().common; }

int harness_init(int argc, char **argv)
{
    Globals &G = g();
    G.prog = argc > 0 && argv[0] ? argv[0] : "bench";
    G.gb_args.clear();
    std::string bad;
    for (int i = 1; i < argc && bad.empty(); i++) {
        std::string arg = argv[i];
        bool used = false;
        bad = parse_suite_flag(arg, &used);
        if (used) continue;
        if (arg == "--help") G.help = true;
        if (arg.compare(0, 21, "--benchmark_min_time=") == 0) G.user_min_time = true;
        G.gb_args.push_back(arg);
    }
    // Options not given as flags: their environment variables, then their defaults.
    for (Option &o : G.options) {
        if (!bad.empty() || o.given || o.env.empty()) continue;
        const char *e = getenv(o.env.c_str());
        if (e && *e) bad = set_option(o, e, o.env);
    }
    if (bad.empty()) bad = bad_gb_flag_value();
    if (!bad.empty()) {
        fprintf(stderr, "%s: error: %s (see --help)\n", G.prog.c_str(), bad.c_str());
        return 2;
    }
    G.initialised = true;
    return -1;
}

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
    std::vector<char *> args;
    args.push_back(const_cast<char *>(G.prog.c_str()));
    for (std::string &a : G.gb_args) args.push_back(&a[0]);
    int n = (int)args.size();
    args.push_back(nullptr);
    auto display = make_display();
    benchmark::Initialize(&n, args.data());  // --help: prints the library's and exits
    if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
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
    for (const auto &kv : G.extra_context) benchmark::AddCustomContext(kv.first, kv.second);
    if (!ctx.has_gpu) fprintf(stderr, "harness: %s; GPU benchmarks will be skipped\n", ctx.no_gpu_reason);
    G.gpu_state = ctx.has_gpu;

    TidyCsvTee tee(display.get(), G.csv_path, &ctx);
    benchmark::RunSpecifiedBenchmarks(&tee);
    benchmark::Shutdown();
    if (!tee.write_ok()) return 1;
    return tee.any_error() ? 1 : 0;
}

int harness_main(int argc, char **argv)
{
    int rc = harness_init(argc, argv);
    return rc >= 0 ? rc : harness_run();
}

bool harness_keep_running(HarnessState *st)
{
    bool more = st->gb->KeepRunning();
    if (!more) st->loop_done = true;
    return more;
}

static const std::string *axis_value(HarnessState *st, const char *name, bool want_string)
{
    const Instance *in = st->instance;
    for (size_t i = 0; i < in->params.size(); i++)
        if (in->params[i].first == name && in->bench->axes[i].is_string == want_string)
            return &in->params[i].second;
    if (!st->gb->error_occurred())
        st->gb->SkipWithError((std::string(kErrorPrefix) + "no " + (want_string ? "string" : "integer") +
                               " axis '" + name + "' in this benchmark").c_str());
    return nullptr;
}

int64_t harness_axis_int(HarnessState *st, const char *name)
{
    const std::string *v = axis_value(st, name, false);
    int64_t x = 0;
    return v && parse_int64(*v, &x) ? x : 0;
}

const char *harness_axis_str(HarnessState *st, const char *name)
{
    const std::string *v = axis_value(st, name, true);
    return v ? v->c_str() : "";
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

void harness_curve_point(HarnessState *st, const char *metric, int64_t step, int64_t images,
                         double seconds, double value)
{
    g().curves.push_back(CurvePoint{st->instance, st->instance->calls, metric ? metric : "", step,
                                    images, seconds, value});
}

void harness_add_context(const char *key, const char *value)
{
    g().extra_context.emplace_back(key, value ? value : "");
}

} // extern "C"
