// harness_cut.cc: a run cut short by SIGINT, SIGTERM or SIGHUP (a deadline's `timeout
// --signal=INT`, Ctrl-C, a stopped `make bench`, a closed terminal) keeps everything it
// measured. The signal handler only writes the
// signal's number into a pipe; a watcher thread reads it, closes the --benchmark_out file
// (its reporter is locked and flushed after every write, so a JSON stays valid) and has
// the tidy CSV tee write what is done and FILE.partial, then exit with 128 + the signal.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "bench/driver/harness_internal.h"

namespace harness {

namespace {

// The --benchmark_out reporter, behind a lock and flushed after every write, so that a cut
// can close it (Finalize: a JSON file stays valid, with every instance reported so far)
// while the program's thread is elsewhere. Google Benchmark opens the file and hands this
// reporter its stream; the format's own reporter writes through it.
// The JSON holds the runs that ran (and real errors, every repetition): a skipped instance
// is left out. Google Benchmark 1.7.1 reports every repetition of one, the same
// "skipped: ..." each time, and on a machine without a GPU those were most of a results
// folder (16 MB for a CPU `make bench`); the tidy CSV keeps one row per skipped instance
// with its reason, and the log its SKIPPED lines.
// It holds each repetition, not the mean, median, stddev and cv Google Benchmark derives
// from them (they are the tidy CSV's columns, and compare.py computes its own from the
// repetitions): they were nearly half of what remained. With
// --benchmark_report_aggregates_only=true, where no repetition is reported, it keeps them.
class LockedFileReporter : public benchmark::BenchmarkReporter {
public:
    LockedFileReporter(std::unique_ptr<benchmark::BenchmarkReporter> inner, bool keep_aggregates)
        : inner_(std::move(inner)), keep_aggregates_(keep_aggregates) {}

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
        std::vector<Run> ran;
        ran.reserve(runs.size());
        for (const Run &run : runs)
            if (!is_skip(run) && (keep_aggregates_ || run.run_type != Run::RT_Aggregate)) ran.push_back(run);
        if (!ran.empty()) inner_->ReportRuns(ran);
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
    static bool is_skip(const Run &run)
    {
        return run.error_occurred && run.error_message.rfind(kSkipPrefix, 0) == 0;
    }

    void attach()
    {
        inner_->SetOutputStream(&GetOutputStream());
        inner_->SetErrorStream(&GetErrorStream());
    }

    std::unique_ptr<benchmark::BenchmarkReporter> inner_;
    bool keep_aggregates_;
    std::mutex mutex_;
    bool finalized_ = false;
};

LockedFileReporter *the_file_reporter; // while harness_run runs, with --benchmark_out

// SIGINT/SIGTERM/SIGHUP (timeout --signal=INT at a deadline, Ctrl-C): the handler only writes
// the signal's number into a pipe; a watcher thread waits for it, finishes the write in
// progress, writes what is done and exits with 128 + the signal. A forked child that has
// not exec'd (a loader worker) keeps the default action: the pipe is its parent's.
int cut_pipe[2] = {-1, -1};
pid_t harness_pid;
bool hup_caught;  // SIGHUP was not ignored at start, so the cut catches it

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

std::unique_ptr<benchmark::BenchmarkReporter> make_file_reporter()
{
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
        file_reporter = std::make_unique<LockedFileReporter>(std::move(inner),
                                                             gb_bool_flag("benchmark_report_aggregates_only"));
        the_file_reporter = file_reporter.get();
    }
    return file_reporter;
}

std::thread cut_watch_start(TidyCsvTee *tee, int planned)
{
    std::thread watcher;
    harness_pid = getpid();
    if (pipe2(cut_pipe, O_CLOEXEC) == 0) {  // programs this one runs (ranks, mpirun) get no copy
        watcher = std::thread(watch_for_cut, tee, planned);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_cut_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);
        struct sigaction hup;  // nohup's SIGHUP stays ignored
        if (sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler != SIG_IGN) {
            sigaction(SIGHUP, &sa, nullptr);
            hup_caught = true;
        }
    }
    return watcher;
}

void cut_watch_stop(std::thread &watcher)
{
    if (watcher.joinable()) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (hup_caught) signal(SIGHUP, SIG_DFL);
        hup_caught = false;
        unsigned char done = 0;
        ssize_t ignored = write(cut_pipe[1], &done, 1);
        (void)ignored;
        watcher.join();
    }
    the_file_reporter = nullptr;
}

} // namespace harness
