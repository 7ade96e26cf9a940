// harness_csv.cc: the harness's own files beside --harness_csv=FILE.csv. The tidy CSV
// (one row per instance: practice, variant, role, timing, params, status and reason,
// the time's mean, median, stddev, min, max and cv, counters, the run context),
// FILE.reps.csv (one row per measured repetition) and FILE.curves.csv (curve points).
// Rows are kept as each repetition finishes (Commit), and every file is rewritten whole
// through FILE.tmp and a rename. A cut (Cut) writes what is done, rows
// still waiting for repetitions marked `partial`, and FILE.partial.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "bench/driver/context.h"
#include "bench/driver/harness_internal.h"

namespace harness {

namespace {

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

// The schema's names of one kind (tidy_columns.def), in its order.
const std::vector<std::string> &schema_params()
{
    static const std::vector<std::string> names = {
#define TIDY_PARAM(name) #name,
#define TIDY_COUNTER(name)
#define TIDY_CONTEXT(name)
#include "bench/driver/tidy_columns.def"
#undef TIDY_PARAM
#undef TIDY_COUNTER
#undef TIDY_CONTEXT
    };
    return names;
}

const std::vector<std::string> &schema_counters()
{
    static const std::vector<std::string> names = {
#define TIDY_PARAM(name)
#define TIDY_COUNTER(name) #name,
#define TIDY_CONTEXT(name)
#include "bench/driver/tidy_columns.def"
#undef TIDY_PARAM
#undef TIDY_COUNTER
#undef TIDY_CONTEXT
    };
    return names;
}

const std::vector<std::string> &schema_context()
{
    static const std::vector<std::string> names = {
#define TIDY_PARAM(name)
#define TIDY_COUNTER(name)
#define TIDY_CONTEXT(name) #name,
#include "bench/driver/tidy_columns.def"
#undef TIDY_PARAM
#undef TIDY_COUNTER
#undef TIDY_CONTEXT
    };
    return names;
}

// The names `seen` that are not in the schema (sorted), each said once on stderr: the schema
// is fixed, but a name missing from it is never dropped (written after the schema's columns).
std::vector<std::string> beyond_schema(const std::vector<std::string> &schema, const std::set<std::string> &seen,
                                       const char *kind)
{
    static std::set<std::string> warned;
    std::vector<std::string> out;
    std::set<std::string> known(schema.begin(), schema.end());
    for (const auto &name : seen) {
        if (known.count(name)) continue;
        out.push_back(name);
        if (warned.insert(std::string(kind) + name).second)
            fprintf(stderr, "harness: %s '%s' is not in the tidy-CSV schema (bench/driver/tidy_columns.def): "
                            "written after the schema's columns\n", kind, name.c_str());
    }
    return out;
}

} // namespace

std::string tidy_schema_version() { return std::to_string(TIDY_SCHEMA_VERSION); }

std::string partial_path(const std::string &csv)
{
    std::string stem = csv;
    if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".csv") == 0) stem.resize(stem.size() - 4);
    return stem + ".partial";
}

bool TidyCsvTee::ReportContext(const Context &ctx)
{
    if (context_reported_) return context_ok_;
    context_reported_ = true;
    Context wide = ctx;  // wide enough for every instance, not only the first block's
    wide.name_field_width = std::max(ctx.name_field_width, name_width_);
    context_ok_ = display_->ReportContext(wide) && (!file_ || file_->ReportContext(wide));
    return context_ok_;
}

// Google Benchmark's report of one block of an instance's repetitions: each repetition to
// the display as it is (renamed: the block's repetition count is not part of the name),
// and kept for the --benchmark_out file until the row group ends. Its aggregates (mean,
// median, stddev, cv) are of the block only: the tidy CSV has the row's, over every block,
// and the display a line per row when its group ends (finish_group).
void TidyCsvTee::ReportRuns(const std::vector<Run> &runs)
{
    std::vector<Run> shown;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (Run r : runs) {
            r.run_name.repetitions.clear();
            if (r.error_occurred && r.error_message.rfind(kSkipPrefix, 0) != 0) any_error_ = true;
            if (r.run_type == Run::RT_Aggregate) continue;
            shown.push_back(r);
            file_runs_.push_back(r);
        }
    }
    if (!shown.empty()) display_->ReportRuns(shown);
}

void TidyCsvTee::Finalize()
{
    std::lock_guard<std::mutex> lock(mutex_);
    write_all();
}

// A row group's repetitions are over: its rows are final, the display gets one line per
// row (the precision reached), and the --benchmark_out file its repetitions, numbered
// 0..n-1 of n across the blocks.
void TidyCsvTee::finish_group(const std::vector<Instance *> &members, const std::string &line)
{
    std::vector<Run> out;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (Instance *in : members) in->finished = true;
        std::map<std::string, int> index;
        for (Run &r : file_runs_) {
            std::string name = r.run_name.function_name;
            r.repetition_index = index[name]++;
        }
        for (Run &r : file_runs_) {
            for (Instance *in : members)
                if (in->name == r.run_name.function_name) r.repetitions = std::max(1, in->repetitions_done);
            out.push_back(r);
        }
        file_runs_.clear();
        write_all();
    }
    if (file_ && !out.empty()) file_->ReportRuns(out);
    if (!line.empty()) {
        display_->GetOutputStream() << line;
        display_->GetOutputStream().flush();
    }
}

void TidyCsvTee::finish_run()
{
    display_->Finalize();
    if (file_) file_->Finalize();
    std::lock_guard<std::mutex> lock(mutex_);
    write_all();
}

std::vector<double> TidyCsvTee::times_of(const Instance *in, bool *censored, int *discarded)
{
    std::lock_guard<std::mutex> lock(mutex_);
    *censored = false;
    if (discarded) *discarded = 0;
    std::vector<double> t;
    auto it = index_.find(in->name);
    if (it == index_.end()) return t;
    for (const Run &r : results_[it->second].runs) {
        if (r.error_occurred) return {};
        auto throttled = r.counters.find("gpu_throttled");
        if (throttled != r.counters.end() && throttled->second.value != 0) {
            if (discarded) ++*discarded;
            continue;
        }
        auto reached = r.counters.find("reached_target");
        if (reached != r.counters.end() && reached->second.value == 0) *censored = true;
        t.push_back(r.GetAdjustedRealTime());
    }
    return t;
}

// A repetition that has just finished (the harness decides when a run was one, see
// harness_state.cc): into the CSVs at once, so that a cut keeps it.
void TidyCsvTee::Commit(Instance *in, const Run &run)
{
    std::lock_guard<std::mutex> lock(mutex_);
    Results &res = results_for(in->name);
    Run r = run;
    r.repetition_index = in->repetitions_done;
    in->repetitions_done++;
    in->block_done++;
    repetitions_done_++;
    res.runs.push_back(r);
    res.sequence.push_back(repetitions_done_);
    if (run.error_occurred && run.error_message.rfind(kSkipPrefix, 0) != 0) any_error_ = true;
    write_all();
}

// The run was cut by a signal: waits for a write in progress, writes what is done
// (rows of unfinished instances marked partial) and FILE.partial, and exits.
// Exits with 128 + sig holding the lock, so that no later write starts.
void TidyCsvTee::Cut(int planned, int sig)
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

Results &TidyCsvTee::results_for(const std::string &function_name)
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
void TidyCsvTee::write_all()
{
    if (!path_.empty()) write_ok_ = write_csv() && write_reps() && write_curves() && write_ok_;
}

// Whether a context key is a column of the tidy CSV: all but the library files
// (`*_library`, paths the loader mapped), which were a quarter of a CSV results folder
// repeated on every row; they stay in the JSON's context and in context.txt, and the
// versions they carry are the `*_version` columns.
static bool in_csv_context(const char *key)
{
    size_t n = strlen(key), suffix = strlen("_library");
    return !(n >= suffix && strcmp(key + n - suffix, "_library") == 0);
}

// The columns after the fixed ones: the schema's (sweep axes, counters, and with a context
// its keys), then those of names outside the schema, in the same order of kinds.
void TidyCsvTee::columns(const SuiteContext *ctx, std::vector<Column> *schema, std::vector<Column> *beyond) const
{
    std::set<std::string> axes, counters, keys;
    for (const auto &b : g().benches)
        for (const Axis &a : b->axes) axes.insert(a.name);
    for (const Results &res : results_)
        for (const Run &r : res.runs)
            for (const auto &c : r.counters) counters.insert(c.first);
    if (ctx) {
        for (int i = 0; i < ctx->count; i++)
            if (in_csv_context(ctx->keys[i])) keys.insert(ctx->keys[i]);
        for (const auto &kv : g().extra_context) keys.insert(kv.first);
    }
    schema->clear();
    beyond->clear();
    for (const auto &n : schema_params()) schema->push_back({Column::kParam, n});
    for (const auto &n : schema_counters()) schema->push_back({Column::kCounter, n});
    if (ctx)
        for (const auto &n : schema_context()) schema->push_back({Column::kContext, n});
    for (const auto &n : beyond_schema(schema_params(), axes, "axis")) beyond->push_back({Column::kParam, n});
    for (const auto &n : beyond_schema(schema_counters(), counters, "counter")) beyond->push_back({Column::kCounter, n});
    if (ctx)
        for (const auto &n : beyond_schema(schema_context(), keys, "context key"))
            beyond->push_back({Column::kContext, n});
}

static std::string column_name(const Column &c)
{
    switch (c.kind) {
    case Column::kParam: return ",param_" + field(c.name);
    case Column::kContext: return ",ctx_" + field(c.name);
    case Column::kCounter: break;
    }
    return "," + field(c.name);
}

static std::string param_value(const Instance *in, const std::string &name)
{
    if (in)
        for (const auto &kv : in->params)
            if (kv.first == name) return kv.second;
    return "";
}

static std::string context_value(const SuiteContext &ctx, const std::string &key)
{
    for (int i = 0; i < ctx.count; i++)
        if (key == ctx.keys[i]) return ctx.values[i];
    for (const auto &kv : g().extra_context)
        if (kv.first == key) return kv.second;
    return "";
}

bool TidyCsvTee::write_csv()
{
    const SuiteContext &ctx = *ctx_;
    std::vector<Column> cols, beyond;
    columns(&ctx, &cols, &beyond);
    cols.insert(cols.end(), beyond.begin(), beyond.end());
    std::string out = "practice,variant,role,timing,params,status,reason,repetitions,iterations,"
                      "time,cpu_time,time_unit,time_median,time_stddev,time_min,time_max,time_cv,cache,"
                      "precision_target,precision_reached,stop";
    for (const Column &c : cols) out += column_name(c);
    out += "\n";
    for (const Results &res : results_) out += row(res, ctx, cols) + "\n";
    return write_atomically(path_, out);
}

// FILE.reps.csv: one row per measured repetition of every instance, so the summary
// can compute medians, intervals and tests over repetitions (the tidy row has only
// their aggregates).
bool TidyCsvTee::write_reps()
{
    std::vector<Column> cols, beyond;
    columns(nullptr, &cols, &beyond);
    std::string out = "practice,variant,role,timing,params,repetition,time,cpu_time,time_unit,iterations";
    for (const Column &c : cols) out += column_name(c);
    out += ",sequence";
    for (const Column &c : beyond) out += column_name(c);
    out += "\n";
    for (const Results &res : results_) {
        const Instance *in = res.instance;
        if (!in) continue;
        bool failed = false;
        for (const Run &r : res.runs) failed = failed || r.error_occurred;
        if (failed) continue; // a skipped or failed instance has no times to keep
        for (size_t k = 0; k < res.runs.size(); k++) {
            const Run &r = res.runs[k];
            const HarnessBench *b = in->bench;
            out += field(b->practice) + "," + field(b->variant) + "," + role_name(b->role) + "," +
                   timing_name(b->timing) + "," + field(params_field(*in)) + "," +
                   std::to_string(r.repetition_index + 1) + "," + num(r.GetAdjustedRealTime()) + "," +
                   num(r.GetAdjustedCPUTime()) + "," + unit_name(r.time_unit) + "," +
                   std::to_string((long long)r.iterations);
            auto value = [&](const Column &c) {
                if (c.kind == Column::kParam) return field(param_value(in, c.name));
                auto it = r.counters.find(c.name);
                return it != r.counters.end() ? num(it->second.value) : std::string();
            };
            for (const Column &c : cols) out += "," + value(c);
            out += "," + std::to_string(res.sequence[k]);
            for (const Column &c : beyond) out += "," + value(c);
            out += "\n";
        }
    }
    return write_atomically(reps_path(path_), out);
}

bool TidyCsvTee::write_curves()
{
    if (g().curves.empty()) return true;
    std::vector<Column> cols, beyond;
    columns(nullptr, &cols, &beyond);
    cols.insert(cols.end(), beyond.begin(), beyond.end());
    std::string out = "practice,variant,role,params";
    for (const Column &c : cols)
        if (c.kind == Column::kParam) out += column_name(c);
    out += ",run,metric,step,images,seconds,value\n";
    for (const CurvePoint &c : g().curves) {
        const Instance &in = *c.instance;
        out += field(in.bench->practice) + "," + field(in.bench->variant) + "," +
               role_name(in.bench->role) + "," + field(params_field(in));
        for (const Column &col : cols)
            if (col.kind == Column::kParam) out += "," + field(param_value(&in, col.name));
        out += "," + std::to_string(c.run) + "," + field(c.metric) + "," + std::to_string(c.step) +
               "," + std::to_string(c.images) + "," + num(c.seconds) + "," + num(c.value) + "\n";
    }
    return write_atomically(curves_path(path_), out);
}

// One tidy row: the fixed columns, then the value of each of `cols`.
std::string TidyCsvTee::row(const Results &res, const SuiteContext &ctx, const std::vector<Column> &cols)
{
    const Instance *in = res.instance;
    const HarnessBench *b = in ? in->bench : nullptr;
    const Run *first = !res.runs.empty() ? &res.runs[0] : nullptr;
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
    // Repetitions still to come (its row group is still running, or was cut by a signal
    // or a kill): the row holds the ones done so far.
    if (status == "ok" && in && !in->finished) {
        status = "partial";
        reason = std::to_string(res.runs.size()) +
                 ((int)res.runs.size() < g().repetitions ? " of " + std::to_string(g().repetitions) : "") +
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
    double time = mean_of(times), cpu_time = mean_of(cpu), median = NAN, stddev = NAN;
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    if (!sorted.empty()) {
        size_t n = sorted.size();
        median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
        double m = mean_of(sorted), s = 0;
        for (double x : sorted) s += (x - m) * (x - m);
        stddev = n > 1 ? std::sqrt(s / (double)(n - 1)) : 0.0;
    }
    size_t reps = res.runs.size();
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
                      "," + (b ? cache_name(b->cache) : "") + "," +
                      (in && g().precision > 0 ? num(g().precision) : "") + "," +
                      (in && has_times ? num(in->precision_reached) : "") + "," + field(in ? in->stop : "");
    for (const Column &c : cols) {
        if (c.kind == Column::kParam) {
            out += "," + field(param_value(in, c.name));
        } else if (c.kind == Column::kContext) {
            out += "," + field(context_value(ctx, c.name));
        } else {
            std::vector<double> vals;
            for (const Run &r : res.runs)
                if (!r.error_occurred && r.counters.count(c.name)) vals.push_back(r.counters.at(c.name).value);
            out += "," + (has_times ? num(mean_of(vals)) : std::string());
        }
    }
    return out;
}
} // namespace harness
