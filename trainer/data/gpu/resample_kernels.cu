#include "trainer/data/gpu/resample_kernels.h"

namespace retort::trainer::data::gpu {
namespace {

// One thread per (source row, output column): the horizontal taps, mirrored when flipping.
__global__ void HorizontalPass(ResampleLaunch l) {
  const int rows = l.row_end - l.row_begin;
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<long long>(rows) * l.out_size) return;
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

// One thread per output pixel: the vertical taps, normalisation, CHW.
__global__ void VerticalPass(ResampleLaunch l) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long plane = static_cast<long long>(l.out_size) * l.out_size;
  if (i >= plane) return;
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

constexpr int kThreads = 256;

int Blocks(long long n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

}  // namespace

cudaError_t LaunchCropResizeNormalize(const ResampleLaunch& l, cudaStream_t stream) {
  const long long horizontal = static_cast<long long>(l.row_end - l.row_begin) * l.out_size;
  if (horizontal > 0) HorizontalPass<<<Blocks(horizontal), kThreads, 0, stream>>>(l);
  const long long vertical = static_cast<long long>(l.out_size) * l.out_size;
  if (vertical > 0) VerticalPass<<<Blocks(vertical), kThreads, 0, stream>>>(l);
  return cudaGetLastError();
}

}  // namespace retort::trainer::data::gpu
