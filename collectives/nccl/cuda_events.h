// The CUDA side of ready_event.h: CudaReadyEvent (a cudaEvent_t without timing, destroyed with
// the last owner) and CudaStreamEvents (the DeviceEvents of one stream of one device).
// Threading: as ready_event.h; every entry point selects the device first (the calling thread,
// a backward hook on the autograd device thread or an executor, may have another current).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <string>

#include "collectives/nccl/nccl_handles.h"
#include "collectives/ready_event.h"

namespace retort::collectives::nccl {

class CudaReadyEvent final : public ReadyEvent {
 public:
  // A new event of `device` (not recorded yet).
  static StatusOr<std::shared_ptr<CudaReadyEvent>> Create(int device, uint64_t serial);
  void* native() const override { return event_.get(); }
  uint64_t serial() const override { return serial_; }
  cudaEvent_t get() const { return event_.get(); }

 private:
  CudaReadyEvent(CudaEvent event, uint64_t serial) : event_(std::move(event)), serial_(serial) {}
  CudaEvent event_;
  const uint64_t serial_;
};

// Records on and waits into `stream` of `device` (nullptr: the legacy default stream, which
// is LibTorch's default current stream).
class CudaStreamEvents final : public DeviceEvents {
 public:
  CudaStreamEvents(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  StatusOr<ReadyEventPtr> RecordReady() override;
  Status StreamWait(const ReadyEvent& event) override;
  std::string name() const override;

 private:
  const int device_;
  const cudaStream_t stream_;
  std::atomic<uint64_t> serial_{0};
};

// Records a new event of `device` on `stream`: what a backend attaches to a Work as its done
// event (Work::SetDoneEvent) after its last kernel.
StatusOr<ReadyEventPtr> RecordEvent(int device, cudaStream_t stream, uint64_t serial);

}  // namespace retort::collectives::nccl
