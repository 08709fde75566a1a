// CUDA kernels of the GPU decode path: the CPU path's crop-resize-flip-normalise
// (image_transforms.h CropResizeNormalize) on an interleaved 8-bit RGB image in device memory,
// with the resampling taps computed on the host by the same ResampleTaps. Two passes like the
// CPU path: horizontal into a float scratch buffer, then vertical with normalisation and the
// HWC -> CHW layout change.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace retort::trainer::data::gpu {

struct ResampleLaunch {
  const uint8_t* image = nullptr;  // device, interleaved RGB, `pitch` bytes per row
  int pitch = 0;
  int row_begin = 0;  // source rows [row_begin, row_end) the vertical taps read
  int row_end = 0;
  int out_size = 0;  // out_size x out_size outputs
  // Device copies of ResampleAxis (x, then y): start, count, weights with max_taps per output.
  const int* x_start = nullptr;
  const int* x_count = nullptr;
  const float* x_weights = nullptr;
  int x_max_taps = 0;
  const int* y_start = nullptr;
  const int* y_count = nullptr;
  const float* y_weights = nullptr;
  int y_max_taps = 0;
  bool flip = false;
  float scale[3] = {1, 1, 1};  // out = acc * scale + shift, per channel
  float shift[3] = {0, 0, 0};
  float* scratch = nullptr;  // device, (row_end - row_begin) x out_size x 3 floats
  float* out = nullptr;      // device, 3 x out_size x out_size floats
};

// Enqueues both passes on `stream`.
cudaError_t LaunchCropResizeNormalize(const ResampleLaunch& l, cudaStream_t stream);

}  // namespace retort::trainer::data::gpu
