// precision.c: the stopping rule of a row's repetitions (precision.h).
#include "bench/driver/precision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// P(Binomial(n, 1/2) = i), in logs so that large n neither overflows nor underflows.
static double binomial_half_pmf(int n, int i)
{
    return exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * log(2.0));
}

bool precision_median_interval(const double *x, int n, double *median, double *lo, double *hi)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) {  // no memory for a copy: no interval can be claimed
        *median = *lo = *hi = NAN;
        return false;
    }
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    // the largest k (1-based) with P(B < k) <= 0.025: [x(k), x(n+1-k)] covers >= 95%
    int k = 0;
    double below = 0;  // P(B < k + 1) as k grows
    while (k < n / 2) {
        below += binomial_half_pmf(n, k);
        if (below > 0.025) break;
        k++;
    }
    bool covers = k >= 1;
    if (!covers) k = 1;
    *lo = s[k - 1];
    *hi = s[n - k];
    free(s);
    return covers;
}

double precision_of_median(const double *x, int n)
{
    if (n < 2) return INFINITY;
    double m, lo, hi;
    precision_median_interval(x, n, &m, &lo, &hi);
    return m > 0 && isfinite(lo) ? (hi - lo) / 2 / m : INFINITY;
}

double precision_of_paired_speedup(const double *base, const double *tuned, int n, double *speedup)
{
    *speedup = NAN;
    if (n < 2) return INFINITY;
    double *r = malloc((size_t)n * sizeof *r);
    if (!r) return INFINITY;
    for (int i = 0; i < n; i++) {
        if (!(base[i] > 0) || !(tuned[i] > 0)) {
            free(r);
            return INFINITY;
        }
        r[i] = base[i] / tuned[i];
    }
    double lo, hi;
    precision_median_interval(r, n, speedup, &lo, &hi);
    free(r);
    return *speedup > 0 ? (hi - lo) / 2 / *speedup : INFINITY;
}

PrecisionDecision precision_next(const PrecisionBudget *b, double reached, int *more)
{
    *more = 0;
    if (!(b->target > 0)) return PRECISION_NO_TARGET;
    if (reached <= b->target) return PRECISION_TARGET_MET;
    int n = b->done > 0 ? b->done : 1;
    // 1/sqrt(n): n * (reached / target)^2 repetitions in all; an infinite width (too few
    // values for an interval) asks for as many again
    double want = isfinite(reached) ? 1.2 * n * (reached / b->target) * (reached / b->target) - n : n;
    int add = want > n ? n : (int)ceil(want);
    if (add < 2) add = 2;
    if (add > b->max_repetitions - b->done) add = b->max_repetitions - b->done;
    if (add <= 0) return PRECISION_CAP_REPETITIONS;
    if (b->seconds_cap > 0) {
        double per = b->seconds_used / n, left = b->seconds_cap - b->seconds_used;
        int fit = per > 0 ? (int)floor(left / per) : add;
        if (fit < add) add = fit;
        if (add <= 0) return PRECISION_CAP_TIME;
    }
    *more = add;
    return PRECISION_GO_ON;
}

const char *precision_decision_name(PrecisionDecision d)
{
    switch (d) {
    case PRECISION_GO_ON: return "going on";
    case PRECISION_TARGET_MET: return "target met";
    case PRECISION_NO_TARGET: return "no target";
    case PRECISION_CAP_REPETITIONS: return "target not met: capped at the most repetitions";
    case PRECISION_CAP_TIME: return "target not met: capped at the row's time";
    }
    return "?";
}
