#include "trainer/device.h"

#include <torch/cuda.h>

// Only where the build links the CUDA runtime (trainer/CMakeLists.txt defines it): the header
// alone is also found in a CUDA LibTorch built with RETORT_WITH_CUDA=OFF, which links no cudart.
#ifdef RETORT_LINKS_CUDART
#include <cuda_runtime_api.h>
#define RETORT_DEVICE_HAS_CUDART 1
#endif

namespace retort::trainer {

int VisibleCudaDevices() { return static_cast<int>(torch::cuda::device_count()); }

std::string CudaDeviceName(int index) {
#ifdef RETORT_DEVICE_HAS_CUDART
  if (index < 0 || index >= VisibleCudaDevices()) return "";
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, index) != cudaSuccess) return "";
  return props.name;
#else
  (void)index;
  return "";
#endif
}

}  // namespace retort::trainer
