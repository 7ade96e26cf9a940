// amp_peak.h: a GPU's dense peak FLOP rate per math type, from its SM count, its SM
// clock and a small per-architecture table of FLOPs per clock per SM (amp_peak.c cites
// where each entry comes from).
#ifndef AMP_PEAK_H
#define AMP_PEAK_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    AMP_MATH_FP32,  // FMA on the CUDA cores (strict fp32)
    AMP_MATH_TF32,  // tensor cores, tf32 inputs, fp32 accumulate
    AMP_MATH_FP16,  // tensor cores, fp16 inputs, fp32 accumulate
    AMP_MATH_BF16,  // tensor cores, bf16 inputs, fp32 accumulate
    AMP_MATH_COUNT
} AmpMath;

// Dense FLOPs per clock per SM (an FMA counts 2) of compute capability major.minor for
// `math`; 0 when the table has no entry (an architecture it does not know, or a type the
// architecture lacks, e.g. bf16 before sm_80).
double amp_peak_flops_per_clock_sm(int major, int minor, AmpMath math);
// sms x clock x the table: FLOP/s; 0 when the table has no entry.
double amp_peak_flops(int major, int minor, int sms, double clock_hz, AmpMath math);
// "fp32", "tf32", "fp16", "bf16".
const char *amp_math_name(AmpMath math);

#ifdef __cplusplus
}
#endif
#endif
