// precision.h: the stopping rule of a row's repetitions (docs/statistics.md, "How many
// repetitions"). A row keeps adding repetitions until the 95% interval of what a reader
// quotes from it is within a target: for a tuned row, its speedup over the baseline, from
// the ratios of repetitions that ran next to each other (paired in the order they ran);
// for a row without a speedup (a baseline alone, a reference), its median time. The
// interval is the distribution-free one of a median (order statistics; no assumption on
// the shape of the noise). Plain C, no state: the harness (harness_schedule.cc) calls it
// after each block of repetitions, and the tests call it on made-up data.
#ifndef PRECISION_H
#define PRECISION_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

// The repetitions a verdict needs: the paired test's (Wilcoxon signed-rank) smallest
// two-sided p-value with n pairs is 2 / 2^n, below 0.05 from n = 6.
#define PRECISION_MIN_PAIRS 6

// The median of x[0..n) and its 95% interval [*lo, *hi]: the order statistics x(k) and
// x(n+1-k) for the largest k with P(Binomial(n, 1/2) < k) <= 0.025. Below 6 values no k
// reaches 95%: the interval is then [min, max] (its coverage 1 - 2^(1-n)) and the
// function returns false; true when the interval holds 95%. x is not modified. n >= 1.
bool precision_median_interval(const double *x, int n, double *median, double *lo, double *hi);

// The relative half-width of that interval: (hi - lo) / 2 / median; INFINITY when
// n < 2 or the median is not positive.
double precision_of_median(const double *x, int n);

// The speedup of tuned over baseline from n pairs (base[i], tuned[i]: the i-th repetition
// of each side in the order they ran): the median of base[i] / tuned[i], and the relative
// half-width of its interval as above. INFINITY when n < 2 or a time is not positive.
double precision_of_paired_speedup(const double *base, const double *tuned, int n, double *speedup);

typedef enum {
    PRECISION_GO_ON,          // run `*more` repetitions more
    PRECISION_TARGET_MET,     // the interval is within the target
    PRECISION_NO_TARGET,      // target 0 (fixed repetitions) or nothing to measure
    PRECISION_CAP_REPETITIONS,// the target is not met at the most repetitions allowed
    PRECISION_CAP_TIME,       // ... and another repetition would pass the row's time cap
} PrecisionDecision;

typedef struct {
    double target;        // relative half-width wanted (0.05: +-5%); 0: no target
    int done;             // repetitions each side has done so far
    int max_repetitions;  // at most this many
    double seconds_used;  // the row's time so far (every side, set-up included)
    double seconds_cap;   // at most this much (<= 0: no time cap)
} PrecisionBudget;

// After a block: given the worst relative half-width of the row's members (`reached`), go
// on or stop, and why. Going on, *more repetitions are asked for: enough that the width
// should fall to the target if it shrinks as 1/sqrt(n) (times 1.2, for the estimate's own
// noise), at least 2, at most as many as were done (the width is re-read before more),
// and never past max_repetitions or the time cap at the pace so far.
PrecisionDecision precision_next(const PrecisionBudget *b, double reached, int *more);

// "target met", "capped at 30 repetitions", ... (static strings; the count is the caller's)
const char *precision_decision_name(PrecisionDecision d);

#ifdef __cplusplus
}
#endif
#endif
