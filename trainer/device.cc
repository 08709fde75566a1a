#include "trainer/device.h"

#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <exception>

// Only where the build links the CUDA runtime (trainer/CMakeLists.txt defines it): the header
// alone is also found in a CUDA LibTorch built with RETORT_WITH_CUDA=OFF, which links no cudart.
#ifdef RETORT_LINKS_CUDART
#include <cuda_runtime_api.h>
#define RETORT_DEVICE_HAS_CUDART 1
#endif

namespace retort::trainer {
namespace {

class CudaRuntime final : public DeviceSelector {
 public:
  Status Select(int index) override {
    const int visible = VisibleCudaDevices();
    if (visible == 0)
      return FailedPreconditionError("selecting cuda:" + std::to_string(index) +
                                     ": no CUDA device is visible");
    if (index < 0 || index >= visible)
      return FailedPreconditionError("selecting cuda:" + std::to_string(index) + ": only " +
                                     std::to_string(visible) + " CUDA device(s) visible");
    try {
      // The device guard's implementation sets the runtime's current device (cudaSetDevice)
      // without this file naming CUDA, so it builds against a CPU-only LibTorch too.
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)
          ->setDevice(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index)));
    } catch (const std::exception& e) {
      return FailedPreconditionError("selecting cuda:" + std::to_string(index) + ": " + e.what());
    }
    return Status::Ok();
  }
};

}  // namespace

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

DeviceSelector& CudaRuntimeSelector() {
  static CudaRuntime* const runtime = new CudaRuntime();  // stateless; never destroyed
  return *runtime;
}

Status SelectThreadDevice(int index, DeviceSelector* selector, const std::string& who) {
  if (index < 0) return Status::Ok();
  Status s = (selector != nullptr ? selector : &CudaRuntimeSelector())->Select(index);
  if (!s.ok()) return s.WithContext(who);
  return Status::Ok();
}

}  // namespace retort::trainer
