// Host-emulated run of kernels/cuda/conv_bias_cuda.cu (the convolution bias: forward add and the
// split, fixed-order gradient reduction) against sums computed here, every storage type and
// layout, shapes with one and several splits and a partial NHWC channel tile. Inputs are
// multiples of 1/32, so every sum is exact and the kernels must match bit for bit.
#include <stdio.h>
#include <math.h>
#include <vector>
#include "cuda_emul.h"
#include "kernels/conv_bias_cuda.cuh"
static unsigned long long rs = 88172645463325252ull;
static float rnd() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (float)((rs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f; }
static void put(void *p, size_t i, DType t, float v) {
    if (t == DT_F16) ((__half *)p)[i] = __float2half(v);
    else if (t == DT_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
    else ((float *)p)[i] = v;
}
static float get(const void *p, size_t i, DType t) {
    if (t == DT_F16) return __half2float(((const __half *)p)[i]);
    if (t == DT_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}
int fails = 0;
static void run(int n, int c, int hw, bool nhwc, DType dt) {
    ChanGeom g = {n, c, hw, nhwc};
    size_t cnt = (size_t)n * c * hw;
    std::vector<char> y(cnt * 4 + 64), dy(cnt * 4 + 64);
    std::vector<float> b(c), yref(cnt), db(c), dbref(c, 0.0f), acc0(c);
    for (int k = 0; k < c; k++) b[k] = roundf(rnd() * 32) / 32;
    for (int i = 0; i < n; i++) for (int k = 0; k < c; k++) for (int p = 0; p < hw; p++) {
        size_t at = nhwc ? ((size_t)i * hw + p) * c + k : ((size_t)i * c + k) * hw + p;
        float v = roundf(rnd() * 32) / 32, d = roundf(rnd() * 32) / 32;
        put(y.data(), at, dt, v); put(dy.data(), at, dt, d);
        yref[at] = get(y.data(), at, dt) + b[k];
        dbref[k] += get(dy.data(), at, dt);
    }
    cuda_conv_bias_add(y.data(), b.data(), dt, g, 0);
    double e = 0; for (size_t i = 0; i < cnt; i++) { double d = get(y.data(), i, dt) - yref[i]; e = fmax(e, fabs(d) / (fabs(yref[i]) + 1e-3)); }
    double tol = dt == DT_F32 ? 1e-6 : dt == DT_F16 ? 2e-3 : 1e-2;
    std::vector<float> scratch(cuda_conv_bias_scratch_floats(g) + 1);
    for (int k = 0; k < c; k++) acc0[k] = db[k] = k * 0.5f;
    cuda_conv_bias_grad(dy.data(), db.data(), true, dt, g, scratch.data(), 0);
    double eg = 0; for (int k = 0; k < c; k++) eg = fmax(eg, fabs(db[k] - acc0[k] - dbref[k]) / (fabs(dbref[k]) + 1));
    std::vector<float> db2(c, 7.0f);
    cuda_conv_bias_grad(dy.data(), db2.data(), false, dt, g, scratch.data(), 0);
    double eg2 = 0; for (int k = 0; k < c; k++) eg2 = fmax(eg2, fabs(db2[k] - dbref[k]) / (fabs(dbref[k]) + 1));
    bool bad = !(e <= tol) || !(eg <= 1e-5) || !(eg2 <= 1e-5);
    fails += bad;
    printf("%s n%d c%d hw%d %s %d: fwd %.2e grad(accum) %.2e grad %.2e splits-floats %zu\n", bad ? "FAIL" : "ok", n, c, hw, nhwc ? "nhwc" : "nchw", (int)dt, e, eg, eg2, scratch.size() - 1);
}
int main() {
    int shapes[][3] = {{3, 5, 700}, {2, 40, 49}, {2, 33, 1100}, {1, 3, 1}};
    for (auto &s : shapes) for (int nh = 0; nh < 2; nh++) for (int d = 0; d < 3; d++) run(s[0], s[1], s[2], nh, (DType)d);
    printf("%d failures\n", fails);
    return fails != 0;
}
