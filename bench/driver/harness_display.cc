// harness_display.cc: what a practice program prints on standard output. The format
// --benchmark_format asks for (console, json or csv), with --benchmark_color and
// --benchmark_counters_tabular honoured as Google Benchmark would, and a console that
// prints skips as "SKIPPED (reason)" instead of as errors, once per benchmark. The files a run writes have
// their own reporters (harness_csv.cc, and harness_cut.cc for --benchmark_out).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <set>
#include <string>

#include "bench/driver/harness_internal.h"

namespace harness {

namespace {

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
        // A skip is a fact about the machine, the same in every repetition: printed once
        // (with random interleaving a skipped row would otherwise fill the log N times).
        if (!skipped_printed_.insert(run.benchmark_name()).second) return;
        std::ostream &out = GetOutputStream();
        bool color = (output_options_ & OO_Color) != 0;
        std::string name = run.benchmark_name();
        out << (color ? "\033[32m" : "") << name;
        if (name.size() < name_field_width_) out << std::string(name_field_width_ - name.size(), ' ');
        out << (color ? "\033[33m" : "") << " SKIPPED ("
            << run.error_message.substr(strlen(kSkipPrefix)) << ")" << (color ? "\033[0m" : "")
            << "\n";
    }

private:
    std::set<std::string> skipped_printed_;
};

} // namespace

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

} // namespace harness
