// noisy_batches.h: the on_device practice's batches for the practice driver: one
// synthetic batch kept on the device, plus fresh Gaussian noise of the batch's size in
// every step (noise augmentation, x + 0.1 * randn_like(x)), the noise built either on
// the host and copied (torch.randn(shape).cuda()) or on the device
// (torch.randn(shape, device='cuda')). Everything else is the same: the same add kernel
// on the same side stream, synchronized before the step.
#ifndef NOISY_BATCHES_H
#define NOISY_BATCHES_H

#include "bench/driver/practice.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NOISY_BATCHES_STD 0.1f // the noise's standard deviation

// The practice's PracticeSource (one run at a time); a variant's source_arg is a
// `const TensorBuild *` (bench/on_device/on_device.h): BUILT_HOST_PAGEABLE or BUILT_DEVICE.
// Reports build_ms_per_step (building the noise and adding it, until it is on the
// device) and checks the last noise tensor (noise_mean, noise_std, noise_wrong: a run
// whose noise is not standard normal within the stated tolerance fails).
const PracticeSource *noisy_batches_source(void);

#ifdef __cplusplus
}
#endif
#endif
