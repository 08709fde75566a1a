#include "trainer/device.h"

#include <torch/cuda.h>

// Only where the build links the CUDA runtime (trainer/CMakeLists.txt defines it): the header
// alone is also found in a CUDA LibTorch built with RETORT_WITH_CUDA=OFF, which links no cudart.
#ifdef RETORT_LINKS_CUDART
#include <cuda_runtime_api.h>
#define RETORT_DEVICE_HAS_CUDART 1
#endif

#include <algorithm>
#include <cctype>

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

int CudaIndex(const std::string& resolved_device) {
  if (resolved_device.rfind("cuda:", 0) != 0) return -1;
  try {
    return std::stoi(resolved_device.substr(5));
  } catch (...) {
    return -1;
  }
}

StatusOr<std::string> ResolveDevice(const std::string& spec, int local_rank,
                                    int visible_cuda_devices) {
  if (spec == "cpu") return std::string("cpu");
  if (spec == "auto" || spec.empty()) {
    if (visible_cuda_devices == 0) return std::string("cpu");
    return ResolveDevice("cuda", local_rank, visible_cuda_devices);
  }
  int index = local_rank;
  if (spec != "cuda") {
    const std::string prefix = "cuda:";
    const std::string digits = spec.rfind(prefix, 0) == 0 ? spec.substr(prefix.size()) : "";
    if (digits.empty() || digits.size() > 4 ||
        !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
      return InvalidArgumentError("device '" + spec + "' is not auto, cpu, cuda or cuda:N");
    index = std::stoi(digits);
  }
  const std::string name = "cuda:" + std::to_string(index);
  if (visible_cuda_devices == 0)
    return FailedPreconditionError("device " + name + " was asked for (--device " + spec +
                                   ") but no CUDA device is visible to this process "
                                   "(CUDA_VISIBLE_DEVICES, driver, or a CPU-only build?)");
  if (index >= visible_cuda_devices)
    return FailedPreconditionError(
        "device " + name + " does not exist: " + std::to_string(visible_cuda_devices) +
        " CUDA device(s) are visible (cuda:0 to cuda:" + std::to_string(visible_cuda_devices - 1) +
        ")");
  return name;
}

}  // namespace retort::trainer
