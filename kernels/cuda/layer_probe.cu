// layer_probe.cu: single-layer runs of the CUDA backend on host arrays (layer_probe.h),
// using the same launchers, cuDNN plans and cuBLAS calls as core_cuda*.cu.
#include "kernels/layer_probe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/conv_cudnn.cuh"
#include "kernels/layers_cuda.cuh"

#define PROBE_MAX_BUFFERS 32

// Device buffers of one probe, freed together.
typedef struct Probe {
    void *ptrs[PROBE_MAX_BUFFERS];
    int count;
    DType dt;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
} Probe;

static DType probe_dtype(CorePrecision p)
{
    return p == CORE_PRECISION_FP16 ? DT_F16 : p == CORE_PRECISION_BF16 ? DT_BF16 : DT_F32;
}

static int probe_alloc(Probe *p, void **out, size_t bytes)
{
    if (p->count == PROBE_MAX_BUFFERS)
        return error_set(ERROR_LIBRARY, "probe_alloc: too many buffers");
    CUDA_TRY(cudaMalloc(out, bytes ? bytes : 1));
    p->ptrs[p->count++] = *out;
    return 0;
}

static void probe_end(Probe *p)
{
    for (int i = 0; i < p->count; i++) cudaFree(p->ptrs[i]);
    if (p->dnn) cudnnDestroy(p->dnn);
    if (p->blas) cublasDestroy(p->blas);
    memset(p, 0, sizeof *p);
}

static size_t geom_size(ChanGeom g) { return (size_t)g.n * g.c * g.hw; }

// fp32 host array to a device fp32 buffer.
static int put_f32(Probe *p, const float *h, size_t n, float **out)
{
    TRY(probe_alloc(p, (void **)out, n * sizeof(float)));
    CUDA_TRY(cudaMemcpy(*out, h, n * sizeof(float), cudaMemcpyHostToDevice));
    return 0;
}

static int get_f32(const float *d, size_t n, float *h)
{
    CUDA_TRY(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

// Host fp32 NCHW to a device tensor in the probe's type and g's layout.
static int put(Probe *p, const float *h, ChanGeom g, void **out)
{
    float *tmp;
    TRY(put_f32(p, h, geom_size(g), &tmp));
    TRY(probe_alloc(p, out, geom_size(g) * dtype_size(p->dt)));
    TRY(cuda_convert_input(tmp, *out, p->dt, g, 0));
    return 0;
}

static int get(Probe *p, const void *d, ChanGeom g, float *h)
{
    float *tmp;
    TRY(probe_alloc(p, (void **)&tmp, geom_size(g) * sizeof(float)));
    TRY(cuda_convert_output(d, tmp, p->dt, g, 0));
    return get_f32(tmp, geom_size(g), h);
}

static int alloc_like(Probe *p, ChanGeom g, void **out)
{
    return probe_alloc(p, out, geom_size(g) * dtype_size(p->dt));
}

static int run_conv(Probe *pr, const ConvShape *s, CorePrecision prec, bool nhwc, CoreConvAlgo a,
                    const float *x, const float *w, const float *dy, float *y, float *dx, float *dw)
{
    ChanGeom gx = {s->n, s->c, s->h * s->w, nhwc}, gy = {s->n, s->k, s->p * s->q, nhwc};
    size_t wn = (size_t)s->k * s->c * s->r * s->r;
    void *dx_, *dy_, *yd, *dxd, *wd, *dwd, *ws = NULL;
    float *w32, *dw32;
    TRY(put(pr, x, gx, &dx_));
    TRY(put(pr, dy, gy, &dy_));
    TRY(put_f32(pr, w, wn, &w32));
    TRY(probe_alloc(pr, &wd, wn * dtype_size(pr->dt)));
    TRY(cuda_cast_filter(w32, wd, pr->dt, s->k, s->c, s->r * s->r, nhwc, 0));
    TRY(alloc_like(pr, gy, &yd));
    TRY(alloc_like(pr, gx, &dxd));
    TRY(probe_alloc(pr, &dwd, wn * dtype_size(pr->dt)));
    TRY(probe_alloc(pr, (void **)&dw32, wn * sizeof(float)));
    CUDNN_TRY(cudnnCreate(&pr->dnn));
    ConvPlan plan;
    memset(&plan, 0, sizeof plan);
    int device = 0;
    CUDA_TRY(cudaGetDevice(&device));
    // deterministic: compared with the CPU at tight tolerances
    ConvKey key = conv_key_make(device, s, pr->dt, nhwc, prec, a, true, (size_t)256 << 20);
    ConvTuneStats st = {0.0, 0, 0};
    // the output buffers are scratch until the real calls below
    ConvTrialBuffers trial = {dxd, yd, wd, dwd};
    int rc = conv_plan_set(&plan, pr->dnn, &key, &trial, &st);
    size_t wsz = plan.ws_fwd;
    if (plan.ws_bwd_data > wsz) wsz = plan.ws_bwd_data;
    if (plan.ws_bwd_filter > wsz) wsz = plan.ws_bwd_filter;
    if (rc == 0) rc = probe_alloc(pr, &ws, wsz);
    if (rc == 0) rc = conv_forward(&plan, pr->dnn, dx_, wd, yd, ws, wsz);
    if (rc == 0) rc = get(pr, yd, gy, y);
    if (rc == 0) rc = conv_backward_data(&plan, pr->dnn, wd, dy_, dxd, false, ws, wsz);
    if (rc == 0) rc = get(pr, dxd, gx, dx);
    if (rc == 0) rc = conv_backward_filter(&plan, pr->dnn, dx_, dy_, dwd, false, ws, wsz);
    if (rc == 0) rc = cuda_gather_filter_grad(dwd, pr->dt, dw32, s->k, s->c, s->r * s->r, nhwc, false, 0);
    if (rc == 0) rc = get_f32(dw32, wn, dw);
    conv_plan_destroy(&plan);
    return rc;
}

int layer_probe_conv(const ConvShape *s, CorePrecision p, CoreLayout l, CoreConvAlgo a,
                     const float *x, const float *w, const float *dy, float *y, float *dx,
                     float *dw)
{
    Probe pr;
    memset(&pr, 0, sizeof pr);
    pr.dt = probe_dtype(p);
    int rc = run_conv(&pr, s, p, l == CORE_LAYOUT_NHWC, a, x, w, dy, y, dx, dw);
    probe_end(&pr);
    return rc;
}

static int run_bn(Probe *pr, ChanGeom g, const float *x, const float *gamma, const float *beta,
                  const float *dy, float *y, float *dx, float *dgamma, float *dbeta)
{
    void *xd, *dyd, *yd, *dxd;
    float *gd, *bd, *mean, *invstd, *dg, *db, *scratch;
    TRY(put(pr, x, g, &xd));
    TRY(put(pr, dy, g, &dyd));
    TRY(put_f32(pr, gamma, g.c, &gd));
    TRY(put_f32(pr, beta, g.c, &bd));
    TRY(probe_alloc(pr, (void **)&mean, g.c * sizeof(float)));
    TRY(probe_alloc(pr, (void **)&invstd, g.c * sizeof(float)));
    TRY(probe_alloc(pr, (void **)&dg, g.c * sizeof(float)));
    TRY(probe_alloc(pr, (void **)&db, g.c * sizeof(float)));
    TRY(probe_alloc(pr, (void **)&scratch, cuda_bn_scratch_floats(g) * sizeof(float)));
    TRY(alloc_like(pr, g, &yd));
    TRY(alloc_like(pr, g, &dxd));
    TRY(cuda_bn_fwd_train(xd, yd, pr->dt, g, gd, bd, mean, invstd, NULL, NULL, scratch, 0));
    TRY(cuda_bn_bwd(xd, dyd, dxd, false, pr->dt, g, gd, mean, invstd, dg, db, false, scratch, 0));
    TRY(get(pr, yd, g, y));
    TRY(get(pr, dxd, g, dx));
    TRY(get_f32(dg, g.c, dgamma));
    return get_f32(db, g.c, dbeta);
}

int layer_probe_bn(int n, int c, int hw, CorePrecision p, CoreLayout l, const float *x,
                   const float *gamma, const float *beta, const float *dy, float *y, float *dx,
                   float *dgamma, float *dbeta)
{
    Probe pr;
    memset(&pr, 0, sizeof pr);
    pr.dt = probe_dtype(p);
    ChanGeom g = {n, c, hw, l == CORE_LAYOUT_NHWC};
    int rc = run_bn(&pr, g, x, gamma, beta, dy, y, dx, dgamma, dbeta);
    probe_end(&pr);
    return rc;
}

// Device fp32 staging of host array h (NULL: none), converted into dst (type, layout of g).
static int stage(Probe *p, const float *h, ChanGeom g, float **f32)
{
    *f32 = NULL;
    if (!h) return 0;
    return put_f32(p, h, geom_size(g), f32);
}

typedef struct BnExOut { float *y, *dx, *dgamma, *dbeta, *mean, *invstd; } BnExOut;

static int run_bn_ex(Probe *pr, ChanGeom g, const LayerProbeBnOptions *o, const float *x,
                     const float *gamma, const float *beta, const float *dy, const float *dx_init,
                     const float *dg_init, const float *db_init, BnExOut out[2])
{
    void *xd, *dyd, *yd, *dxd;
    float *dy32, *dxi32, *gd, *bd, *mean, *invstd, *dg, *db, *rm, *rv, *scratch;
    const size_t cb = g.c * sizeof(float);
    TRY(put(pr, x, g, &xd));
    TRY(stage(pr, dy, g, &dy32));
    TRY(stage(pr, o->accum ? dx_init : NULL, g, &dxi32));
    TRY(alloc_like(pr, g, &dyd));
    TRY(alloc_like(pr, g, &yd));
    TRY(alloc_like(pr, g, &dxd));
    TRY(put_f32(pr, gamma, g.c, &gd));
    TRY(put_f32(pr, beta, g.c, &bd));
    float *bufs[] = {NULL, NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < 6; i++) TRY(probe_alloc(pr, (void **)&bufs[i], cb));
    mean = bufs[0]; invstd = bufs[1]; dg = bufs[2]; db = bufs[3]; rm = bufs[4]; rv = bufs[5];
    TRY(probe_alloc(pr, (void **)&scratch, cuda_bn_scratch_floats(g) * sizeof(float)));
    for (int run = 0; run < 2; run++) {
        // overwrite y with something else first, so a run that leaves y alone cannot pass
        CUDA_TRY(cudaMemset(rm, 0, cb));
        TRY(cuda_bn_fwd_infer(xd, yd, pr->dt, g, gd, bd, rm, rm, 0));
        TRY(cuda_convert_input(dy32, dyd, pr->dt, g, 0));
        if (o->accum) {
            TRY(cuda_convert_input(dxi32, dxd, pr->dt, g, 0));
            CUDA_TRY(cudaMemcpy(dg, dg_init, cb, cudaMemcpyHostToDevice));
            CUDA_TRY(cudaMemcpy(db, db_init, cb, cudaMemcpyHostToDevice));
        }
        CUDA_TRY(cudaMemset(rm, 0, cb));
        CUDA_TRY(cudaMemset(rv, 0, cb));
        if (o->relu) TRY(cuda_bn_relu_fwd_train(xd, yd, pr->dt, g, gd, bd, mean, invstd, rm, rv, scratch, 0));
        else TRY(cuda_bn_fwd_train(xd, yd, pr->dt, g, gd, bd, mean, invstd, rm, rv, scratch, 0));
        void *dxt = o->in_place && !o->accum ? dyd : dxd;
        if (o->relu)
            TRY(cuda_bn_relu_bwd(xd, yd, dyd, dxt, o->accum, pr->dt, g, gd, mean, invstd, dg, db, o->accum,
                                 scratch, 0));
        else
            TRY(cuda_bn_bwd(xd, dyd, dxt, o->accum, pr->dt, g, gd, mean, invstd, dg, db, o->accum, scratch, 0));
        TRY(get(pr, yd, g, out[run].y));
        TRY(get(pr, dxt, g, out[run].dx));
        TRY(get_f32(dg, g.c, out[run].dgamma));
        TRY(get_f32(db, g.c, out[run].dbeta));
        TRY(get_f32(mean, g.c, out[run].mean));
        TRY(get_f32(invstd, g.c, out[run].invstd));
    }
    return 0;
}

int layer_probe_bn_ex(int n, int c, int hw, CorePrecision p, CoreLayout l,
                      const LayerProbeBnOptions *o, const float *x, const float *gamma,
                      const float *beta, const float *dy, const float *dx_init,
                      const float *dgamma_init, const float *dbeta_init, float *y, float *dx,
                      float *dgamma, float *dbeta, float *mean, float *invstd, bool *repeatable)
{
    if (o->accum && (!dx_init || !dgamma_init || !dbeta_init))
        return error_set(ERROR_BAD_USAGE, "layer_probe_bn_ex: accum needs the initial gradients");
    size_t count = (size_t)n * c * hw;
    float *second = (float *)malloc((2 * count + 4 * (size_t)c) * sizeof(float));
    if (!second) return error_set(ERROR_OUT_OF_MEMORY, "layer_probe_bn_ex: host buffers");
    BnExOut out[2] = {{y, dx, dgamma, dbeta, mean, invstd},
                      {second, second + count, second + 2 * count, second + 2 * count + c,
                       second + 2 * count + 2 * c, second + 2 * count + 3 * c}};
    Probe pr;
    memset(&pr, 0, sizeof pr);
    pr.dt = probe_dtype(p);
    ChanGeom g = {n, c, hw, l == CORE_LAYOUT_NHWC};
    int rc = run_bn_ex(&pr, g, o, x, gamma, beta, dy, dx_init, dgamma_init, dbeta_init, out);
    probe_end(&pr);
    if (rc == 0)
        *repeatable = memcmp(y, out[1].y, count * sizeof(float)) == 0 &&
                      memcmp(dx, out[1].dx, count * sizeof(float)) == 0 &&
                      memcmp(dgamma, out[1].dgamma, c * sizeof(float)) == 0 &&
                      memcmp(dbeta, out[1].dbeta, c * sizeof(float)) == 0 &&
                      memcmp(mean, out[1].mean, c * sizeof(float)) == 0 &&
                      memcmp(invstd, out[1].invstd, c * sizeof(float)) == 0;
    free(second);
    return rc;
}

static int run_bn_infer(Probe *pr, ChanGeom g, bool relu, const float *x, const float *gamma,
                        const float *beta, const float *rmean, const float *rvar, float *y)
{
    void *xd, *yd;
    float *gd, *bd, *md, *vd;
    TRY(put(pr, x, g, &xd));
    TRY(alloc_like(pr, g, &yd));
    TRY(put_f32(pr, gamma, g.c, &gd));
    TRY(put_f32(pr, beta, g.c, &bd));
    TRY(put_f32(pr, rmean, g.c, &md));
    TRY(put_f32(pr, rvar, g.c, &vd));
    if (relu) TRY(cuda_bn_relu_fwd_infer(xd, yd, pr->dt, g, gd, bd, md, vd, 0));
    else TRY(cuda_bn_fwd_infer(xd, yd, pr->dt, g, gd, bd, md, vd, 0));
    return get(pr, yd, g, y);
}

int layer_probe_bn_infer(int n, int c, int hw, CorePrecision p, CoreLayout l, bool relu,
                         const float *x, const float *gamma, const float *beta,
                         const float *running_mean, const float *running_var, float *y)
{
    Probe pr;
    memset(&pr, 0, sizeof pr);
    pr.dt = probe_dtype(p);
    ChanGeom g = {n, c, hw, l == CORE_LAYOUT_NHWC};
    int rc = run_bn_infer(&pr, g, relu, x, gamma, beta, running_mean, running_var, y);
    probe_end(&pr);
    return rc;
}

// A device array of count + offset elements of the probe's type holding h at `offset`.
static int put_flat(Probe *p, const float *h, size_t count, int offset, char **base, void **at)
{
    ChanGeom g = {1, (int)count, 1, false};
    size_t e = dtype_size(p->dt);
    float *tmp = NULL;
    TRY(probe_alloc(p, (void **)base, (count + offset) * e));
    *at = *base + (size_t)offset * e;
    if (!h) return 0;
    TRY(put_f32(p, h, count, &tmp));
    return cuda_convert_input(tmp, *at, p->dt, g, 0);
}

static int get_flat(Probe *p, const void *d, size_t count, float *h)
{
    ChanGeom g = {1, (int)count, 1, false};
    return get(p, d, g, h);
}

// One launch of op; y may alias a or b (in place).
static int ew_launch(Probe *pr, LayerProbeEw op, size_t count, const float *a32, const void *a,
                     const void *b, void *y)
{
    DType dt = pr->dt;
    switch (op) {
    case PROBE_EW_RELU: return cuda_relu_fwd(a, y, dt, count, 0);
    case PROBE_EW_RELU_BWD: return cuda_relu_bwd(a, b, y, false, dt, count, 0);
    case PROBE_EW_RELU_BWD_ACCUM: return cuda_relu_bwd(a, b, y, true, dt, count, 0);
    case PROBE_EW_ADD: return cuda_add_fwd(a, b, y, dt, count, 0);
    case PROBE_EW_ADD_RELU: return cuda_add_relu_fwd(a, b, y, dt, count, 0);
    case PROBE_EW_COPY_GRAD: return cuda_copy_grad(a, y, false, dt, count, 0);
    case PROBE_EW_COPY_GRAD_ACCUM: return cuda_copy_grad(a, y, true, dt, count, 0);
    case PROBE_EW_CAST: return cuda_cast(a32, y, dt, count, 0);
    case PROBE_EW_COUNT: break;
    }
    return error_set(ERROR_BAD_USAGE, "layer_probe_elementwise: unknown op %d", (int)op);
}

static int run_elementwise(Probe *pr, LayerProbeEw op, size_t count, int offset, const float *a,
                           const float *b, const float *init, float *out, float *out_in_place)
{
    bool accum = op == PROBE_EW_RELU_BWD_ACCUM || op == PROBE_EW_COPY_GRAD_ACCUM;
    bool uses_b = op == PROBE_EW_RELU_BWD || op == PROBE_EW_RELU_BWD_ACCUM || op == PROBE_EW_ADD ||
                  op == PROBE_EW_ADD_RELU;
    char *base;
    void *ad, *bd = NULL, *yd;
    float *a32 = NULL;
    if (op == PROBE_EW_CAST) {  // the source is fp32 at the offset
        TRY(probe_alloc(pr, (void **)&base, (count + offset) * sizeof(float)));
        a32 = (float *)base + offset;
        CUDA_TRY(cudaMemcpy(a32, a, count * sizeof(float), cudaMemcpyHostToDevice));
        ad = a32;
    } else {
        TRY(put_flat(pr, a, count, offset, &base, &ad));
    }
    if (uses_b) TRY(put_flat(pr, b, count, offset, &base, &bd));
    TRY(put_flat(pr, accum ? init : NULL, count, offset, &base, &yd));
    TRY(ew_launch(pr, op, count, a32, ad, bd, yd));
    TRY(get_flat(pr, yd, count, out));
    if (!out_in_place || accum || op == PROBE_EW_CAST) return 0;
    // in place: the output over a copy of a (relu_bwd: over a copy of dy)
    bool over_b = op == PROBE_EW_RELU_BWD;
    void *target;
    TRY(put_flat(pr, over_b ? b : a, count, offset, &base, &target));
    TRY(ew_launch(pr, op, count, a32, over_b ? ad : target, over_b ? target : bd, target));
    return get_flat(pr, target, count, out_in_place);
}

int layer_probe_elementwise(LayerProbeEw op, size_t count, int offset, CorePrecision p,
                            const float *a, const float *b, const float *init, float *out,
                            float *out_in_place)
{
    if (count == 0 || count > (size_t)INT32_MAX || offset < 0 || offset > 64)
        return error_set(ERROR_BAD_USAGE, "layer_probe_elementwise: count %zu, offset %d", count, offset);
    Probe pr;
    memset(&pr, 0, sizeof pr);
    pr.dt = probe_dtype(p);
    int rc = run_elementwise(&pr, op, count, offset, a, b, init, out, out_in_place);
    probe_end(&pr);
    return rc;
}

static int run_pointwise(Probe *pr, ChanGeom g, const float *x, const float *x2, const float *dy,
                         const float *dpooled, float *y, float *dx, float *sum, float *pooled,
                         float *dpool)
{
    ChanGeom gp = {g.n, g.c, 1, g.nhwc};
    size_t count = geom_size(g);
    void *xd, *x2d, *dyd, *dpd, *yd, *dxd, *sd, *pd, *dpo;
    TRY(put(pr, x, g, &xd));
    TRY(put(pr, x2, g, &x2d));
    TRY(put(pr, dy, g, &dyd));
    TRY(put(pr, dpooled, gp, &dpd));
    TRY(alloc_like(pr, g, &yd));
    TRY(alloc_like(pr, g, &dxd));
    TRY(alloc_like(pr, g, &sd));
    TRY(alloc_like(pr, gp, &pd));
    TRY(alloc_like(pr, g, &dpo));
    TRY(cuda_relu_fwd(xd, yd, pr->dt, count, 0));
    TRY(cuda_relu_bwd(yd, dyd, dxd, false, pr->dt, count, 0));
    TRY(cuda_add_fwd(xd, x2d, sd, pr->dt, count, 0));
    TRY(cuda_gap_fwd(xd, pd, pr->dt, g, 0));
    TRY(cuda_gap_bwd(dpd, dpo, false, pr->dt, g, 0));
    TRY(get(pr, yd, g, y));
    TRY(get(pr, dxd, g, dx));
    TRY(get(pr, sd, g, sum));
    TRY(get(pr, pd, gp, pooled));
    return get(pr, dpo, g, dpool);
}

int layer_probe_pointwise(int n, int c, int hw, CorePrecision p, CoreLayout l, const float *x,
                          const float *x2, const float *dy, const float *dpooled, float *y,
                          float *dx, float *sum, float *pooled, float *dpool)
{
    Probe pr;
    memset(&pr, 0, sizeof pr);
    pr.dt = probe_dtype(p);
    ChanGeom g = {n, c, hw, l == CORE_LAYOUT_NHWC};
    int rc = run_pointwise(&pr, g, x, x2, dy, dpooled, y, dx, sum, pooled, dpool);
    probe_end(&pr);
    return rc;
}

static int run_linear(Probe *pr, CorePrecision prec, int n, int k, int m, const float *x,
                      const float *w, const float *b, const float *dy, float *y, float *dx,
                      float *dw, float *db)
{
    ChanGeom gx = {n, k, 1, false}, gy = {n, m, 1, false};
    cudaDataType ct = dtype_cuda(pr->dt);
    cublasComputeType_t comp = prec == CORE_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                           : CUBLAS_COMPUTE_32F;
    const float one = 1.0f, zero = 0.0f;
    void *xd, *dyd, *wd, *yd, *dxd;
    float *w32, *bd, *dwd, *dbd;
    TRY(put(pr, x, gx, &xd));
    TRY(put(pr, dy, gy, &dyd));
    TRY(put_f32(pr, w, (size_t)m * k, &w32));
    TRY(put_f32(pr, b, m, &bd));
    TRY(probe_alloc(pr, &wd, (size_t)m * k * dtype_size(pr->dt)));
    TRY(cuda_cast(w32, wd, pr->dt, (size_t)m * k, 0));
    TRY(alloc_like(pr, gy, &yd));
    TRY(alloc_like(pr, gx, &dxd));
    TRY(probe_alloc(pr, (void **)&dwd, (size_t)m * k * sizeof(float)));
    TRY(probe_alloc(pr, (void **)&dbd, m * sizeof(float)));
    CUBLAS_TRY(cublasCreate(&pr->blas));
    CUBLAS_TRY(cublasGemmEx(pr->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, wd, ct, k, xd, ct,
                            k, &zero, yd, ct, m, comp, CUBLAS_GEMM_DEFAULT));
    TRY(cuda_bias_add(yd, bd, pr->dt, n, m, 0));
    CUBLAS_TRY(cublasGemmEx(pr->blas, CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &one, wd, ct, k, dyd, ct,
                            m, &zero, dxd, ct, k, comp, CUBLAS_GEMM_DEFAULT));
    CUBLAS_TRY(cublasGemmEx(pr->blas, CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &one, xd, ct, k, dyd, ct,
                            m, &zero, dwd, CUDA_R_32F, k, comp, CUBLAS_GEMM_DEFAULT));
    TRY(cuda_bias_grad(dyd, dbd, false, pr->dt, n, m, 0));
    TRY(get(pr, yd, gy, y));
    TRY(get(pr, dxd, gx, dx));
    TRY(get_f32(dwd, (size_t)m * k, dw));
    return get_f32(dbd, m, db);
}

int layer_probe_linear(int n, int k, int m, CorePrecision p, const float *x, const float *w,
                       const float *b, const float *dy, float *y, float *dx, float *dw, float *db)
{
    Probe pr;
    memset(&pr, 0, sizeof pr);
    pr.dt = probe_dtype(p);
    int rc = run_linear(&pr, p, n, k, m, x, w, b, dy, y, dx, dw, db);
    probe_end(&pr);
    return rc;
}

static int run_softmax(Probe *pr, int n, int m, const float *z, const int32_t *labels,
                       float *loss, int *correct, float *dz)
{
    ChanGeom g = {n, m, 1, false};
    void *zd, *dzd;
    int32_t *ld;
    float *lossd, *sample_loss;
    int *cd;
    TRY(put(pr, z, g, &zd));
    TRY(alloc_like(pr, g, &dzd));
    TRY(probe_alloc(pr, (void **)&ld, n * sizeof(int32_t)));
    CUDA_TRY(cudaMemcpy(ld, labels, n * sizeof(int32_t), cudaMemcpyHostToDevice));
    TRY(probe_alloc(pr, (void **)&lossd, sizeof(float)));
    TRY(probe_alloc(pr, (void **)&sample_loss, (size_t)n * sizeof(float)));
    TRY(probe_alloc(pr, (void **)&cd, sizeof(int)));
    CUDA_TRY(cudaMemset(lossd, 0, sizeof(float)));
    CUDA_TRY(cudaMemset(cd, 0, sizeof(int)));
    TRY(cuda_softmax_ce(zd, pr->dt, ld, n, m, NULL, 1.0f, dzd, sample_loss, lossd, cd, 0));
    TRY(get(pr, dzd, g, dz));
    TRY(get_f32(lossd, 1, loss));
    CUDA_TRY(cudaMemcpy(correct, cd, sizeof(int), cudaMemcpyDeviceToHost));
    return 0;
}

int layer_probe_softmax_ce(int n, int m, CorePrecision p, const float *z, const int32_t *labels,
                           float *loss, int *correct, float *dz)
{
    Probe pr;
    memset(&pr, 0, sizeof pr);
    pr.dt = probe_dtype(p);
    int rc = run_softmax(&pr, n, m, z, labels, loss, correct, dz);
    probe_end(&pr);
    return rc;
}
