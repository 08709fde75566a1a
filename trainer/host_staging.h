// Host staging of collectives: a ShardComm that takes host memory only (ShardComm::
// TakesDeviceMemory() false) cannot be handed device buffers, so device tensors are copied to a
// host buffer, exchanged there and copied back. One decision and one kind of buffer for every
// caller (GradReducer's gradient buckets, KdStep's all-gathers and scalar all-reduce).
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "trainer/shard_comm.h"

namespace retort::trainer {

// Whether collectives over `buffer` (a tensor of the flat buffers) go through host memory:
// when `requested` (tests force the staging path on the CPU), or when `buffer` lives on a device
// and `comm` takes host memory only.
bool NeedsHostStaging(const torch::Tensor& buffer, const ShardComm& comm, bool requested);

// A float32 host buffer of `numel` elements for staging copies of `buffer`: pinned when `buffer`
// is on a device, so the copies can run asynchronously on its stream.
torch::Tensor HostStagingBuffer(int64_t numel, const torch::Tensor& buffer);

}  // namespace retort::trainer
