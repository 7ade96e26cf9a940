// layers_cpu_fast_conv.c: the fast CPU convolutions (see layers_cpu_fast.c for how the
// layers are cut into tasks, and layers_cpu_fast.h).
#include <string.h>

#include "kernels/cpu_pool.h"
#include "kernels/cpu/layers_cpu_fast_internal.h"

// ---- convolutions --------------------------------------------------------------------
//
// Task t of T takes the images [n*t/T, n*(t+1)/T) and works through them in chunks of nb
// images (conv_chunk): small feature maps are batched so that every GEMM has at least
// CHUNK_COLUMNS columns (a GEMM over one 8x8 image has 64 and runs at half speed).
// A chunk's im2col is (C*R*R, nb*P*Q); its output, or its gathered dy, is (K, nb*P*Q)
// and is copied to or from the NCHW tensors image by image. With nb = 1 the GEMMs read
// and write the tensors directly.
//   forward:       y (K, PQ)         = W (K, CRR) x col(x) (CRR, PQ)
//   weight grad:   dW (K, CRR)      += dy (K, PQ) x col(x)^T           (per-task parts), or
//                  for K <= WGRAD_TRANSPOSED_MAX_K, dW^T (CRR, K) += col(x) x dy^T, twice as
//                  fast in OpenBLAS for K = 32 (75 against 45 GFLOP/s on one Zen 4 core),
//                  transposed into dW when the parts are summed;
//   input grad, stride 1, same size: dx (C, HW) = W' (C, KRR) x col'(dy) (KRR, HW), a
//                  forward convolution of dy with W' = W with C and K swapped and the
//                  taps flipped (padding R-1-pad), so no col2im and no zeroing;
//   input grad, otherwise: col = W^T (CRR, K) x dy (K, PQ), then col2im adds col into dx.
// Task t's workspace region: [col][chunk][weight-gradient part: when there are several
// tasks, or dW is transposed].

// ---- im2col and its adjoint (cloned per instruction set) ------------------------------

// col (C*R*R, (p_hi-p_lo)*Q), rows ld floats apart: output rows [p_lo, p_hi) of the
// im2col of one image x (C, H, W); out-of-image taps are 0. A stride-1 convolution that
// keeps the size (P = H, Q = W) shifts each channel plane as a whole: one contiguous copy
// per tap, then the wrapped-around edge columns are zeroed; anything else goes pixel row
// by pixel row.
CPU_SIMD static void im2col_image(const ConvShape *s, const float *restrict x,
                                  float *restrict col, size_t ld, int p_lo, int p_hi)
{
    int st = s->stride;
    if (st == 1 && s->p == s->h && s->q == s->w) {
        int w = s->w, h = s->h;
        size_t hw = (size_t)h * w, base = (size_t)p_lo * w, end = (size_t)p_hi * w;
        for (int c = 0; c < s->c; c++)
            for (int i = 0; i < s->r; i++)
                for (int j = 0; j < s->r; j++) {
                    float *row = col + (size_t)((c * s->r + i) * s->r + j) * ld; // pixel base
                    const float *xc = x + (size_t)c * hw;
                    int di = i - s->pad, dj = j - s->pad; // input pixel = output pixel + (di, dj)
                    // output rows whose input row exists: [p0, p1)
                    int p0 = di < 0 ? -di : 0, p1 = di > 0 ? h - di : h;
                    if (p0 > h) p0 = h;
                    if (p1 < p0) p1 = p0;
                    int z0 = p0 < p_hi ? p0 : p_hi, z1 = p1 > p_lo ? p1 : p_lo;
                    for (size_t k = base; k < (size_t)z0 * w; k++) row[k - base] = 0.0f;
                    for (size_t k = (size_t)z1 * w; k < end; k++) row[k - base] = 0.0f;
                    long shift = (long)di * w + dj;
                    size_t lo = (size_t)p0 * w + (dj < 0 ? -dj : 0);
                    size_t hi = (size_t)p1 * w - (dj > 0 ? dj : 0);
                    if (lo < base) lo = base;
                    if (hi > end) hi = end;
                    if (hi > lo) memcpy(row + (lo - base), xc + (long)lo + shift, (hi - lo) * sizeof *row);
                    if (dj != 0)
                        for (int p = p0 > p_lo ? p0 : p_lo; p < (p1 < p_hi ? p1 : p_hi); p++) {
                            float *r = row + (size_t)(p - p_lo) * w;
                            if (dj < 0)
                                for (int q = 0; q < -dj && q < w; q++) r[q] = 0.0f;
                            else
                                for (int q = w - dj < 0 ? 0 : w - dj; q < w; q++) r[q] = 0.0f;
                        }
                }
        return;
    }
    for (int c = 0; c < s->c; c++)
        for (int i = 0; i < s->r; i++)
            for (int j = 0; j < s->r; j++) {
                float *row = col + (size_t)((c * s->r + i) * s->r + j) * ld;
                int off = j - s->pad; // input column of output column q: q*st + off
                int q0 = off >= 0 ? 0 : (-off + st - 1) / st;
                int q1 = (s->w - off + st - 1) / st;
                if (q0 > s->q) q0 = s->q;
                if (q1 > s->q) q1 = s->q;
                if (q1 < q0) q1 = q0;
                for (int p = p_lo; p < p_hi; p++) {
                    float *out = row + (size_t)(p - p_lo) * s->q;
                    int y = p * st - s->pad + i;
                    if (y < 0 || y >= s->h) {
                        for (int q = 0; q < s->q; q++) out[q] = 0.0f;
                        continue;
                    }
                    const float *xr = x + ((size_t)c * s->h + y) * s->w;
                    for (int q = 0; q < q0; q++) out[q] = 0.0f;
                    if (st == 1)
                        for (int q = q0; q < q1; q++) out[q] = xr[q + off];
                    else
                        for (int q = q0; q < q1; q++) out[q] = xr[q * st + off];
                    for (int q = q1; q < s->q; q++) out[q] = 0.0f;
                }
            }
}

// dx (C, H, W) += col (C*R*R, P*Q) scattered back (the adjoint of im2col_image).
CPU_SIMD static void col2im_image(const ConvShape *s, const float *restrict col,
                                  float *restrict dx)
{
    int pq = s->p * s->q, st = s->stride;
    for (int c = 0; c < s->c; c++)
        for (int i = 0; i < s->r; i++)
            for (int j = 0; j < s->r; j++) {
                const float *row = col + ((size_t)(c * s->r + i) * s->r + j) * pq;
                int off = j - s->pad;
                int q0 = off >= 0 ? 0 : (-off + st - 1) / st;
                int q1 = (s->w - off + st - 1) / st;
                if (q0 > s->q) q0 = s->q;
                if (q1 > s->q) q1 = s->q;
                for (int p = 0; p < s->p; p++) {
                    int y = p * st - s->pad + i;
                    if (y < 0 || y >= s->h) continue;
                    const float *in = row + (size_t)p * s->q;
                    float *dr = dx + ((size_t)c * s->h + y) * s->w;
                    if (st == 1)
                        for (int q = q0; q < q1; q++) dr[q + off] += in[q];
                    else
                        for (int q = q0; q < q1; q++) dr[q * st + off] += in[q];
                }
            }
}

#define CHUNK_COLUMNS 256
// Large feature maps go through im2col a block of output rows at a time, so that the
// block (filled, then packed by the GEMM) stays in a core's L2 cache.
#define COL_BLOCK_FLOATS (192 * 1024)
#define WGRAD_TRANSPOSED_MAX_K 64

// A 1x1, stride-1, unpadded convolution is a plain GEMM on the image: no im2col.
static bool conv_is_pointwise(const ConvShape *s)
{
    return s->r == 1 && s->stride == 1 && s->pad == 0;
}

// Stride 1 and the output as large as the input: dx is a forward convolution of dy.
static bool conv_keeps_size(const ConvShape *s)
{
    return s->stride == 1 && s->p == s->h && s->q == s->w;
}

static int conv_chunk_max(const ConvShape *s)
{
    if (conv_is_pointwise(s)) return 1;
    int pq = s->p * s->q;
    return pq >= CHUNK_COLUMNS ? 1 : (CHUNK_COLUMNS + pq - 1) / pq;
}

// Output rows per im2col block of one image (s->p: the whole image).
static int conv_block_rows(const ConvShape *s)
{
    int rows_in = s->c * s->r * s->r, rows_out = s->k * s->r * s->r;
    size_t per_row = (size_t)(conv_keeps_size(s) && rows_out > rows_in ? rows_out : rows_in) * s->q;
    if (per_row * s->p <= COL_BLOCK_FLOATS) return s->p;
    int rows = (int)(COL_BLOCK_FLOATS / per_row);
    if (rows < 1) rows = 1;
    int blocks = (s->p + rows - 1) / rows;
    return (s->p + blocks - 1) / blocks;
}

// Images per chunk when `threads` threads share s->n images.
static int conv_chunk(const ConvShape *s, int threads)
{
    int per = (s->n + threads - 1) / threads, nb = conv_chunk_max(s);
    return nb < per ? nb : (per > 0 ? per : 1);
}

// Floats of a thread's im2col buffer and of its chunk buffer for convolution s.
static void conv_regions(const ConvShape *s, size_t *col, size_t *chunk)
{
    size_t cols = (size_t)conv_chunk_max(s) * s->p * s->q;
    size_t rr = (size_t)s->r * s->r, most = (size_t)(s->k > s->c ? s->k : s->c);
    *col = (conv_keeps_size(s) ? most : (size_t)s->c) * rr * cols;
    *chunk = most * cols;
}

static bool conv_wgrad_transposed(const ConvShape *s) { return s->k <= WGRAD_TRANSPOSED_MAX_K; }

size_t conv_region_floats(const ConvShape *s, bool threaded)
{
    size_t col, chunk;
    conv_regions(s, &col, &chunk);
    bool part = threaded || conv_wgrad_transposed(s);
    return col + chunk + (part ? conv_weight_floats(s) : 0);
}

// The transposed convolution's shape: dy (N, K, P, Q) in, dx (N, C, H, W) out.
static ConvShape conv_transposed(const ConvShape *s)
{
    return (ConvShape){s->n, s->k, s->p, s->q, s->c, s->r, 1, s->r - 1 - s->pad, s->h, s->w};
}

// W' (C, K*R*R): w' [c][k][i][j] = w[k][c][R-1-i][R-1-j].
static void conv_flip_weights(const ConvShape *s, const float *w, float *wf)
{
    int r = s->r;
    for (int k = 0; k < s->k; k++)
        for (int c = 0; c < s->c; c++)
            for (int i = 0; i < r; i++)
                for (int j = 0; j < r; j++)
                    wf[(((size_t)c * s->k + k) * r + i) * r + j] =
                        w[(((size_t)k * s->c + c) * r + (r - 1 - i)) * r + (r - 1 - j)];
}

// Rows of nb images' (rows, pq) blocks side by side: out (rows, nb*pq) from images
// `stride` floats apart, or (add/copy) back.
static void chunk_gather(const float *src, size_t stride, int nb, int rows, int pq, float *out)
{
    size_t cols = (size_t)nb * pq;
    for (int j = 0; j < nb; j++)
        for (int k = 0; k < rows; k++)
            memcpy(out + k * cols + (size_t)j * pq, src + j * stride + (size_t)k * pq,
                   (size_t)pq * sizeof *out);
}

static void chunk_scatter(const float *in, int nb, int rows, int pq, float *dst, size_t stride,
                          bool accum)
{
    size_t cols = (size_t)nb * pq;
    for (int j = 0; j < nb; j++)
        for (int k = 0; k < rows; k++) {
            const float *a = in + k * cols + (size_t)j * pq;
            float *d = dst + j * stride + (size_t)k * pq;
            if (accum) add_span(d, a, d, (size_t)pq);
            else memcpy(d, a, (size_t)pq * sizeof *d);
        }
}

// A convolution call cut into tasks: task t takes images [n*t/T, n*(t+1)/T) and thread
// region t of the workspace.
typedef struct ConvJob {
    const CpuWorkspace *ws;
    const ConvShape *s;
    int tasks, reduce_tasks;
    const float *x, *dy, *w, *wf, *bias;
    float *y, *dx, *dw;
    bool accum_dx, accum_dw;
} ConvJob;

// The rows of a GEMM's C (k rows of cols floats, row stride ldc) set to their channel's bias,
// so that the GEMM (beta = 1) adds the convolution onto it: the bias costs no pass of its own
// (PyTorch's CPU convolutions take the bias inside the kernel too).
static void fill_bias(float *c, int k, int cols, size_t ldc, const float *bias)
{
    for (int r = 0; r < k; r++) {
        float *row = c + (size_t)r * ldc, v = bias[r];
        for (int i = 0; i < cols; i++) row[i] = v;
    }
}

static void conv_fwd_task(void *arg, int t)
{
    const ConvJob *j = arg;
    const ConvShape *s = j->s;
    size_t xs = (size_t)s->c * s->h * s->w, ys = (size_t)s->k * s->p * s->q;
    int crr = s->c * s->r * s->r, pq = s->p * s->q;
    int nb = conv_chunk(s, j->tasks), block = conv_block_rows(s);
    size_t col_floats, chunk_floats;
    conv_regions(s, &col_floats, &chunk_floats);
    float *col = cpu_workspace_region(j->ws, t), *out = col + col_floats;
    const float *bias = j->bias;
    const float beta = bias ? 1.0f : 0.0f;  // C holds the bias, or is overwritten
    int end = s->n * (t + 1) / j->tasks;
    for (int i = s->n * t / j->tasks; i < end; i += nb) {
        int m = end - i < nb ? end - i : nb, cols = m * pq;
        const float *xi = j->x + i * xs;
        float *yi = j->y + i * ys;
        if (conv_is_pointwise(s)) {
            if (bias) fill_bias(yi, s->k, pq, (size_t)pq, bias);
            sgemm(false, false, s->k, pq, crr, j->w, crr, xi, pq, beta, yi, pq);
        } else if (m == 1) { // one image, a block of output rows at a time
            for (int p0 = 0; p0 < s->p; p0 += block) {
                int p1 = p0 + block < s->p ? p0 + block : s->p, bcols = (p1 - p0) * s->q;
                im2col_image(s, xi, col, (size_t)bcols, p0, p1);
                float *yb = yi + (size_t)p0 * s->q;
                if (bias) fill_bias(yb, s->k, bcols, (size_t)pq, bias);
                sgemm(false, false, s->k, bcols, crr, j->w, crr, col, bcols, beta, yb, pq);
            }
        } else { // m images side by side
            for (int k = 0; k < m; k++)
                im2col_image(s, xi + k * xs, col + (size_t)k * pq, (size_t)cols, 0, s->p);
            if (bias) fill_bias(out, s->k, cols, (size_t)cols, bias);
            sgemm(false, false, s->k, cols, crr, j->w, crr, col, cols, beta, out, cols);
            chunk_scatter(out, m, s->k, pq, yi, ys, false);
        }
    }
}

void conv_fwd_fast(const CpuWorkspace *ws, const ConvShape *s, const float *x, const float *w,
                   const float *bias, float *y)
{
    ConvJob j = {.ws = ws, .s = s, .tasks = min_int(ws->threads, s->n), .x = x, .w = w, .bias = bias,
                 .y = y};
    cpu_pool_run(ws->threads, j.tasks, conv_fwd_task, &j);
}

// Task t sums its images' weight gradient into its own part, which conv_reduce_task adds
// to dw; task 0 writes dw itself when dw is not transposed.
static void conv_bwd_task(void *arg, int t)
{
    const ConvJob *j = arg;
    const ConvShape *s = j->s;
    size_t xs = (size_t)s->c * s->h * s->w, ys = (size_t)s->k * s->p * s->q;
    int crr = s->c * s->r * s->r, krr = s->k * s->r * s->r, pq = s->p * s->q;
    bool direct = conv_is_pointwise(s), flipped = j->dx && !direct && conv_keeps_size(s);
    bool wt = conv_wgrad_transposed(s);
    ConvShape ts = conv_transposed(s);
    int nb = conv_chunk(s, j->tasks), block = conv_block_rows(s);
    size_t col_floats, chunk_floats;
    conv_regions(s, &col_floats, &chunk_floats);
    float *col = cpu_workspace_region(j->ws, t), *chunk = col + col_floats;
    float *part = t == 0 && !wt ? j->dw : chunk + chunk_floats;
    float beta_dx = j->accum_dx ? 1.0f : 0.0f;
    bool first = true;
    int end = s->n * (t + 1) / j->tasks;
    for (int i = s->n * t / j->tasks; i < end; i += nb) {
        int m = end - i < nb ? end - i : nb, cols = m * pq;
        const float *xi = j->x + i * xs, *dyi = j->dy + i * ys;
        float *dxi = j->dx ? j->dx + i * xs : NULL;
        // Blocks of output columns: (K, bcols) of dy with row stride ldy against (CRR,
        // bcols) of col(x); a block of rows of one image, or m whole images side by side.
        int blocks = m == 1 && !direct ? (s->p + block - 1) / block : 1;
        for (int bi = 0; bi < blocks; bi++) {
            int p0 = bi * block, p1 = blocks == 1 ? s->p : (p0 + block < s->p ? p0 + block : s->p);
            int bcols = m == 1 ? (p1 - p0) * s->q : cols, ldy = m == 1 ? pq : cols;
            size_t off = (size_t)p0 * s->q;
            const float *dyc = dyi + off, *b = xi;
            if (m > 1) {
                chunk_gather(dyi, ys, m, s->k, pq, chunk);
                dyc = chunk;
            }
            if (!direct) {
                for (int k = 0; k < m; k++)
                    im2col_image(s, xi + k * xs, col + (size_t)k * pq, (size_t)bcols, p0, p1);
                b = col;
            }
            float beta = first ? (part == j->dw && j->accum_dw ? 1.0f : 0.0f) : 1.0f;
            if (wt) sgemm(false, true, crr, s->k, bcols, b, bcols, dyc, ldy, beta, part, s->k);
            else sgemm(false, true, s->k, crr, bcols, dyc, ldy, b, bcols, beta, part, crr);
            first = false;
            if (!flipped) continue;
            for (int k = 0; k < m; k++)
                im2col_image(&ts, dyi + k * ys, col + (size_t)k * pq, (size_t)bcols, p0, p1);
            if (m == 1) {
                sgemm(false, false, s->c, bcols, krr, j->wf, krr, col, bcols, beta_dx, dxi + off, pq);
            } else {
                sgemm(false, false, s->c, cols, krr, j->wf, krr, col, cols, 0.0f, chunk, cols);
                chunk_scatter(chunk, m, s->c, pq, dxi, xs, j->accum_dx);
            }
        }
        if (!dxi || flipped) continue;
        if (direct) {
            sgemm(true, false, crr, pq, s->k, j->w, crr, dyi, pq, beta_dx, dxi, pq);
            continue;
        }
        for (int k = 0; k < m; k++) { // strided: col = W^T dy, scattered back by col2im
            sgemm(true, false, crr, pq, s->k, j->w, crr, dyi + k * ys, pq, 0.0f, col, pq);
            if (!j->accum_dx) fill_span(dxi + k * xs, xs, 0.0f);
            col2im_image(s, col, dxi + k * xs);
        }
    }
}

static const float *conv_part(const ConvJob *j, int task)
{
    size_t col_floats, chunk_floats;
    conv_regions(j->s, &col_floats, &chunk_floats);
    return cpu_workspace_region(j->ws, task) + col_floats + chunk_floats;
}

// Transposed parts (CRR, K): rows [K*t/T, K*(t+1)/T) of dw (=|+=) the sum over tasks.
static void conv_reduce_transposed_task(void *arg, int t)
{
    const ConvJob *j = arg;
    int k = j->s->k, crr = j->s->c * j->s->r * j->s->r, spans = j->reduce_tasks;
    for (int row = k * t / spans; row < k * (t + 1) / spans; row++) {
        float *d = j->dw + (size_t)row * crr;
        for (int u = 0; u < j->tasks; u++) {
            const float *p = conv_part(j, u) + row;
            if (u == 0 && !j->accum_dw)
                for (int r = 0; r < crr; r++) d[r] = p[(size_t)r * k];
            else
                for (int r = 0; r < crr; r++) d[r] += p[(size_t)r * k];
        }
    }
}

// dw += the parts of tasks 1..T-1, in task order, over span t of dw.
static void conv_reduce_task(void *arg, int t)
{
    const ConvJob *j = arg;
    size_t lo, hi;
    span_of(conv_weight_floats(j->s), t, j->reduce_tasks, &lo, &hi);
    for (int u = 1; u < j->tasks; u++) {
        const float *pu = conv_part(j, u);
        add_span(j->dw + lo, pu + lo, j->dw + lo, hi - lo);
    }
}

void conv_bwd_fast(const CpuWorkspace *ws, const ConvShape *s, const float *x, const float *dy,
                   const float *w, float *dx, bool accum_dx, float *dw, bool accum_dw)
{
    ConvJob j = {.ws = ws, .s = s, .tasks = min_int(ws->threads, s->n), .x = x, .dy = dy,
                 .w = w, .dx = dx, .dw = dw, .accum_dx = accum_dx, .accum_dw = accum_dw};
    if (dx && !conv_is_pointwise(s) && conv_keeps_size(s)) {
        conv_flip_weights(s, w, ws->scratch); // the shared region
        j.wf = ws->scratch;
    }
    cpu_pool_run(ws->threads, j.tasks, conv_bwd_task, &j);
    if (conv_wgrad_transposed(s)) {
        j.reduce_tasks = min_int(ws->threads, s->k);
        cpu_pool_run(ws->threads, j.reduce_tasks, conv_reduce_transposed_task, &j);
    } else if (j.tasks > 1) {
        j.reduce_tasks = min_int(ws->threads, j.tasks);
        cpu_pool_run(ws->threads, j.reduce_tasks, conv_reduce_task, &j);
    }
}
