#include "trainer/data/gpu/resample_kernels.h"

namespace retort::trainer::data::gpu {
namespace {

// One thread per (source row, output column).
__global__ void HorizontalPass(ResampleLaunch l) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < HorizontalPassSize(l)) HorizontalPassAt(l, i);
}

// One thread per output pixel.
__global__ void VerticalPass(ResampleLaunch l) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < VerticalPassSize(l)) VerticalPassAt(l, i);
}

constexpr int kThreads = 256;

int Blocks(long long n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

}  // namespace

cudaError_t LaunchCropResizeNormalize(const ResampleLaunch& l, cudaStream_t stream) {
  // Clear an error an earlier call on this thread left, so the one returned is these launches'.
  (void)cudaGetLastError();
  const long long horizontal = HorizontalPassSize(l);
  if (horizontal > 0) HorizontalPass<<<Blocks(horizontal), kThreads, 0, stream>>>(l);
  const long long vertical = VerticalPassSize(l);
  if (vertical > 0) VerticalPass<<<Blocks(vertical), kThreads, 0, stream>>>(l);
  return cudaGetLastError();
}

}  // namespace retort::trainer::data::gpu
