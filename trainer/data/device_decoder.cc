// The nvJPEG factory in builds without nvJPEG (gpu/nvjpeg_decoder.cc replaces this file when
// the build has it).
#include "trainer/data/device_decoder.h"

#include <string>

namespace retort::trainer::data {

bool NvjpegDecoderBuilt() { return false; }

StatusOr<std::shared_ptr<const AllocationEvent>> RecordAllocationEvent(int device) {
  return FailedPreconditionError("a batch on cuda:" + std::to_string(device) +
                                 " needs the GPU decoder, which this build lacks");
}

StatusOr<std::unique_ptr<DeviceDecoder>> CreateNvjpegDecoder(int) {
  return FailedPreconditionError(
      "dataset.decode: gpu needs nvJPEG, which this build lacks (no CUDA toolkit or "
      "nvidia-nvjpeg wheel was found; scripts/setup installs the wheel)");
}

}  // namespace retort::trainer::data
