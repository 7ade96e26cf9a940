// harness.cc: adapts the C API of harness.h to Google Benchmark 1.7.1. The only C++
// file in the suite. It parses the suite's flags and the programs' options, expands each
// benchmark's sweep axes into instances (each registered as its own benchmark, named
// practice/variant/axis:value...), labels every run with its role and timing, adds the
// device/library context to the JSON, and tees the runs into a tidy CSV
// (--harness_csv=FILE) and curve points into FILE.curves.csv.
#include "bench/driver/harness.h"

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
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
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/driver/context.h"
#include "kernels/core.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"

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
    std::string gb_name;      // the name Google Benchmark filters on (name + its suffixes)
    int calls = 0;            // runs so far (curve rows)
    int repetitions_done = 0; // finished repetitions written so far
};

struct CurvePoint {
    const Instance *instance;
    int run;
    std::string metric;
    int64_t step, images;
    double seconds, value;
};

} // namespace

// One run of an instance. Besides Google Benchmark's state it keeps its own view of the
// time measured (the same timer pauses and manual times), because Google Benchmark 1.7.1
// hands a run to the reporters only after the instance's last repetition: the harness
// writes each repetition as it finishes from this view (see commit_repetition).
struct HarnessState {
    benchmark::State *gb;
    Instance *instance;
    std::string label;
    bool loop_done = false;
    bool started = false, timing = false;
    double real_from = 0, cpu_from = 0;         // when the timer last started
    double real_used = 0, cpu_used = 0, manual_used = 0;
    std::string error;                          // the message given to SkipWithError
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
    int repetitions = 1;    // --benchmark_repetitions
    // The last run of an instance in its first repetition: Google Benchmark may still
    // run it again with more iterations (a trial), so it is written only once the next
    // run shows it was the repetition (see resolve_pending).
    bool has_pending = false;
    Instance *pending_instance = nullptr;
    int64_t pending_iterations = 0;
    benchmark::BenchmarkReporter::Run pending_run;
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

double seconds_now(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void timer_start(HarnessState *st)
{
    st->timing = true;
    st->real_from = seconds_now(CLOCK_MONOTONIC);
    st->cpu_from = seconds_now(CLOCK_THREAD_CPUTIME_ID); // Google Benchmark's CPU time
}

void timer_stop(HarnessState *st, double real_now, double cpu_now)
{
    if (!st->timing) return;
    st->timing = false;
    st->real_used += real_now - st->real_from;
    st->cpu_used += cpu_now - st->cpu_from;
}

void skip_with_error(HarnessState *st, const std::string &message)
{
    if (st->error.empty()) st->error = message;
    st->gb->SkipWithError(message.c_str());
}

void commit_repetition(Instance *in, const benchmark::BenchmarkReporter::Run &run);

// The finished run as Google Benchmark will report it (its time, iterations and counters
// finished as its runner does), from the harness's own view of the timer.
benchmark::BenchmarkReporter::Run run_of(const HarnessState &st, benchmark::State &gb, const Instance *in)
{
    benchmark::BenchmarkReporter::Run r;
    r.run_name.function_name = in->name;
    r.run_type = benchmark::BenchmarkReporter::Run::RT_Iteration;
    r.error_occurred = gb.error_occurred();
    r.error_message = st.error;
    r.iterations = gb.iterations();
    r.time_unit = gb_unit(in->bench->unit);
    bool manual = in->bench->timing != HARNESS_TIMING_WALL;
    double seconds = manual ? st.manual_used : st.real_used;
    r.real_accumulated_time = seconds;
    r.cpu_accumulated_time = st.cpu_used;
    r.repetition_index = in->repetitions_done;
    r.repetitions = g().repetitions;
    r.threads = 1;
    for (const auto &kv : gb.counters) {
        benchmark::Counter c = kv.second;
        double v = c.value;
        if ((c.flags & benchmark::Counter::kIsRate) && seconds > 0) v /= seconds;
        if (c.flags & benchmark::Counter::kIsIterationInvariant) v *= (double)r.iterations;
        if ((c.flags & benchmark::Counter::kAvgIterations) && r.iterations > 0) v /= (double)r.iterations;
        if (c.flags & benchmark::Counter::kInvert) v = 1.0 / v;
        c.value = v;
        r.counters[kv.first] = c;
    }
    return r;
}

// Google Benchmark runs the first repetition of an instance with growing iteration counts
// until it lasts long enough (each trial strictly longer), and every later repetition
// once, with the count the first one settled on. So the last run of an instance was a
// finished repetition when any other instance runs next, or when the same one runs again
// with no more iterations; a longer run of the same instance means it was a trial.
void resolve_pending(const Instance *next, int64_t next_iterations)
{
    Globals &G = g();
    if (!G.has_pending) return;
    if (next && next == G.pending_instance && next_iterations > G.pending_iterations) {
        G.has_pending = false;  // a trial: the repetition is the longer run now starting
        return;
    }
    G.has_pending = false;
    commit_repetition(G.pending_instance, G.pending_run);
}

void run_one(benchmark::State &gb, Instance *in)
{
    resolve_pending(in, (int64_t)gb.max_iterations);
    HarnessState st;
    st.gb = &gb;
    st.instance = in;
    in->calls++;
    // Every run starts with no error: a kind left by an earlier run (out of memory, no
    // device) must not turn this run's failure into a skip.
    error_clear();
    GpuState before{}, after{};
    bool sampled = g().gpu_state && context_gpu_state(&before);
    in->bench->fn(&st, in->bench->user);
    if (sampled && context_gpu_state(&after)) {
        gpu_state_counters(gb, before, "before");
        gpu_state_counters(gb, after, "after");
    }
    if (!st.loop_done && !gb.error_occurred())
        skip_with_error(&st, "error: benchmark returned before finishing its loop");
    std::string label = std::string("role=") + role_name(in->bench->role) +
                        " timing=" + timing_name(in->bench->timing);
    if (in->bench->cache != HARNESS_CACHE_UNSTATED)
        label += std::string(" cache=") + cache_name(in->bench->cache);
    if (!st.label.empty()) label += " " + st.label;
    gb.SetLabel(label);
    benchmark::BenchmarkReporter::Run run = run_of(st, gb, in);
    run.report_label = label;
    // A run is a whole repetition when its count was fixed, when it failed or skipped (no
    // retry follows), or after the first repetition; else it may have been a trial.
    if (in->repetitions_done > 0 || in->bench->iterations > 0 || gb.error_occurred()) {
        commit_repetition(in, run);
    } else {
        Globals &G = g();
        G.has_pending = true;
        G.pending_instance = in;
        G.pending_iterations = (int64_t)gb.iterations();
        G.pending_run = run;
    }
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
    // Google Benchmark has reported the instance (its last repetition is done): the runs
    // are its own. Before that they are the harness's, written as each repetition ends.
    bool reported = false;
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

// FILE.csv -> FILE.partial: written only when a signal cut the run, one line
// "rows_done rows_planned" (repetitions finished, instances x repetitions planned).
std::string partial_path(const std::string &csv)
{
    std::string stem = csv;
    if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".csv") == 0) stem.resize(stem.size() - 4);
    return stem + ".partial";
}

class TidyCsvTee : public benchmark::BenchmarkReporter {
public:
    TidyCsvTee(benchmark::BenchmarkReporter *display, std::string path, const SuiteContext *ctx)
        : display_(display), path_(std::move(path)), ctx_(ctx) {}

    bool ReportContext(const Context &ctx) override { return display_->ReportContext(ctx); }

    void ReportRuns(const std::vector<Run> &runs) override
    {
        display_->ReportRuns(runs);
        std::lock_guard<std::mutex> lock(mutex_);
        for (const Run &r : runs) {
            Results &res = results_for(r.run_name.function_name);
            if (!res.reported) {  // Google Benchmark's runs replace the harness's own
                res.reported = true;
                res.runs.clear();
                res.aggregates.clear();
            }
            if (r.run_type == Run::RT_Aggregate) res.aggregates[r.aggregate_name] = r;
            else res.runs.push_back(r);
            if (r.error_occurred && r.error_message.rfind(kSkipPrefix, 0) != 0) any_error_ = true;
        }
        write_all();
    }

    void Finalize() override
    {
        display_->Finalize();
        std::lock_guard<std::mutex> lock(mutex_);
        write_all();
    }

    // A repetition that has just finished, before Google Benchmark reports its instance:
    // into the CSVs at once, so that a cut keeps it.
    void Commit(Instance *in, const Run &run)
    {
        std::lock_guard<std::mutex> lock(mutex_);
        Results &res = results_for(in->name);
        in->repetitions_done++;
        repetitions_done_++;
        if (res.reported) return;
        res.runs.push_back(run);
        if (run.error_occurred && run.error_message.rfind(kSkipPrefix, 0) != 0) any_error_ = true;
        write_all();
    }

    // The run was cut by a signal: waits for a write in progress, writes what is done
    // (rows of unfinished instances marked partial) and FILE.partial, and exits.
    // Exits with 128 + sig holding the lock, so that no later write starts.
    [[noreturn]] void Cut(int planned, int sig)
    {
        std::lock_guard<std::mutex> lock(mutex_);
        cut_ = true;
        write_all();
        if (!path_.empty()) {
            char line[64];
            snprintf(line, sizeof line, "%d %d\n", repetitions_done_, planned);
            write_atomically(partial_path(path_), line);
        }
        fflush(stdout);
        fprintf(stderr, "\nharness: cut by signal %d: %d of %d repetitions done and kept%s%s\n", sig,
                repetitions_done_, planned, path_.empty() ? "" : " in ", path_.c_str());
        fflush(stderr);
        _exit(128 + sig);
    }

    bool any_error() const { return any_error_; }
    bool write_ok() const { return write_ok_; }

private:
    Results &results_for(const std::string &function_name)
    {
        auto it = index_.find(function_name);
        if (it != index_.end()) return results_[it->second];
        index_[function_name] = results_.size();
        Results res;
        res.function_name = function_name;
        for (const auto &in : g().instances)
            if (in->name == function_name) res.instance = in.get();
        results_.push_back(res);
        return results_.back();
    }

    // Rewrites every file from what is known: each through FILE.tmp and a rename, so a
    // reader (or a kill) never sees half a file.
    void write_all()
    {
        if (!path_.empty()) write_ok_ = write_csv() && write_reps() && write_curves() && write_ok_;
    }

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
        // An error in any repetition makes the row an error (its first error is the
        // reason), whatever the other repetitions did; else a skip makes it skipped.
        std::string status = "ok", reason;
        for (const Run &r : res.runs) {
            if (!r.error_occurred || status == "error") continue;
            bool skip = r.error_message.rfind(kSkipPrefix, 0) == 0;
            if (skip && status == "skipped") continue;
            status = skip ? "skipped" : "error";
            reason = r.error_message.substr(skip ? strlen(kSkipPrefix)
                                            : r.error_message.rfind(kErrorPrefix, 0) == 0
                                                ? strlen(kErrorPrefix) : 0);
        }
        // Repetitions still to come (an interleaved run in progress, or one cut by a
        // signal or a kill): the row holds the ones done so far.
        if (status == "ok" && !res.reported && (int)res.runs.size() < g().repetitions) {
            status = "partial";
            reason = std::to_string(res.runs.size()) + " of " + std::to_string(g().repetitions) +
                     " repetitions" + (cut_ ? " (the run was cut)" : " (the run has not finished)");
        }
        bool has_times = status == "ok" || status == "partial";
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
        if (!has_times) time = cpu_time = median = stddev = NAN;
        std::string out = field(b ? b->practice : res.function_name) + "," + field(b ? b->variant : "") +
                          "," + (b ? role_name(b->role) : "") + "," + (b ? timing_name(b->timing) : "") +
                          "," + field(in ? params_field(*in) : "") + "," + status + "," + field(reason) +
                          "," + std::to_string(reps) + "," + num(mean_of(iters)) + "," + num(time) + "," +
                          num(cpu_time) + "," + (first ? unit_name(first->time_unit) : "") + "," +
                          num(median) + "," + num(stddev) + "," +
                          (has_times && !sorted.empty() ? num(sorted.front()) : "") + "," +
                          (has_times && !sorted.empty() ? num(sorted.back()) : "") + "," +
                          (has_times && sorted.size() > 1 && time > 0 ? num(stddev / time) : "") +
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
            out += "," + (has_times ? num(v) : std::string());
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
    std::mutex mutex_;  // one writer at a time: the runs, the reporter and a cut
    int repetitions_done_ = 0;
    bool cut_ = false;
    bool any_error_ = false;
    bool write_ok_ = true;
};

TidyCsvTee *the_tee; // while harness_run runs

// The --benchmark_out reporter, behind a lock and flushed after every write, so that a cut
// can close it (Finalize: a JSON file stays valid, with every instance reported so far)
// while the program's thread is elsewhere. Google Benchmark opens the file and hands this
// reporter its stream; the format's own reporter writes through it.
class LockedFileReporter : public benchmark::BenchmarkReporter {
public:
    explicit LockedFileReporter(std::unique_ptr<benchmark::BenchmarkReporter> inner) : inner_(std::move(inner)) {}

    bool ReportContext(const Context &ctx) override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        attach();
        bool ok = inner_->ReportContext(ctx);
        GetOutputStream().flush();
        return ok;
    }

    void ReportRuns(const std::vector<Run> &runs) override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (finalized_) return;
        attach();
        inner_->ReportRuns(runs);
        GetOutputStream().flush();
    }

    void Finalize() override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (finalized_) return;
        finalized_ = true;
        attach();
        inner_->Finalize();
        GetOutputStream().flush();
    }

private:
    void attach()
    {
        inner_->SetOutputStream(&GetOutputStream());
        inner_->SetErrorStream(&GetErrorStream());
    }

    std::unique_ptr<benchmark::BenchmarkReporter> inner_;
    std::mutex mutex_;
    bool finalized_ = false;
};

LockedFileReporter *the_file_reporter; // while harness_run runs, with --benchmark_out

void commit_repetition(Instance *in, const benchmark::BenchmarkReporter::Run &run)
{
    if (the_tee) the_tee->Commit(in, run);
}

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
    G.repetitions = (int)repetitions;
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
            raw->gb_name = raw->name;
            if (b->iterations > 0) {
                gb->Iterations(b->iterations);
            } else if (!G.user_min_time && (b->min_time > 0 || repetitions > 1)) {
                double min_time = std::max((b->min_time > 0 ? b->min_time : kLibraryMinTime) / repetitions,
                                           repetitions > 1 ? kMinTimePerRepetition : 0.0);
                gb->MinTime(min_time);
                char suffix[64];
                snprintf(suffix, sizeof suffix, "/min_time:%0.3f", min_time);
                raw->gb_name += suffix;
            }
            if (b->iterations > 0) raw->gb_name += "/iterations:" + std::to_string((long long)b->iterations);
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
// extended regular expression searched in the full name; a leading '-' negates).
int planned_instances()
{
    std::string spec = gb_flag("benchmark_filter", "");
    if (spec.empty() || spec == "all") spec = ".";
    bool negate = spec[0] == '-';
    if (negate) spec = spec.substr(1);
    int n = 0;
    try {
        std::regex re(spec, std::regex::extended);
        for (const auto &in : g().instances)
            if (std::regex_search(in->gb_name, re) != negate) n++;
    } catch (const std::regex_error &) {
        n = (int)g().instances.size();
    }
    return n;
}

// SIGINT/SIGTERM (timeout --signal=INT at a deadline, Ctrl-C): the handler only writes
// the signal's number into a pipe; a watcher thread waits for it, finishes the write in
// progress, writes what is done and exits with 128 + the signal. A forked child that has
// not exec'd (a loader worker) keeps the default action: the pipe is its parent's.
int cut_pipe[2] = {-1, -1};
pid_t harness_pid;

void on_cut_signal(int sig)
{
    if (getpid() != harness_pid) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    unsigned char b = (unsigned char)sig;
    ssize_t ignored = write(cut_pipe[1], &b, 1);
    (void)ignored;
}

void watch_for_cut(TidyCsvTee *tee, int planned)
{
    unsigned char sig = 0;
    while (read(cut_pipe[0], &sig, 1) < 0 && errno == EINTR) {}
    if (sig == 0) return;  // the run finished
    if (the_file_reporter) the_file_reporter->Finalize();
    tee->Cut(planned, sig);
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
    if (!ctx.has_gpu)
        fprintf(stderr, "harness: %s; GPU benchmarks will %s\n", ctx.no_gpu_reason,
                error_expect_gpu() ? "fail (SUITE_EXPECT_GPU=1: this machine should have one)" : "be skipped");
    G.gpu_state = ctx.has_gpu;

    TidyCsvTee tee(display.get(), G.csv_path, &ctx);
    the_tee = &tee;
    std::unique_ptr<LockedFileReporter> file_reporter;
    if (!gb_flag("benchmark_out", "").empty()) {
        std::string format = gb_flag("benchmark_out_format", "json");
        std::unique_ptr<benchmark::BenchmarkReporter> inner;
        if (format == "console")
            inner = std::make_unique<benchmark::ConsoleReporter>(benchmark::ConsoleReporter::OO_None);
        else if (format == "json")
            inner = std::make_unique<benchmark::JSONReporter>();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        if (format == "csv") inner = std::make_unique<benchmark::CSVReporter>();
#pragma GCC diagnostic pop
        file_reporter = std::make_unique<LockedFileReporter>(std::move(inner));
        the_file_reporter = file_reporter.get();
    }
    if (!G.csv_path.empty()) remove(partial_path(G.csv_path).c_str());  // an earlier run's
    int planned = planned_instances() * G.repetitions;
    std::thread watcher;
    harness_pid = getpid();
    if (pipe2(cut_pipe, O_CLOEXEC) == 0) {  // programs this one runs (ranks, mpirun) get no copy
        watcher = std::thread(watch_for_cut, &tee, planned);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_cut_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);
    }
    benchmark::RunSpecifiedBenchmarks(&tee, file_reporter.get());
    if (watcher.joinable()) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        unsigned char done = 0;
        ssize_t ignored = write(cut_pipe[1], &done, 1);
        (void)ignored;
        watcher.join();
    }
    resolve_pending(nullptr, 0);  // never left over after a report; kept for safety
    the_tee = nullptr;
    the_file_reporter = nullptr;
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
    double real_now = seconds_now(CLOCK_MONOTONIC), cpu_now = seconds_now(CLOCK_THREAD_CPUTIME_ID);
    bool more = st->gb->KeepRunning();
    if (!st->started) {  // Google Benchmark's timer starts with the first call
        st->started = true;
        if (more) timer_start(st);
    }
    if (!more) {
        timer_stop(st, real_now, cpu_now);
        st->loop_done = true;
    }
    return more;
}

static const std::string *axis_value(HarnessState *st, const char *name, bool want_string)
{
    const Instance *in = st->instance;
    for (size_t i = 0; i < in->params.size(); i++)
        if (in->params[i].first == name && in->bench->axes[i].is_string == want_string)
            return &in->params[i].second;
    if (!st->gb->error_occurred())
        skip_with_error(st, std::string(kErrorPrefix) + "no " + (want_string ? "string" : "integer") +
                                " axis '" + name + "' in this benchmark");
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

void harness_set_iteration_time(HarnessState *st, double seconds)
{
    st->manual_used += seconds;
    st->gb->SetIterationTime(seconds);
}

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
    // A machine that should have a GPU (SUITE_EXPECT_GPU=1, the GPU check) and has none
    // fails every run that would skip, so that it cannot pass with no GPU coverage.
    char why[256];
    if (error_expect_gpu() && !gpu_device_available(why, sizeof why)) {
        skip_with_error(st, std::string(kErrorPrefix) + "SUITE_EXPECT_GPU=1 but " + why + " (the run would have skipped: " +
                                (reason ? reason : "") + ")");
        return;
    }
    skip_with_error(st, std::string(kSkipPrefix) + (reason ? reason : ""));
}

void harness_fail(HarnessState *st, const char *message)
{
    skip_with_error(st, std::string(kErrorPrefix) + (message ? message : ""));
}

void harness_pause_timing(HarnessState *st)
{
    timer_stop(st, seconds_now(CLOCK_MONOTONIC), seconds_now(CLOCK_THREAD_CPUTIME_ID));
    st->gb->PauseTiming();
}

void harness_resume_timing(HarnessState *st)
{
    st->gb->ResumeTiming();
    timer_start(st);
}

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
