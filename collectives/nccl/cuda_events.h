// The CUDA side of ready_event.h: CudaReadyEvent (a cudaEvent_t without timing, destroyed with
// the last owner) and CudaStreamEvents (the DeviceEvents of one stream of one device).
// Threading: as ready_event.h; every entry point selects the device first (the calling thread,
// a backward hook on the autograd device thread or an executor, may have another current).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <string>

#include "collectives/handle_pool.h"
#include "collectives/nccl/nccl_handles.h"
#include "collectives/ready_event.h"

namespace retort::collectives::nccl {

// Reusable events (without timing) of one device (handle_pool.h): one cudaEventCreate per event
// alive at a time, not per operation. Re-recording an event a stream was made to wait for is
// safe: the wait was bound to the record before it.
using CudaEventPool = HandlePool<CudaEvent>;
std::shared_ptr<CudaEventPool> MakeCudaEventPool(int device);

class CudaReadyEvent final : public ReadyEvent {
 public:
  // An event of `pool` (not recorded yet), given back to it with the last owner.
  static StatusOr<std::shared_ptr<CudaReadyEvent>> Create(CudaEventPool& pool, uint64_t serial);
  void* native() const override { return event_->get(); }
  uint64_t serial() const override { return serial_; }
  cudaEvent_t get() const { return event_->get(); }

 private:
  CudaReadyEvent(std::shared_ptr<CudaEvent> event, uint64_t serial)
      : event_(std::move(event)), serial_(serial) {}
  std::shared_ptr<CudaEvent> event_;
  const uint64_t serial_;
};

// Records on and waits into `stream` of `device` (nullptr: the legacy default stream, which
// is LibTorch's default current stream).
class CudaStreamEvents final : public DeviceEvents {
 public:
  CudaStreamEvents(int device, cudaStream_t stream)
      : device_(device), stream_(stream), pool_(MakeCudaEventPool(device)) {}
  StatusOr<ReadyEventPtr> RecordReady() override;
  Status StreamWait(const ReadyEvent& event) override;
  std::string name() const override;

 private:
  const int device_;
  const cudaStream_t stream_;
  const std::shared_ptr<CudaEventPool> pool_;
  std::atomic<uint64_t> serial_{0};
};

// Records an event of `pool` (of `device`) on `stream`: what a backend attaches to a Work as
// its done event (Work::SetDoneEvent) after its last kernel.
StatusOr<ReadyEventPtr> RecordEvent(int device, CudaEventPool& pool, cudaStream_t stream,
                                    uint64_t serial);

}  // namespace retort::collectives::nccl
