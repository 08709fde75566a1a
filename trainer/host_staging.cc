#include "trainer/host_staging.h"

#include <torch/torch.h>

namespace retort::trainer {

bool NeedsHostStaging(const torch::Tensor& buffer, const ShardComm& comm, bool requested) {
  return requested || (!buffer.is_cpu() && !comm.TakesDeviceMemory());
}

torch::Tensor HostStagingBuffer(int64_t numel, const torch::Tensor& buffer) {
  return torch::zeros({numel},
                      torch::TensorOptions().dtype(torch::kFloat).pinned_memory(!buffer.is_cpu()));
}

}  // namespace retort::trainer
