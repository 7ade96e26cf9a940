// harness_schedule.cc: the order and the number of repetitions (docs/statistics.md,
// "How many repetitions"). The selected instances are taken row group by row group: the
// instances of one practice at one point of its axes (its baseline, its tuned variants,
// any reference). A group runs in blocks of rounds, each round one Google Benchmark call
// with one repetition of each of the group's instances in random order, so that the k-th
// tuned repetition and the k-th baseline one run next to each other (a round apart at
// most: the machine's drift is shared by both and cancels in their ratio). The first block has --benchmark_repetitions;
// after each, the stopping rule (precision.h) reads the width of the group's intervals and
// asks for another block or stops: target met, or capped at the most repetitions or at the
// group's time. The group's time, under --harness_budget: what is left of its practice's
// share (each practice an equal part of what is left of the budget; its groups in order,
// precision first; a group is not run, a skip, when less of the share is left than the
// practice's previous group took);
// without a budget 3x its first block's (docs/statistics.md, "Under a budget").
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/driver/harness_internal.h"
#include "bench/driver/precision.h"

namespace harness {

namespace {

double now_s()
{
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string regex_escape(const std::string &s)
{
    std::string out;
    for (char c : s) {
        if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
        out += c;
    }
    return out;
}

struct Group {
    std::vector<Instance *> members;
};

// The row groups of the selected instances, in the order their first instance came.
std::vector<Group> groups_of(const std::vector<Instance *> &selected)
{
    std::vector<Group> groups;
    std::map<std::string, size_t> index;
    for (Instance *in : selected) {
        std::string key = in->bench->practice;
        for (const auto &p : in->params) key += "/" + p.first + ":" + p.second;
        auto it = index.find(key);
        if (it == index.end()) {
            index[key] = groups.size();
            groups.push_back(Group{});
            groups.back().members.push_back(in);
        } else {
            groups[it->second].members.push_back(in);
        }
    }
    return groups;
}

// One block: `reps` rounds, each one library call with one repetition of every member
// (in random order under --benchmark_enable_random_interleaving), so that the k-th
// repetitions of a group's rows, which the precision and the summary pair, ran next to
// each other: within one round, not anywhere in a block of shuffled repetitions.
void run_block(const Group &grp, int reps)
{
    std::string spec = "^(";
    for (size_t i = 0; i < grp.members.size(); i++) {
        Instance *in = grp.members[i];
        in->gb->Repetitions(1);
        spec += (i ? "|" : "") + regex_escape(in->name);
    }
    spec += ")/";  // the name's own suffixes follow (min_time, repeats, real_time...)
    for (int r = 0; r < reps; r++) {
        for (Instance *in : grp.members) in->block_done = 0;
        benchmark::RunSpecifiedBenchmarks(the_tee, spec);
        resolve_pending(nullptr, 0);  // the round's last run was a repetition
    }
}

struct Reading {
    double worst = 0;     // the widest relative half-width among the group's rows
    bool any = false;     // some row has times
    bool read = false;    // some row's precision was read (no run of it missed a target)
    int fewest = 0;       // the fewest kept repetitions of a row with times
    int discarded = 0;    // repetitions left out: the GPU was throttled
    std::string text;     // one line per row, for the display
};

std::string percent(double x)
{
    char buf[32];
    if (!std::isfinite(x)) return "unknown (too few repetitions)";
    snprintf(buf, sizeof buf, "+-%.1f%%", 100 * x);
    return buf;
}

// The precision of each row of the group: a tuned row's speedup from the ratios of its
// repetitions and the baseline's, paired in the order they ran; a row without a baseline
// to pair with (the baseline itself, a reference, a group with no baseline) its median.
// A row with a run that missed its target (censored) is read by the summary's own rules,
// not here: it stops at the minimum.
Reading read_group(TidyCsvTee &tee, const Group &grp)
{
    Reading rd;
    const Instance *base = nullptr;
    for (const Instance *in : grp.members)
        if (in->bench->role == HARNESS_BASELINE && !base) base = in;
    bool base_censored = false;
    std::vector<double> bt = base ? tee.times_of(base, &base_censored) : std::vector<double>{};
    bool paired_any = false;
    for (Instance *in : grp.members) {
        bool censored = false;
        int discarded = 0;
        std::vector<double> t = tee.times_of(in, &censored, &discarded);
        rd.discarded += discarded;
        if (!t.empty() && (!rd.any || (int)t.size() < rd.fewest)) rd.fewest = (int)t.size();
        if (t.empty() || censored) {
            rd.any = rd.any || !t.empty();
            continue;
        }
        double p = NAN;
        char line[512];
        if (in != base && in->bench->role == HARNESS_TUNED && !bt.empty() && !base_censored) {
            int n = (int)std::min(bt.size(), t.size());
            double speedup;
            p = precision_of_paired_speedup(bt.data(), t.data(), n, &speedup);
            paired_any = true;
            snprintf(line, sizeof line, "  %s: speedup %.3fx, %s from %d pairs\n", in->name.c_str(), speedup,
                     percent(p).c_str(), n);
        } else {
            p = precision_of_median(t.data(), (int)t.size());
            snprintf(line, sizeof line, "  %s: median time %s from %d repetitions\n", in->name.c_str(),
                     percent(p).c_str(), (int)t.size());
        }
        in->precision_reached = p;
        rd.any = rd.read = true;
        rd.text += line;
        if (!(p <= rd.worst)) rd.worst = p;  // NaN and infinity are the worst
    }
    // a baseline with tuned rows stops on their speedups, not on its own median
    if (paired_any && base) {
        rd.worst = 0;
        for (const Instance *in : grp.members)
            if (in != base && in->bench->role == HARNESS_TUNED && !(in->precision_reached <= rd.worst))
                rd.worst = in->precision_reached;
        for (const Instance *in : grp.members)
            if (in->bench->role == HARNESS_REFERENCE && !(in->precision_reached <= rd.worst))
                rd.worst = in->precision_reached;
    }
    return rd;
}

} // namespace

void run_schedule(TidyCsvTee &tee, const std::vector<Instance *> &selected)
{
    Globals &G = g();
    size_t width = 10;
    for (const Instance *in : selected) width = std::max(width, in->gb_name.size());
    tee.set_name_width(width);
    std::vector<Group> groups = groups_of(selected);
    // the groups that take time: a group whose rows all skip here (they need a GPU and none
    // is usable) runs at once, and is no share of the budget
    std::vector<bool> timed(groups.size(), false);
    std::set<std::string> timed_practices;
    for (size_t gi = 0; gi < groups.size(); gi++) {
        for (const Instance *in : groups[gi].members)
            if (!in->skips_here) timed[gi] = true;
        if (timed[gi]) timed_practices.insert(groups[gi].members[0]->bench->practice);
    }
    size_t practices_left = timed_practices.size();
    double start = now_s();
    std::string practice;
    double practice_t0 = 0, share = 0, previous_group_s = 0;  // 0 before a practice's first group
    for (size_t gi = 0; gi < groups.size(); gi++) {
        const Group &grp = groups[gi];
        double t0 = now_s();
        // Under a budget each practice gets an equal share of what is left of it (what one
        // leaves goes to the next), and spends it precision first: its groups in order, each
        // until its target or its most repetitions, within what is left of the share; a
        // group is not run (a visible skip), never measured loosely, when what is left of
        // the share is less than the practice's previous group took (the points go from
        // small presets and batches to large: the next costs at least as much). A
        // practice's first group always runs.
        const std::string &p = grp.members[0]->bench->practice;
        if (timed[gi] && p != practice) {
            practice = p;
            practice_t0 = t0;
            previous_group_s = 0;
            share = G.budget_s > 0 ? std::max(1e-3, G.budget_s - (t0 - start)) / (double)std::max<size_t>(practices_left, 1) : 0;
            if (practices_left > 0) practices_left--;
        }
        if (timed[gi] && share > 0 && share - (t0 - practice_t0) < previous_group_s) {
            char why[160];
            snprintf(why, sizeof why, "not run: less of its practice's share of --harness_budget (%.0f s) was left than its previous group took", share);
            for (Instance *in : grp.members) in->not_run = why;
            run_block(grp, 1);
            for (Instance *in : grp.members) in->stop = "";
            tee.finish_group(grp.members, "");
            continue;
        }
        // the group's time cap: what is left of its practice's share, else 3x its first block
        double cap = 0, left = std::max(0.0, share - (t0 - practice_t0));
        int done = 0, block = G.repetitions;
        std::string why, text;
        for (;;) {
            run_block(grp, block);
            done += block;
            double used = now_s() - t0;
            if (done == G.repetitions) {
                if (share <= 0) cap = 3 * used;
                else cap = std::max(left, used); // no more than it has: the first block is run in any case
            }
            Reading rd = read_group(tee, grp);
            text = rd.text;
            if (!rd.any) {
                why = "";  // skipped or failed: nothing to measure
                break;
            }
            // throttled repetitions do not count towards the least: redone, within the caps
            int shortfall = G.repetitions - rd.fewest;
            if (shortfall > 0 && done + shortfall <= G.max_repetitions && (cap <= 0 || used < cap)) {
                block = shortfall;
                continue;
            }
            if (!rd.read) {
                why = "a run missed its target: the least repetitions";
                break;
            }
            PrecisionBudget b{G.precision, done, G.max_repetitions, used, cap};
            int more = 0;
            PrecisionDecision d = precision_next(&b, rd.worst, &more);
            if (d == PRECISION_GO_ON) {
                block = more;
                continue;
            }
            char reason[160];
            if (d == PRECISION_CAP_REPETITIONS)
                snprintf(reason, sizeof reason, "target not met: capped at %d repetitions", done);
            else if (d == PRECISION_CAP_TIME)
                snprintf(reason, sizeof reason, "target not met: capped at %.0f s (%d repetitions)", cap, done);
            else
                snprintf(reason, sizeof reason, "%s", precision_decision_name(d));
            why = reason;
            if (rd.discarded > 0)
                why += "; " + std::to_string(rd.discarded) + " repetitions discarded (GPU throttled) and redone";
            break;
        }
        for (Instance *in : grp.members) {
            in->stop = why;
            release_kept(in);  // its core and batches: the next group's rows make their own
        }
        if (timed[gi]) previous_group_s = now_s() - t0;
        std::string line;
        if (!why.empty() && G.precision > 0) {
            char head[200];
            snprintf(head, sizeof head, "precision (target %s, %d repetitions, %.1f s): %s\n",
                     percent(G.precision).c_str(), done, now_s() - t0, why.c_str());
            line = head + text;
        }
        tee.finish_group(grp.members, line);
    }
}

} // namespace harness
