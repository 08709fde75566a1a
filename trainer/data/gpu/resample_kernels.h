// CUDA kernels of the GPU decode path: the CPU path's crop-resize-flip-normalise
// (image_transforms.h CropResizeNormalize) on an interleaved 8-bit RGB image in device memory,
// with the resampling taps computed on the host by the same ResampleTaps. Two passes like the
// CPU path: horizontal into a float scratch buffer, then vertical with normalisation and the
// HWC -> CHW layout change. What each thread computes is resample_launch.h's, shared with a
// host run that the CPU tests check against the CPU path.
#pragma once

#include <cuda_runtime_api.h>

#include "trainer/data/gpu/resample_launch.h"

namespace retort::trainer::data::gpu {

// Enqueues both passes on `stream`; every pointer of `l` in device memory.
cudaError_t LaunchCropResizeNormalize(const ResampleLaunch& l, cudaStream_t stream);

}  // namespace retort::trainer::data::gpu
