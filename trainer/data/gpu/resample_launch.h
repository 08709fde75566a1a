// The GPU decoder's crop-resize-flip-normalise, apart from CUDA: what one image's launch
// carries (ResampleLaunch), how it is set up from the CPU path's plan (MakeResampleLaunch), and
// what each GPU thread computes (HorizontalPassAt, VerticalPassAt). The kernels
// (resample_kernels.cu) run these per thread; RunResampleOnHost runs the same functions over
// every index on the CPU, so the arithmetic and indexing are tested without a GPU against the
// CPU path (image_transforms.h CropResizeNormalize). Compiles with and without nvcc.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define RETORT_HOST_DEVICE __host__ __device__
#else
#define RETORT_HOST_DEVICE
#endif

namespace retort::trainer::data {
struct Normalization;
struct ResamplePlan;
}  // namespace retort::trainer::data

namespace retort::trainer::data::gpu {

struct ResampleLaunch {
  const uint8_t* image = nullptr;  // interleaved RGB, `pitch` bytes per row
  int pitch = 0;
  int row_begin = 0;  // source rows [row_begin, row_end) the vertical taps read
  int row_end = 0;
  int out_size = 0;  // out_size x out_size outputs
  // Copies of ResampleAxis (x, then y): start, count, weights with max_taps per output.
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
  float* scratch = nullptr;  // (row_end - row_begin) x out_size x 3 floats
  float* out = nullptr;      // 3 x out_size x out_size floats
};

// The launch for `plan` (PlanResample of a width-pixel-wide RGB image to out_size x out_size)
// with `flip` and `norm`; every pointer is left null for the caller to set.
ResampleLaunch MakeResampleLaunch(const ResamplePlan& plan, int width, bool flip,
                                  const Normalization& norm);

// Index counts of the two passes: one index per (source row, output column), then one per
// output pixel.
RETORT_HOST_DEVICE inline long long HorizontalPassSize(const ResampleLaunch& l) {
  return static_cast<long long>(l.row_end - l.row_begin) * l.out_size;
}
RETORT_HOST_DEVICE inline long long VerticalPassSize(const ResampleLaunch& l) {
  return static_cast<long long>(l.out_size) * l.out_size;
}
// Floats the scratch buffer needs (at least one row's, so it is never empty).
inline long long ScratchFloats(const ResampleLaunch& l) {
  const int rows = l.row_end - l.row_begin;
  return static_cast<long long>(rows > 1 ? rows : 1) * l.out_size * 3;
}

// Index i of the horizontal pass (i < HorizontalPassSize): the horizontal taps of one source
// row for one output column, mirrored when flipping, into scratch.
RETORT_HOST_DEVICE inline void HorizontalPassAt(const ResampleLaunch& l, long long i) {
  const int r = static_cast<int>(i / l.out_size);
  const int ox = static_cast<int>(i % l.out_size);
  const int t = l.flip ? l.out_size - 1 - ox : ox;
  const uint8_t* row = l.image + static_cast<long long>(l.row_begin + r) * l.pitch;
  const float* w = l.x_weights + static_cast<long long>(t) * l.x_max_taps;
  const uint8_t* p = row + static_cast<long long>(l.x_start[t]) * 3;
  float acc0 = 0.f, acc1 = 0.f, acc2 = 0.f;
  for (int k = 0; k < l.x_count[t]; ++k) {
    acc0 += w[k] * p[3 * k];
    acc1 += w[k] * p[3 * k + 1];
    acc2 += w[k] * p[3 * k + 2];
  }
  float* dst = l.scratch + (static_cast<long long>(r) * l.out_size + ox) * 3;
  dst[0] = acc0;
  dst[1] = acc1;
  dst[2] = acc2;
}

// Index i of the vertical pass (i < VerticalPassSize): one output pixel's vertical taps over
// scratch, normalised, written channel-planar (CHW).
RETORT_HOST_DEVICE inline void VerticalPassAt(const ResampleLaunch& l, long long i) {
  const long long plane = VerticalPassSize(l);
  const int oy = static_cast<int>(i / l.out_size);
  const int ox = static_cast<int>(i % l.out_size);
  const float* w = l.y_weights + static_cast<long long>(oy) * l.y_max_taps;
  const long long row_floats = static_cast<long long>(l.out_size) * 3;
  const float* base = l.scratch + (l.y_start[oy] - l.row_begin) * row_floats + ox * 3;
  float acc0 = 0.f, acc1 = 0.f, acc2 = 0.f;
  for (int k = 0; k < l.y_count[oy]; ++k) {
    const float* p = base + k * row_floats;
    acc0 += w[k] * p[0];
    acc1 += w[k] * p[1];
    acc2 += w[k] * p[2];
  }
  l.out[i] = acc0 * l.scale[0] + l.shift[0];
  l.out[plane + i] = acc1 * l.scale[1] + l.shift[1];
  l.out[2 * plane + i] = acc2 * l.scale[2] + l.shift[2];
}

// Both passes over every index on the calling thread, in the kernels' order; every pointer
// of `l` in host memory.
void RunResampleOnHost(const ResampleLaunch& l);

}  // namespace retort::trainer::data::gpu
