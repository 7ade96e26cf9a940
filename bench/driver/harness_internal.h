// harness_internal.h: what the harness's C++ files share, none of it part of the C API
// (bench/driver/harness.h): the registered benchmarks and their instances, the state of
// one run, the program's options, the process-wide globals, and the tee that writes the
// tidy CSV. Who does what:
//   harness.cc          registration, the expansion into instances, harness_run
//   harness_state.cc    one run of one instance: the loop, its timer, counters, skips,
//                       and when a run is a finished repetition
//   harness_flags.cc    the command line: suite flags, program options, axis values, --help
//   harness_csv.cc      the tidy CSV, FILE.reps.csv and FILE.curves.csv, per repetition
//   harness_cut.cc      SIGINT/SIGTERM: the watcher and the locked --benchmark_out file
//                       (which leaves skipped instances out: the tidy CSV has them)
//   harness_display.cc  the standard output: a console that prints skips as skips
#ifndef HARNESS_INTERNAL_H
#define HARNESS_INTERNAL_H

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/driver/context.h"
#include "bench/driver/harness.h"

namespace harness {

struct Axis {
    std::string name, values; // values as declared (or as overridden), unexpanded
    bool is_string;
};

struct Instance;

} // namespace harness

struct HarnessBench {
    std::string practice, variant;
    HarnessRole role;
    HarnessTiming timing;
    HarnessFn fn;
    void *user;
    std::vector<harness::Axis> axes;
    HarnessUnit unit;
    double min_time;
    int64_t iterations;
    HarnessCache cache;
    bool gpu_only;
};

namespace harness {

// One point of the product of a benchmark's axes: a registered Google Benchmark.
struct Instance {
    HarnessBench *bench;
    std::vector<std::pair<std::string, std::string>> params; // axis name -> value, in order
    std::string name;                                        // practice/variant/axis:value...
    std::string gb_name;      // the name Google Benchmark filters on (name + its suffixes)
    bool skips_here = false;  // it needs a GPU and none is usable: it runs no iteration
    std::string not_run;      // the schedule did not run it (why): a skip
    int calls = 0;            // runs so far (curve rows)
    int repetitions_done = 0; // finished repetitions written so far
    int block_done = 0;       // of them, in the block of repetitions now running
    benchmark::internal::Benchmark *gb = nullptr; // its registration (repetitions per block)
    // Its row group's repetitions are over (harness_schedule.cc): the row is final, with
    // the precision its schedule reached and why it stopped.
    bool finished = false;
    double precision_reached = NAN; // relative half-width the stopping rule last read
    std::string stop;               // "target met", "target not met: capped at ...", ...
    // What its last run kept for the next (harness_keep), released with its group.
    void *kept = nullptr;
    void (*kept_release)(void *) = nullptr;
};

// Releases what the instance's last run kept (harness_keep), if anything.
void release_kept(Instance *in);

struct CurvePoint {
    const Instance *instance;
    int run;
    std::string metric;
    int64_t step, images;
    double seconds, value;
};

} // namespace harness

// One run of an instance. Besides Google Benchmark's state it keeps its own view of the
// time measured (the same timer pauses and manual times), because Google Benchmark 1.7.1
// hands a run to the reporters only after the instance's last repetition: the harness
// writes each repetition as it finishes from this view (see commit_repetition).
struct HarnessState {
    benchmark::State *gb;
    harness::Instance *instance;
    std::string label;
    bool loop_done = false;
    bool started = false, timing = false;
    double real_from = 0, cpu_from = 0;         // when the timer last started
    double real_used = 0, cpu_used = 0, manual_used = 0;
    std::string error;                          // the message given to SkipWithError
};

namespace harness {

// Google Benchmark 1.7.1 has no skip-with-message: a skip is a SkipWithError whose
// message starts with kSkipPrefix; harness_fail's messages start with kErrorPrefix.
inline constexpr char kSkipPrefix[] = "skipped: ";
inline constexpr char kErrorPrefix[] = "error: ";

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
    GpuClockReference clock_ref{}; // what a repetition's SM clock is judged against
    int repetitions = 1;    // --benchmark_repetitions: the least each row runs
    // The stopping rule (harness_schedule.cc, bench/driver/precision.h): more repetitions
    // until the interval's relative half-width is within precision (0: exactly
    // `repetitions`), at most max_repetitions, within budget_s seconds for the program
    // (0: each row group at most 3x its first block's time).
    double precision = 0;
    int max_repetitions = 60;
    double budget_s = 0;
    // The last run of an instance in its first repetition: Google Benchmark may still
    // run it again with more iterations (a trial), so it is written only once the next
    // run shows it was the repetition (see resolve_pending).
    bool has_pending = false;
    Instance *pending_instance = nullptr;
    int64_t pending_iterations = 0;
    benchmark::BenchmarkReporter::Run pending_run;
};

// The process's one set of globals (harness.cc).
Globals &g();

// Names as the label and the CSVs spell them (harness.cc).
const char *role_name(HarnessRole r);
const char *cache_name(HarnessCache c);
const char *timing_name(HarnessTiming t);
benchmark::TimeUnit gb_unit(HarnessUnit u);

// ---- harness_flags.cc ------------------------------------------------------------------

// s as a decimal integer (strtoll's syntax, nothing after it, in range); false if not.
bool parse_int64(const std::string &s, int64_t *out);
// Expands an axis's values ("8,64", "4096:268435456:*4", "0:30:+10", "tiny,mlp");
// "" on success, else why not.
std::string expand_axis(const Axis &a, std::vector<std::string> *out);
// The value of --name=VALUE in the Google Benchmark arguments (last one wins).
std::string gb_flag(const char *name, const char *fallback);
// A Google Benchmark boolean flag: --name alone or --name=VALUE with a truthy VALUE.
bool gb_bool_flag(const char *name);
// The suite's part of --help (the library's follows from benchmark::Initialize).
void print_help();

// ---- harness_state.cc ------------------------------------------------------------------

// Runs one instance once (the function Google Benchmark registers for it).
void run_one(benchmark::State &gb, Instance *in);
// Writes the run held back as a possible trial if `next` shows it was a repetition
// (nullptr, 0: the run is over, so it was).
void resolve_pending(const Instance *next, int64_t next_iterations);

// ---- harness_display.cc ----------------------------------------------------------------

// The standard-output reporter that --benchmark_format and --benchmark_color ask for.
std::unique_ptr<benchmark::BenchmarkReporter> make_display();

// ---- harness_csv.cc --------------------------------------------------------------------

// FILE.csv -> FILE.partial: written only when a signal cut the run, one line
// "rows_done rows_planned" (repetitions finished, instances x repetitions planned).
std::string partial_path(const std::string &csv);
std::string tidy_schema_version(); // TIDY_SCHEMA_VERSION of tidy_columns.def

// What is known of one instance: its repetitions as the harness wrote them (the runs
// Google Benchmark reports, per block, go to the display and the --benchmark_out file
// only: the harness's own are the same runs, numbered across blocks).
// A column of the tidy CSV after its fixed ones (tidy_columns.def): a sweep axis
// (param_<name>), a counter, or a context key (ctx_<name>).
struct Column {
    enum Kind { kParam, kCounter, kContext } kind;
    std::string name;
};

struct Results {
    const Instance *instance = nullptr;
    std::string function_name;
    std::vector<benchmark::BenchmarkReporter::Run> runs; // in the order they ran
    std::vector<int> sequence; // each run's place among all repetitions of the program run
};

// The display reporter, teed into the tidy CSV (--harness_csv=FILE), FILE.reps.csv and
// FILE.curves.csv. Every file is rewritten whole, through FILE.tmp and a rename, after
// each repetition (Commit) and each report of Google Benchmark (ReportRuns).
class TidyCsvTee : public benchmark::BenchmarkReporter {
public:
    TidyCsvTee(benchmark::BenchmarkReporter *display, std::string path, const SuiteContext *ctx)
        : display_(display), path_(std::move(path)), ctx_(ctx) {}

    bool ReportContext(const Context &ctx) override;
    void ReportRuns(const std::vector<Run> &runs) override;
    void Finalize() override;

    // A repetition that has just finished, before Google Benchmark reports its instance:
    // into the CSVs at once, so that a cut keeps it.
    void Commit(Instance *in, const Run &run);
    // The run was cut by a signal: waits for a write in progress, writes what is done
    // (rows of unfinished instances marked partial) and FILE.partial, and exits.
    // Exits with 128 + sig holding the lock, so that no later write starts.
    [[noreturn]] void Cut(int planned, int sig);

    bool any_error() const { return any_error_; }
    // The times of an instance's measured repetitions in the order they ran (empty when
    // one failed or skipped), and whether one was a run to a target that missed it;
    // repetitions the GPU was throttled in are left out (*discarded counts them).
    std::vector<double> times_of(const Instance *in, bool *censored, int *discarded = nullptr);
    // Google Benchmark's context and end of output, once for the whole run (it reports
    // them for every RunSpecifiedBenchmarks call: one per block of repetitions).
    void set_name_width(size_t width) { name_width_ = width; }
    void finish_group(const std::vector<Instance *> &members, const std::string &line);
    void finish_run();
    void set_file_reporter(benchmark::BenchmarkReporter *file) { file_ = file; }
    bool write_ok() const { return write_ok_; }

private:
    Results &results_for(const std::string &function_name);
    void write_all();
    void columns(const SuiteContext *ctx, std::vector<Column> *schema, std::vector<Column> *beyond) const;
    bool write_csv();
    bool write_reps();
    bool write_curves();
    std::string row(const Results &res, const SuiteContext &ctx, const std::vector<Column> &cols);

    benchmark::BenchmarkReporter *display_;
    benchmark::BenchmarkReporter *file_ = nullptr; // --benchmark_out (harness_cut.cc)
    std::vector<Run> file_runs_;                   // the group's, written when it ends
    bool context_reported_ = false;
    bool context_ok_ = true;
    size_t name_width_ = 10;
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

// The tee while harness_run runs, else nullptr (harness_state.cc).
extern TidyCsvTee *the_tee;

// ---- harness_schedule.cc ---------------------------------------------------------------

// Runs the selected instances (in registration order) row group by row group: the
// instances of one practice at one point of its axes (a baseline and its tuned variants)
// in blocks of repetitions until the stopping rule of bench/driver/precision.h says stop.
void run_schedule(TidyCsvTee &tee, const std::vector<Instance *> &selected);


// ---- harness_cut.cc --------------------------------------------------------------------

// The --benchmark_out reporter (nullptr without --benchmark_out), locked and flushed after
// every write so that a cut can close it; valid until cut_watch_stop.
std::unique_ptr<benchmark::BenchmarkReporter> make_file_reporter();
// Sends SIGINT, SIGTERM and SIGHUP (unless ignored at start: nohup) to a watcher thread that closes the --benchmark_out file and
// cuts the tee (tee->Cut). Returns the watcher (not joinable when no pipe could be made).
std::thread cut_watch_start(TidyCsvTee *tee, int planned);
// The run is over: default signal actions again, the watcher stopped and joined.
void cut_watch_stop(std::thread &watcher);

} // namespace harness

#endif
