// harness_flags.cc: the command line of every practice program. The suite's flags
// (--harness_csv, --harness_axis, --harness_precision, --harness_max_repetitions,
// --harness_budget, --preset, --backend, --data, --data_dir, --threads),
// the options a program declares (--NAME=VALUE, else its environment variable, else its
// default), the grammar of sweep-axis values (lists and lo:hi:*k / lo:hi:+k ranges), the
// checks on Google Benchmark's own flags that the library would get wrong, and --help.
// Everything else on the command line is handed to Google Benchmark as it came.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/driver/harness.h"
#include "bench/driver/harness_internal.h"
#include "kernels/core.h"

namespace harness {

// ---- axis values ---------------------------------------------------------------------

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

namespace {

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

} // namespace

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

bool gb_bool_flag(const char *name)
{
    std::string bare = std::string("--") + name;
    bool set = false;
    for (const std::string &a : g().gb_args)
        if (a == bare) set = true;
    std::string v = gb_flag(name, set ? "true" : "false");
    for (char &c : v) c = (char)tolower((unsigned char)c);
    // Google Benchmark's truthy values (IsTruthyFlagValue)
    return v == "1" || v == "t" || v == "true" || v == "y" || v == "yes" || v == "on";
}

namespace {

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
    } else if ((v = value_of("--harness_precision="))) {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (strcmp(v, "auto") == 0) {
            G.precision = -1;  // harness_run: 0.02 with a usable GPU, else 0.05
        } else if (!*v || *end || errno || !(x >= 0 && x < 1)) {
            return std::string("--harness_precision=") + v + ": need a fraction from 0 to below 1 (0.05: +-5%), or auto";
        } else {
            G.precision = x;
        }
    } else if ((v = value_of("--harness_max_repetitions="))) {
        int64_t n;
        if (!parse_int64(v, &n) || n < 1 || n > 10000)
            return std::string("--harness_max_repetitions=") + v + ": need an integer from 1 to 10000";
        G.max_repetitions = (int)n;
    } else if ((v = value_of("--harness_budget="))) {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno || !(x >= 0 && x <= 1e7))
            return std::string("--harness_budget=") + v + ": need seconds >= 0";
        G.budget_s = x;
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

} // namespace

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
           "                           (default: the machine's cores; context key cpu_threads)\n"
           "  --harness_precision=F    add repetitions to a row until the 95%% interval of its\n"
           "                           speedup (a tuned row, paired with its baseline) or of its\n"
           "                           median (a row without one) is within +-F, e.g. 0.05;\n"
           "                           auto: 0.02 with a usable GPU, else 0.05; 0 (default): exactly\n"
           "                           --benchmark_repetitions (docs/statistics.md)\n"
           "  --harness_max_repetitions=N  at most N repetitions a row (default 60)\n"
           "  --harness_budget=SECONDS the program's time: each practice an equal share of what is\n"
           "                           left, its row groups in order, each until its target within\n"
           "                           what is left of the share; a group is not run (a skip saying\n"
           "                           so) when less is left than the previous group took (a\n"
           "                           practice's first group always runs). Default 0: a group at most 3x the time\n"
           "                           of its first --benchmark_repetitions, every group runs\n",
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
           "                                     runs the benchmark's whole minimum time\n"
           "                                     (its own, else the next flag's)\n"
           "  --benchmark_min_time=SECONDS       minimum time per benchmark and repetition\n"
           "                                     (else each benchmark's own default)\n"
           "  --benchmark_format=console|json|csv  standard output format\n"
           "  --benchmark_out=FILE --benchmark_out_format=json|console|csv\n"
           "  --benchmark_enable_random_interleaving=true\n"
           "  --benchmark_counters_tabular=true  counters as columns\n\n"
           "Library help follows.\n\n");
}

} // namespace harness

using namespace harness;

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

} // extern "C"
