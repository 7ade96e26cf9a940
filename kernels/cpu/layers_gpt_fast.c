// layers_gpt_fast.c: the transformer layers on the fast CPU backend (the *_fast of
// layers_gpt.h), cut into tasks for the thread pool of cpu_pool.h as layers_cpu_fast.c
// does: rows (embeddings, LayerNorm), spans of floats (GELU), column blocks (the embedding
// gradients) or (sequence, head) pairs (attention). A task's work depends on its index
// only, never on the thread that runs it, so results never depend on scheduling; where
// tasks add into one output (LayerNorm's dgamma and dbeta) each writes a partial of its own
// and the partials are summed in task order afterwards (the order depends on ws->threads).
// Attention's matrix products go through OpenBLAS (one thread per call), blocked over
// query rows and keys so that the causal upper triangle is mostly skipped and the fused
// form's buffers are small and on the stack. Built with the project's plain -O2 (no
// target_clones here: this file's name does not match the Makefile's *cpu_fast* rule).
#include "kernels/layers_gpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_pool.h"
#include "kernels/cpu/layers_cpu_fast_internal.h"

// Below this many floats of row-wise work (LayerNorm, embeddings) one task does it all.
#define GPT_ROWS_PARALLEL_MIN 4096
// GELU costs an erff per float: worth a second thread sooner than ReLU's PARALLEL_MIN.
#define GELU_PARALLEL_MIN 4096
// The embedding gradients' column blocks: one cache line per row, no false sharing.
#define EMBED_COL_BLOCK 16
// Attention's query rows per block and keys per block (ATTN_BK a multiple of ATTN_BQ,
// so a key block that starts before a query block's end starts at or before its start:
// every query row of a block sees at least one key of every block it visits).
#define ATTN_BQ 32
#define ATTN_BK 64

#define GELU_INV_SQRT2 0.70710678118654752440f
#define GELU_INV_SQRT2PI 0.39894228040143267794f

static inline size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

// Tasks over `rows` rows holding `floats` floats of work.
static int row_tasks(const CpuWorkspace *ws, int rows, size_t floats)
{
    if (ws->threads <= 1 || floats < GPT_ROWS_PARALLEL_MIN || rows < 2) return 1;
    return min_int(rows, ws->threads * TASKS_PER_THREAD);
}

// Row-major C (m, n) = alpha op(A) op(B) + beta C.
static inline void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a,
                        int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---- embeddings --------------------------------------------------------------------------

typedef struct EmbedJob {
    int n, t, c, vocab, tasks;
    const int32_t *tok;
    const float *wte, *wpe, *dy;
    float *y, *dwte, *dwpe;
    bool accum;
} EmbedJob;

// Rows [rows*k/T, rows*(k+1)/T) of y.
static void embed_fwd_task(void *arg, int k)
{
    const EmbedJob *j = arg;
    int rows = j->n * j->t, c = j->c;
    for (int r = rows * k / j->tasks; r < rows * (k + 1) / j->tasks; r++) {
        const float *we = j->wte + (size_t)j->tok[r] * c, *pe = j->wpe + (size_t)(r % j->t) * c;
        float *y = j->y + (size_t)r * c;
        for (int e = 0; e < c; e++) y[e] = we[e] + pe[e];
    }
}

void embed_fwd_fast(const CpuWorkspace *ws, int n, int t, int c, const int32_t *tok,
                    const float *wte, const float *wpe, float *y)
{
    EmbedJob j = {.n = n, .t = t, .c = c, .tok = tok, .wte = wte, .wpe = wpe, .y = y,
                  .tasks = row_tasks(ws, n * t, (size_t)n * t * c)};
    cpu_pool_run(ws->threads, j.tasks, embed_fwd_task, &j);
}

// Column blocks [blocks*k/T, blocks*(k+1)/T) of every row of dwte and dwpe: each task adds
// the rows of dy in the reference's order, so the sums are the reference's, bit for bit,
// whatever the thread count.
static void embed_bwd_task(void *arg, int k)
{
    const EmbedJob *j = arg;
    int blocks = (j->c + EMBED_COL_BLOCK - 1) / EMBED_COL_BLOCK, c = j->c;
    int c0 = min_int(c, blocks * k / j->tasks * EMBED_COL_BLOCK);
    int c1 = min_int(c, blocks * (k + 1) / j->tasks * EMBED_COL_BLOCK);
    size_t w = (size_t)(c1 - c0) * sizeof(float);
    if (w == 0) return;
    if (!j->accum) {
        for (int v = 0; v < j->vocab; v++) memset(j->dwte + (size_t)v * c + c0, 0, w);
        for (int i = 0; i < j->t; i++) memset(j->dwpe + (size_t)i * c + c0, 0, w);
    }
    for (int r = 0; r < j->n * j->t; r++) {
        const float *g = j->dy + (size_t)r * c + c0;
        float *we = j->dwte + (size_t)j->tok[r] * c + c0, *pe = j->dwpe + (size_t)(r % j->t) * c + c0;
        for (int e = 0; e < c1 - c0; e++) {
            we[e] += g[e];
            pe[e] += g[e];
        }
    }
}

void embed_bwd_fast(const CpuWorkspace *ws, int n, int t, int c, int vocab, const int32_t *tok,
                    const float *dy, float *dwte, float *dwpe, bool accum)
{
    int blocks = (c + EMBED_COL_BLOCK - 1) / EMBED_COL_BLOCK;
    EmbedJob j = {.n = n, .t = t, .c = c, .vocab = vocab, .tok = tok, .dy = dy, .dwte = dwte,
                  .dwpe = dwpe, .accum = accum,
                  .tasks = row_tasks(ws, blocks, (size_t)n * t * c + (size_t)vocab * c)};
    cpu_pool_run(ws->threads, j.tasks, embed_bwd_task, &j);
}

// ---- LayerNorm ---------------------------------------------------------------------------

typedef struct LnJob {
    int rows, c, tasks;
    const float *x, *dy, *gamma, *beta;
    float *y, *dx;
    float *pgamma, *pbeta; // backward: task k's partial dgamma at pgamma + k * c (likewise beta)
    bool accum_dx;
    bool partial_accum;    // the partials are dgamma/dbeta themselves, accumulated into
} LnJob;

// A row's mean and 1/std, in float (the reference sums in double).
static void ln_row_stats(const float *x, int c, float *mean, float *rstd)
{
    float sum = 0.0f, sq = 0.0f;
    for (int e = 0; e < c; e++) sum += x[e];
    float m = sum / (float)c;
    for (int e = 0; e < c; e++) sq += (x[e] - m) * (x[e] - m);
    *mean = m;
    *rstd = 1.0f / sqrtf(sq / (float)c + GPT_LN_EPS);
}

static void ln_fwd_task(void *arg, int k)
{
    const LnJob *j = arg;
    int c = j->c;
    for (int r = j->rows * k / j->tasks; r < j->rows * (k + 1) / j->tasks; r++) {
        const float *x = j->x + (size_t)r * c;
        float *y = j->y + (size_t)r * c, mean, rstd;
        ln_row_stats(x, c, &mean, &rstd);
        for (int e = 0; e < c; e++) y[e] = (x[e] - mean) * rstd * j->gamma[e] + j->beta[e];
    }
}

void layernorm_fwd_fast(const CpuWorkspace *ws, int rows, int c, const float *x,
                        const float *gamma, const float *beta, float *y)
{
    LnJob j = {.rows = rows, .c = c, .x = x, .gamma = gamma, .beta = beta, .y = y,
               .tasks = row_tasks(ws, rows, (size_t)rows * c)};
    cpu_pool_run(ws->threads, j.tasks, ln_fwd_task, &j);
}

static void ln_bwd_task(void *arg, int k)
{
    const LnJob *j = arg;
    int c = j->c;
    float *pg = j->pgamma + (size_t)k * c, *pb = j->pbeta + (size_t)k * c;
    if (!j->partial_accum) {
        memset(pg, 0, (size_t)c * sizeof *pg);
        memset(pb, 0, (size_t)c * sizeof *pb);
    }
    for (int r = j->rows * k / j->tasks; r < j->rows * (k + 1) / j->tasks; r++) {
        const float *x = j->x + (size_t)r * c, *g = j->dy + (size_t)r * c;
        float *dx = j->dx + (size_t)r * c, mean, rstd;
        ln_row_stats(x, c, &mean, &rstd);
        // Everything that reads dy first: dx may be dy.
        float sd = 0.0f, sdx = 0.0f;
        for (int e = 0; e < c; e++) {
            float xhat = (x[e] - mean) * rstd, dxhat = g[e] * j->gamma[e];
            sd += dxhat;
            sdx += dxhat * xhat;
            pg[e] += g[e] * xhat;
            pb[e] += g[e];
        }
        float md = sd / (float)c, mdx = sdx / (float)c;
        if (j->accum_dx)
            for (int e = 0; e < c; e++)
                dx[e] += rstd * (g[e] * j->gamma[e] - md - (x[e] - mean) * rstd * mdx);
        else
            for (int e = 0; e < c; e++)
                dx[e] = rstd * (g[e] * j->gamma[e] - md - (x[e] - mean) * rstd * mdx);
    }
}

void layernorm_bwd_fast(const CpuWorkspace *ws, int rows, int c, const float *x, const float *dy,
                        const float *gamma, float *dx, bool accum_dx, float *dgamma,
                        float *dbeta, bool accum_param)
{
    LnJob j = {.rows = rows, .c = c, .x = x, .dy = dy, .gamma = gamma, .dx = dx,
               .accum_dx = accum_dx, .tasks = row_tasks(ws, rows, (size_t)rows * c)};
    // Several tasks: a partial dgamma and dbeta each (no scratch in ws: allocated here;
    // without memory, one task).
    float *part = j.tasks > 1 ? malloc((size_t)j.tasks * 2 * c * sizeof *part) : NULL;
    if (!part) {
        j.tasks = 1;
        j.pgamma = dgamma;
        j.pbeta = dbeta;
        j.partial_accum = accum_param;
        cpu_pool_run(ws->threads, 1, ln_bwd_task, &j);
        return;
    }
    j.pgamma = part;
    j.pbeta = part + (size_t)j.tasks * c;
    cpu_pool_run(ws->threads, j.tasks, ln_bwd_task, &j);
    // The partials in task order: the same sums whoever ran which task.
    for (int e = 0; e < c; e++) {
        float g = accum_param ? dgamma[e] : 0.0f, b = accum_param ? dbeta[e] : 0.0f;
        for (int k = 0; k < j.tasks; k++) {
            g += j.pgamma[(size_t)k * c + e];
            b += j.pbeta[(size_t)k * c + e];
        }
        dgamma[e] = g;
        dbeta[e] = b;
    }
    free(part);
}

// ---- GELU --------------------------------------------------------------------------------

typedef struct GeluJob {
    size_t count;
    int tasks;
    const float *x, *dy;
    float *y;
    bool backward, accum;
} GeluJob;

// The reference's expressions, so the same bits.
static void gelu_task(void *arg, int k)
{
    const GeluJob *j = arg;
    size_t lo, hi;
    span_of(j->count, k, j->tasks, &lo, &hi);
    const float *x = j->x;
    if (!j->backward) {
        for (size_t i = lo; i < hi; i++) j->y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * GELU_INV_SQRT2));
        return;
    }
    for (size_t i = lo; i < hi; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * GELU_INV_SQRT2));
        float pdf = expf(-0.5f * x[i] * x[i]) * GELU_INV_SQRT2PI;
        float v = j->dy[i] * (cdf + x[i] * pdf);
        j->y[i] = j->accum ? j->y[i] + v : v;
    }
}

static int gelu_tasks(const CpuWorkspace *ws, size_t count)
{
    if (ws->threads <= 1 || count < GELU_PARALLEL_MIN) return 1;
    return (int)min_size((size_t)ws->threads * TASKS_PER_THREAD, count / (GELU_PARALLEL_MIN / 2));
}

void gelu_fwd_fast(const CpuWorkspace *ws, size_t count, const float *x, float *y)
{
    GeluJob j = {.count = count, .tasks = gelu_tasks(ws, count), .x = x, .y = y};
    cpu_pool_run(ws->threads, j.tasks, gelu_task, &j);
}

void gelu_bwd_fast(const CpuWorkspace *ws, size_t count, const float *x, const float *dy,
                   float *dx, bool accum)
{
    GeluJob j = {.count = count, .tasks = gelu_tasks(ws, count), .x = x, .dy = dy, .y = dx,
                 .backward = true, .accum = accum};
    cpu_pool_run(ws->threads, j.tasks, gelu_task, &j);
}

// ---- attention ---------------------------------------------------------------------------

// One call over n * heads tasks; task k is sequence k / heads, head k % heads.
typedef struct AttnJob {
    int n, t, c, heads;
    const float *qkv, *p_in, *y_in, *lse_in, *dy;
    float *p, *y, *lse, *dqkv;
    bool accum;
} AttnJob;

// One (sequence, head): pointers to its q, k, v (rows 3c apart), y and dy (c apart), its
// p (t x t) and lse (t), and its dq, dk, dv.
typedef struct AttnHead {
    int t, d, ld3, ld;  // ld3 = 3c, ld = c
    float scale;
    const float *q, *k, *v, *y_in, *dy, *p_in, *lse_in;
    float *p, *y, *lse, *dq, *dk, *dv;
} AttnHead;

static AttnHead attn_head(const AttnJob *j, int task)
{
    int b = task / j->heads, h = task % j->heads, t = j->t, c = j->c, d = c / j->heads;
    size_t row3 = (size_t)b * t * 3 * c + (size_t)h * d, row = (size_t)b * t * c + (size_t)h * d;
    size_t pt = (size_t)task * t;
    AttnHead a = {.t = t, .d = d, .ld3 = 3 * c, .ld = c, .scale = 1.0f / sqrtf((float)d)};
    a.q = j->qkv + row3;
    a.k = a.q + c;
    a.v = a.q + 2 * c;
    if (j->y_in) a.y_in = j->y_in + row;
    if (j->dy) a.dy = j->dy + row;
    if (j->p_in) a.p_in = j->p_in + pt * t;
    if (j->lse_in) a.lse_in = j->lse_in + pt;
    if (j->p) a.p = j->p + pt * t;
    if (j->y) a.y = j->y + row;
    if (j->lse) a.lse = j->lse + pt;
    if (j->dqkv) {
        a.dq = j->dqkv + row3;
        a.dk = a.dq + c;
        a.dv = a.dq + 2 * c;
    }
    return a;
}

// Zeroes the head's dq, dk and dv (t rows of d) unless accumulating.
static void attn_zero_grads(const AttnHead *a, bool accum)
{
    if (accum) return;
    for (int i = 0; i < a->t; i++) {
        size_t o = (size_t)i * a->ld3;
        memset(a->dq + o, 0, (size_t)a->d * sizeof(float));
        memset(a->dk + o, 0, (size_t)a->d * sizeof(float));
        memset(a->dv + o, 0, (size_t)a->d * sizeof(float));
    }
}

// Unfused forward: per block of query rows, their scores against keys 0..i1-1 in one GEMM
// (the rest of the upper triangle is never computed), a softmax per row, then y = p v.
static void attn_fwd_unfused_task(void *arg, int task)
{
    AttnHead a = attn_head(arg, task);
    int t = a.t;
    for (int i0 = 0; i0 < t; i0 += ATTN_BQ) {
        int i1 = min_int(t, i0 + ATTN_BQ), rows = i1 - i0;
        float *pb = a.p + (size_t)i0 * t;
        gemm(false, true, rows, i1, a.d, a.scale, a.q + (size_t)i0 * a.ld3, a.ld3, a.k, a.ld3,
             0.0f, pb, t);
        for (int i = i0; i < i1; i++) {
            float *pr = a.p + (size_t)i * t, m = -INFINITY, sum = 0.0f;
            for (int j = 0; j <= i; j++) m = pr[j] > m ? pr[j] : m;
            for (int j = 0; j <= i; j++) {
                pr[j] = expf(pr[j] - m);
                sum += pr[j];
            }
            float inv = 1.0f / sum;
            for (int j = 0; j <= i; j++) pr[j] *= inv;
            memset(pr + i + 1, 0, (size_t)(t - i - 1) * sizeof *pr);
        }
        gemm(false, false, rows, a.d, i1, 1.0f, pb, t, a.v, a.ld3, 0.0f, a.y + (size_t)i0 * a.ld,
             a.ld);
    }
}

// Unfused backward, per block of query rows and block of keys (stack buffers only):
// dp = dy v^T, ds = p (dp - rowsum(dp p)), dq += ds k / sqrt d, dk += ds^T q / sqrt d,
// dv += p^T dy. The row sums need the whole row of dp, so a first pass over the key blocks
// computes them and a second recomputes dp (one GEMM more than materialising dp, no t-sized
// buffer per task).
static void attn_bwd_unfused_task(void *arg, int task)
{
    const AttnJob *j = arg;
    AttnHead a = attn_head(j, task);
    int t = a.t, d = a.d;
    float dp[ATTN_BQ * ATTN_BK], rowsum[ATTN_BQ];
    attn_zero_grads(&a, j->accum);
    for (int i0 = 0; i0 < t; i0 += ATTN_BQ) {
        int i1 = min_int(t, i0 + ATTN_BQ), rows = i1 - i0;
        const float *dyb = a.dy + (size_t)i0 * a.ld, *qb = a.q + (size_t)i0 * a.ld3;
        for (int r = 0; r < rows; r++) rowsum[r] = 0.0f;
        for (int pass = 0; pass < 2; pass++)
            for (int j0 = 0; j0 < i1; j0 += ATTN_BK) {
                int j1 = min_int(i1, j0 + ATTN_BK), keys = j1 - j0;
                gemm(false, true, rows, keys, d, 1.0f, dyb, a.ld, a.v + (size_t)j0 * a.ld3, a.ld3,
                     0.0f, dp, ATTN_BK);
                for (int r = 0; r < rows; r++) {
                    const float *pr = a.p_in + (size_t)(i0 + r) * t + j0;
                    float *dr = dp + (size_t)r * ATTN_BK;
                    int valid = min_int(keys, i0 + r - j0 + 1);  // keys j <= i
                    if (pass == 0) {
                        for (int e = 0; e < valid; e++) rowsum[r] += dr[e] * pr[e];
                        continue;
                    }
                    for (int e = 0; e < keys; e++) dr[e] = e < valid ? pr[e] * (dr[e] - rowsum[r]) : 0.0f;
                }
                if (pass == 0) continue;
                gemm(false, false, rows, d, keys, a.scale, dp, ATTN_BK, a.k + (size_t)j0 * a.ld3,
                     a.ld3, 1.0f, a.dq + (size_t)i0 * a.ld3, a.ld3);
                gemm(true, false, keys, d, rows, a.scale, dp, ATTN_BK, qb, a.ld3, 1.0f,
                     a.dk + (size_t)j0 * a.ld3, a.ld3);
                gemm(true, false, keys, d, rows, 1.0f, a.p_in + (size_t)i0 * t + j0, t, dyb, a.ld,
                     1.0f, a.dv + (size_t)j0 * a.ld3, a.ld3);
            }
    }
}

void attn_fwd_unfused_fast(const CpuWorkspace *ws, int n, int t, int c, int heads,
                           const float *qkv, float *p, float *y)
{
    AttnJob j = {.n = n, .t = t, .c = c, .heads = heads, .qkv = qkv, .p = p, .y = y};
    cpu_pool_run(ws->threads, n * heads, attn_fwd_unfused_task, &j);
}

void attn_bwd_unfused_fast(const CpuWorkspace *ws, int n, int t, int c, int heads,
                           const float *qkv, const float *p, const float *dy, float *dqkv,
                           bool accum)
{
    AttnJob j = {.n = n, .t = t, .c = c, .heads = heads, .qkv = qkv, .p_in = p, .dy = dy,
                 .dqkv = dqkv, .accum = accum};
    cpu_pool_run(ws->threads, n * heads, attn_bwd_unfused_task, &j);
}

// The scaled scores s = q k^T / sqrt d (rows x keys, row stride ATTN_BK) of query rows
// i0.. against keys j0.. (the causal mask is the caller's).
static void attn_scores(const AttnHead *a, int i0, int rows, int j0, int keys, float *s)
{
    gemm(false, true, rows, keys, a->d, a->scale, a->q + (size_t)i0 * a->ld3, a->ld3,
         a->k + (size_t)j0 * a->ld3, a->ld3, 0.0f, s, ATTN_BK);
}

// Fused forward, per block of query rows: the online softmax over blocks of keys. The
// block's rows of y hold the unnormalised sum of exp(s - m) v, rescaled by exp(m_old - m)
// whenever a row's running maximum m grows, divided by the running sum l at the end.
static void attn_fwd_fused_task(void *arg, int task)
{
    AttnHead a = attn_head(arg, task);
    int t = a.t, d = a.d;
    float s[ATTN_BQ * ATTN_BK], m[ATTN_BQ], l[ATTN_BQ];
    for (int i0 = 0; i0 < t; i0 += ATTN_BQ) {
        int i1 = min_int(t, i0 + ATTN_BQ), rows = i1 - i0;
        float *yb = a.y + (size_t)i0 * a.ld;
        for (int r = 0; r < rows; r++) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
            memset(yb + (size_t)r * a.ld, 0, (size_t)d * sizeof *yb);
        }
        for (int j0 = 0; j0 < i1; j0 += ATTN_BK) {
            int j1 = min_int(i1, j0 + ATTN_BK), keys = j1 - j0;
            attn_scores(&a, i0, rows, j0, keys, s);
            for (int r = 0; r < rows; r++) {
                float *sr = s + (size_t)r * ATTN_BK, mx = m[r], sum = 0.0f;
                int valid = min_int(keys, i0 + r - j0 + 1);
                for (int e = 0; e < valid; e++) mx = sr[e] > mx ? sr[e] : mx;
                for (int e = 0; e < keys; e++) {
                    sr[e] = e < valid ? expf(sr[e] - mx) : 0.0f;
                    sum += sr[e];
                }
                if (mx > m[r]) {  // a new maximum: rescale what was summed against the old one
                    float alpha = expf(m[r] - mx), *yr = yb + (size_t)r * a.ld;
                    for (int e = 0; e < d; e++) yr[e] *= alpha;
                    l[r] *= alpha;
                    m[r] = mx;
                }
                l[r] += sum;
            }
            gemm(false, false, rows, d, keys, 1.0f, s, ATTN_BK, a.v + (size_t)j0 * a.ld3, a.ld3,
                 1.0f, yb, a.ld);
        }
        for (int r = 0; r < rows; r++) {
            float inv = 1.0f / l[r], *yr = yb + (size_t)r * a.ld;
            for (int e = 0; e < d; e++) yr[e] *= inv;
            a.lse[i0 + r] = m[r] + logf(l[r]);
        }
    }
}

// Fused backward (FlashAttention's), per block of query rows and block of keys: p
// recomputed from the scores and lse, D_i = dy_i . y_i, ds = p (dy v^T - D), then the same
// three GEMMs as the unfused backward.
static void attn_bwd_fused_task(void *arg, int task)
{
    const AttnJob *j = arg;
    AttnHead a = attn_head(j, task);
    int t = a.t, d = a.d;
    float s[ATTN_BQ * ATTN_BK], dp[ATTN_BQ * ATTN_BK], D[ATTN_BQ];
    attn_zero_grads(&a, j->accum);
    for (int i0 = 0; i0 < t; i0 += ATTN_BQ) {
        int i1 = min_int(t, i0 + ATTN_BQ), rows = i1 - i0;
        const float *dyb = a.dy + (size_t)i0 * a.ld, *qb = a.q + (size_t)i0 * a.ld3;
        for (int r = 0; r < rows; r++) {
            const float *g = dyb + (size_t)r * a.ld, *y = a.y_in + (size_t)(i0 + r) * a.ld;
            float acc = 0.0f;
            for (int e = 0; e < d; e++) acc += g[e] * y[e];
            D[r] = acc;
        }
        for (int j0 = 0; j0 < i1; j0 += ATTN_BK) {
            int j1 = min_int(i1, j0 + ATTN_BK), keys = j1 - j0;
            attn_scores(&a, i0, rows, j0, keys, s);
            gemm(false, true, rows, keys, d, 1.0f, dyb, a.ld, a.v + (size_t)j0 * a.ld3, a.ld3,
                 0.0f, dp, ATTN_BK);
            for (int r = 0; r < rows; r++) {
                float *sr = s + (size_t)r * ATTN_BK, *dr = dp + (size_t)r * ATTN_BK;
                float lse = a.lse_in[i0 + r];
                int valid = min_int(keys, i0 + r - j0 + 1);
                for (int e = 0; e < keys; e++) {
                    sr[e] = e < valid ? expf(sr[e] - lse) : 0.0f;
                    dr[e] = sr[e] * (dr[e] - D[r]);
                }
            }
            gemm(true, false, keys, d, rows, 1.0f, s, ATTN_BK, dyb, a.ld, 1.0f,
                 a.dv + (size_t)j0 * a.ld3, a.ld3);
            gemm(false, false, rows, d, keys, a.scale, dp, ATTN_BK, a.k + (size_t)j0 * a.ld3,
                 a.ld3, 1.0f, a.dq + (size_t)i0 * a.ld3, a.ld3);
            gemm(true, false, keys, d, rows, a.scale, dp, ATTN_BK, qb, a.ld3, 1.0f,
                 a.dk + (size_t)j0 * a.ld3, a.ld3);
        }
    }
}

void attn_fwd_fused_fast(const CpuWorkspace *ws, int n, int t, int c, int heads,
                         const float *qkv, float *lse, float *y)
{
    AttnJob j = {.n = n, .t = t, .c = c, .heads = heads, .qkv = qkv, .lse = lse, .y = y};
    cpu_pool_run(ws->threads, n * heads, attn_fwd_fused_task, &j);
}

void attn_bwd_fused_fast(const CpuWorkspace *ws, int n, int t, int c, int heads,
                         const float *qkv, const float *y, const float *lse, const float *dy,
                         float *dqkv, bool accum)
{
    AttnJob j = {.n = n, .t = t, .c = c, .heads = heads, .qkv = qkv, .y_in = y, .lse_in = lse,
                 .dy = dy, .dqkv = dqkv, .accum = accum};
    cpu_pool_run(ws->threads, n * heads, attn_bwd_fused_task, &j);
}
