// harness_state.cc: one run of one benchmark instance and the HarnessState API that the
// benchmark's function calls during it: the loop, the timer pauses, manual time, counters,
// labels, skips and failures, axis values and curve points. Google Benchmark 1.7.1 reports
// an instance only after its last repetition, so the harness keeps its own view of each
// run's time and decides when a run was a finished repetition (rather than one of the
// library's trials) to write it at once through the tidy CSV tee (harness_csv.cc).
#include <benchmark/benchmark.h>
#include <time.h>

#include <cstdint>
#include <string>

#include "bench/driver/context.h"
#include "bench/driver/harness.h"
#include "bench/driver/harness_internal.h"
#include "kernels/error.h"
#include "kernels/gpu_device.h"

namespace harness {

TidyCsvTee *the_tee; // while harness_run runs

namespace {

// NVML's view of the GPU as counters of this run (named "<prefix>_..._<when>").
void gpu_state_counters(benchmark::State &gb, const GpuState &s, const char *when)
{
    GpuStateCounter c[GPU_STATE_MAX_COUNTERS];
    for (int i = 0, n = context_gpu_state_counters(&s, when, c); i < n; i++) gb.counters[c[i].name] = c[i].value;
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

void commit_repetition(Instance *in, const benchmark::BenchmarkReporter::Run &run)
{
    if (the_tee) the_tee->Commit(in, run);
}

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


} // namespace

// Google Benchmark runs the first repetition of an instance in each call (each block of
// repetitions, harness_schedule.cc) with growing iteration counts until it lasts long
// enough (each trial strictly longer), and every later repetition of the block once, with
// the count the first one settled on. So the last run of an instance was a finished
// repetition when any other instance runs next, when the block ends, or when the same one
// runs again with no more iterations; a longer run of the same instance means it was a
// trial.
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

void release_kept(Instance *in)
{
    if (in->kept && in->kept_release) in->kept_release(in->kept);
    in->kept = nullptr;
    in->kept_release = nullptr;
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
    bool sampled = false;
    if (!in->not_run.empty()) {
        skip_with_error(&st, kSkipPrefix + in->not_run);
    } else {
        sampled = g().gpu_state && context_gpu_state(&before);
        in->bench->fn(&st, in->bench->user);
    }
    if (sampled && context_gpu_state(&after)) {
        gpu_state_counters(gb, before, "before");
        gpu_state_counters(gb, after, "after");
        // a repetition measured while the GPU was held back: kept in the files, left out
        // of the precision and the statistics, and redone (harness_schedule.cc)
        gb.counters["gpu_throttled"] = gpu_sample_throttled(&before, &after, &g().clock_ref) ? 1.0 : 0.0;
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
    // retry follows), or after the block's first repetition; else it may have been a trial.
    if (in->block_done > 0 || in->bench->iterations > 0 || gb.error_occurred()) {
        commit_repetition(in, run);
    } else {
        Globals &G = g();
        G.has_pending = true;
        G.pending_instance = in;
        G.pending_iterations = (int64_t)gb.iterations();
        G.pending_run = run;
    }
}

} // namespace harness

using namespace harness;

extern "C" {

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

bool harness_run_failed(const HarnessState *st) { return st->gb->error_occurred(); }

void harness_keep(HarnessState *st, void *obj, void (*release)(void *obj))
{
    release_kept(st->instance);
    st->instance->kept = obj;
    st->instance->kept_release = release;
}

void *harness_take_kept(HarnessState *st)
{
    void *obj = st->instance->kept;
    st->instance->kept = nullptr;
    st->instance->kept_release = nullptr;
    return obj;
}

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

} // extern "C"
