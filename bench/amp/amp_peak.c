// amp_peak.c: dense FLOPs per clock per SM by architecture (amp_peak.h).
//
// Sources (NVIDIA's architecture whitepapers; each entry is the per-SM figure, or the
// whitepaper's peak TFLOPS divided by SMs x boost clock, which gives the same number):
// - sm_70, Volta: "NVIDIA Tesla V100 GPU Architecture" (2017): 64 FP32 cores per SM
//   (128 FLOP/clk); 8 tensor cores per SM x 64 FP16 FMA/clk = 1024 FLOP/clk
//   (V100 SXM2: 125 TFLOPS = 80 SMs x 1530 MHz x 1024).
// - sm_75, Turing: "NVIDIA Turing GPU Architecture" (2018): 64 FP32 cores per SM;
//   8 tensor cores per SM, 1024 FP16 FLOP/clk with FP32 accumulate on Tesla T4
//   (65 TFLOPS = 40 SMs x 1590 MHz x 1024).
// - sm_80, Ampere A100: "NVIDIA A100 Tensor Core GPU Architecture" (2020): 64 FP32 cores
//   per SM; 4 tensor cores per SM x 256 FP16 FMA/clk = 2048 FLOP/clk, BF16 the same,
//   TF32 half (A100: 312 / 156 TFLOPS dense = 108 SMs x 1410 MHz x 2048 / 1024).
// - sm_86, GA10x: "NVIDIA Ampere GA102 GPU Architecture" (2021): 128 FP32 cores per SM;
//   tensor cores 512 FP16 (and BF16) FLOP/clk with FP32 accumulate on GeForce parts
//   and 1024 on the professional ones (A40: 149.7 TFLOPS = 84 x 1740 MHz x 1024); the
//   table keeps the professional figure, so a GeForce GA10x reads about 50% of peak at best.
//   TF32 is half of FP16.
// - sm_89, Ada: "NVIDIA Ada GPU Architecture" (2022): 128 FP32 cores per SM; L40S-class
//   parts 1024 FP16/BF16 FLOP/clk dense with FP32 accumulate, TF32 512 (GeForce halves
//   the FP32-accumulate rate, as on GA10x).
// - sm_90, Hopper: "NVIDIA H100 Tensor Core GPU Architecture" (2022): 128 FP32 cores per
//   SM (256 FLOP/clk); the H100 SM's tensor cores do twice A100's per clock: 4096 dense
//   FP16/BF16 FLOP/clk, TF32 2048 (H100 SXM5: 989.4 TFLOPS dense FP16 = 132 SMs x
//   1830 MHz x 4096). H200 is the same GH100 die.
// Other architectures (sm_100 and later, sm_87 Orin...) are left out rather than guessed:
// their fraction of peak is not reported.
#include "bench/amp/amp_peak.h"

typedef struct PeakEntry {
    int major, minor;
    double per_sm[AMP_MATH_COUNT];  // fp32, tf32, fp16, bf16
} PeakEntry;

static const PeakEntry peak_table[] = {
    {7, 0, {128, 0, 1024, 0}},
    {7, 5, {128, 0, 1024, 0}},
    {8, 0, {128, 1024, 2048, 2048}},
    {8, 6, {256, 512, 1024, 1024}},
    {8, 9, {256, 512, 1024, 1024}},
    {9, 0, {256, 2048, 4096, 4096}},
};

double amp_peak_flops_per_clock_sm(int major, int minor, AmpMath math)
{
    if ((unsigned)math >= AMP_MATH_COUNT) return 0.0;
    for (unsigned i = 0; i < sizeof peak_table / sizeof peak_table[0]; i++)
        if (peak_table[i].major == major && peak_table[i].minor == minor) return peak_table[i].per_sm[math];
    return 0.0;
}

double amp_peak_flops(int major, int minor, int sms, double clock_hz, AmpMath math)
{
    return amp_peak_flops_per_clock_sm(major, minor, math) * sms * clock_hz;
}

const char *amp_math_name(AmpMath math)
{
    static const char *names[AMP_MATH_COUNT] = {"fp32", "tf32", "fp16", "bf16"};
    return (unsigned)math < AMP_MATH_COUNT ? names[math] : "?";
}
