// debug_hooks.c: the debugging APIs' work as gradient hooks of the core (debug_hooks.h).
// Anomaly mode: PyTorch's detect_anomaly checks every backward function's outputs for NaN
// (torch/csrc/autograd/engine.cpp, after each node's apply: "Function '...' returned nan
// values in its Nth output") and raises at once, which on CUDA means waiting for the check's
// result: here each op's parameter-gradient range is scanned as soon as the core reports it
// ready, on the GPU by a kernel on the core's stream whose flag is copied back and waited for.
// Profiler: autograd.profiler.profile records a start/end per op (use_cuda: CUDA events on
// the current stream) and reads them when the profile is collected: here one timestamp or
// event per op as backward reports it and one at the update, read back at the next step's
// first op (or never, for the last step of a run: events_read says how many were read).
#include "bench/debug_apis/debug_hooks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/clock.h"
#include "kernels/error.h"
#include "kernels/model.h"

#define DEBUG_MAX_EVENTS (MODEL_MAX_OPS + 1)  // one per op with parameters, one at the update

typedef struct DebugState {
    const Core *core;
    DebugMode mode;
    bool gpu;
    DebugCounts counts;
    // profiler: this step's timestamps (CPU) or events (GPU), and whether a step's are unread
    double stamps[DEBUG_MAX_EVENTS];
    DebugEvents *events;
    int recorded;
    bool pending;
} DebugState;

// Every state made in this process, found by its core's address (a new core at a freed
// one's address takes its state over, reset). Reachable until exit: never freed.
static DebugState **states;
static size_t state_count, state_capacity;

static DebugState *state_of(const Core *core)
{
    for (size_t i = 0; i < state_count; i++)
        if (states[i]->core == core) return states[i];
    return NULL;
}

static DebugState *state_for(const Core *core)
{
    DebugState *s = state_of(core);
    if (s) return s;
    if (state_count == state_capacity) {
        size_t grown = state_capacity ? 2 * state_capacity : 16;
        DebugState **more = realloc(states, grown * sizeof *more);
        if (!more) return NULL;
        states = more;
        state_capacity = grown;
    }
    if (!(s = calloc(1, sizeof *s))) return NULL;
    s->core = core;
    states[state_count++] = s;
    return s;
}

// ---- anomaly ----------------------------------------------------------------------------------

static int anomaly_found(size_t offset, size_t count, size_t at, const char *what)
{
    return error_set(ERROR_BAD_DATA,
                     "anomaly detection: the backward of the op with parameters [%zu, %zu) returned "
                     "%s values in its parameter gradient (first at parameter %zu)",
                     offset, offset + count, what, offset + at);
}

int debug_scan_host(const float *grads, size_t offset, size_t count)
{
    const float *g = grads + offset;
    for (size_t i = 0; i < count; i++)
        if (!isfinite(g[i])) return anomaly_found(offset, count, i, isnan(g[i]) ? "nan" : "inf");
    return 0;
}

int debug_scan_device(const float *grads, size_t offset, size_t count, void *stream)
{
    int64_t bad = -1;
    TRY(debug_cuda_find_nonfinite(grads + offset, count, stream, &bad));
    if (bad < 0) return 0;
    return anomaly_found(offset, count, (size_t)bad, "nan or inf");
}

static int anomaly_ready(void *user, const CoreGradReady *r)
{
    DebugState *s = user;
    s->counts.ops_checked++;
    return s->gpu ? debug_scan_device(r->grads, r->offset, r->count, r->stream)
                  : debug_scan_host(r->grads, r->offset, r->count);
}

// ---- profiler ---------------------------------------------------------------------------------

// Reads the last step's timestamps or events (the profile collected) and sums their intervals.
static int profile_collect(DebugState *s)
{
    double ms = 0.0;
    if (s->gpu) {
        TRY(debug_cuda_events_read(s->events, s->recorded, &ms));
    } else if (s->recorded > 1) {
        ms = 1e3 * (s->stamps[s->recorded - 1] - s->stamps[0]);
    }
    s->counts.profiled_ms += ms;
    s->counts.events_read += s->recorded;
    s->recorded = 0;
    s->pending = false;
    return 0;
}

static int profile_record(DebugState *s, void *stream)
{
    if (s->recorded >= DEBUG_MAX_EVENTS) return error_set(ERROR_BAD_USAGE, "profiler: more ops than events");
    if (s->gpu) TRY(debug_cuda_event_record(s->events, s->recorded, stream));
    else s->stamps[s->recorded] = clock_seconds();
    s->recorded++;
    s->counts.events++;
    return 0;
}

static int profiler_ready(void *user, const CoreGradReady *r)
{
    DebugState *s = user;
    if (s->pending) TRY(profile_collect(s));  // the previous step's profile
    return profile_record(s, r->stream);
}

// ---- both -------------------------------------------------------------------------------------

static int debug_before_update(void *user, float *grads, size_t count, void *stream)
{
    (void)grads;
    (void)count;
    DebugState *s = user;
    s->counts.steps++;
    if (s->mode != DEBUG_PROFILER) return 0;
    TRY(profile_record(s, stream));
    s->pending = true;
    return 0;
}

int debug_hooks_install(Core *core, DebugMode mode, bool gpu)
{
    DebugState *s = state_for(core);
    if (!s) return error_set(ERROR_OUT_OF_MEMORY, "debug hooks: out of memory (host)");
    DebugEvents *events = s->events;
    memset(s, 0, sizeof *s);
    s->core = core;
    s->mode = mode;
    s->gpu = gpu;
    s->events = events;
    if (mode == DEBUG_OFF) return 0;
    if (gpu && mode == DEBUG_PROFILER && !s->events) TRY(debug_cuda_events_create(&s->events));
    CoreGradHooks hooks = {mode == DEBUG_ANOMALY ? anomaly_ready : profiler_ready, debug_before_update, s};
    return core_set_grad_hooks(core, &hooks);
}

DebugCounts debug_hooks_counts(const Core *core)
{
    const DebugState *s = state_of(core);
    return s ? s->counts : (DebugCounts){0};
}
