// The CUDA pieces of the data plane behind a header without CUDA in it, so that the worker
// builds and links the same way with or without CUDA: in a build without CUDA and NCCL each
// factory returns FAILED_PRECONDITION saying so.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "collectives/bootstrap_store.h"
#include "collectives/communicator.h"
#include "collectives/device_copier.h"
#include "collectives/ready_event.h"

namespace retort::collectives {

// Whether this build holds NCCL and the CUDA copier.
bool BuildHasCudaDataPlane();

struct CudaCommunicatorOptions {
  int device = 0;          // CUDA device index of this rank
  std::string key_prefix;  // empty: "g<generation>/nccl"
  std::chrono::milliseconds default_timeout{30000};
  std::chrono::milliseconds bootstrap_timeout{60000};
  std::function<bool()> cancelled;  // empty: never; see NcclCommunicatorOptions
};

// NCCL among `size` ranks (the GPUs of one node), ordered after the legacy default stream.
StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    BootstrapStore* store, int rank, int size, uint64_t generation,
    const CudaCommunicatorOptions& options);
// Staging copies for `device` (nccl/cuda_copier.h), ordered after the legacy default stream.
StatusOr<std::unique_ptr<DeviceCopier>> CreateCudaCopier(int device);
// Device scratch memory of `device` (nccl/cuda_copier.h).
StatusOr<std::unique_ptr<DeviceScratch>> CreateCudaScratch(int device);
// Ready events on, and device-side waits into, the legacy default stream of `device` (the
// trainer's stream: LibTorch's default current stream), nccl/cuda_events.h.
StatusOr<std::unique_ptr<DeviceEvents>> CreateCudaStreamEvents(int device);

}  // namespace retort::collectives
