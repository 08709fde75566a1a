// CudaCopier: the DeviceCopier (collectives/device_copier.h) of one CUDA device. Copies run on
// a non-blocking stream of their own, in issue order; staging memory is pinned
// (cudaHostAlloc), so device-to-host and host-to-device copies are asynchronous and overlap
// the wire. Marks are CUDA events recorded on that stream; Wait polls them (cudaEventQuery),
// never a blocking synchronize, so deadlines and aborts end it.
// Threading: one thread issues and waits (the staging adapter's executor).
#pragma once

#include <cuda_runtime_api.h>

#include <deque>
#include <memory>
#include <vector>

#include "collectives/device_copier.h"
#include "collectives/nccl/nccl_handles.h"

namespace retort::collectives::nccl {

class CudaCopier final : public DeviceCopier {
 public:
  // Copies for `device`, ordered after the operation's ready event, or without one after
  // `caller_stream` (nullptr: the legacy default stream) at every OrderAfter().
  // FAILED_PRECONDITION when no CUDA device is visible.
  static StatusOr<std::unique_ptr<CudaCopier>> Create(int device, cudaStream_t caller_stream);

  MemoryKind device_kind() const override { return MemoryKind::kCudaDevice; }
  MemoryKind staging_kind() const override { return MemoryKind::kPinnedHost; }
  StatusOr<std::shared_ptr<char>> AllocateStaging(size_t bytes) override;
  Status OrderAfter(const ReadyEvent* ready) override;
  Status CopyToHost(void* host, const void* device, size_t bytes) override;
  Status CopyToDevice(void* device, const void* host, size_t bytes) override;
  StatusOr<Mark> MarkIssued() override;
  Status Wait(Mark mark, Deadline deadline, const std::function<bool()>& cancelled) override;

 private:
  CudaCopier(int device, cudaStream_t caller_stream) : device_(device), caller_(caller_stream) {}
  struct Recorded {
    Mark mark = 0;
    CudaEvent event;
  };
  const int device_;
  const cudaStream_t caller_;
  CudaStream stream_;
  CudaEvent caller_ready_;
  Mark issued_ = 0;
  std::deque<Recorded> recorded_;  // marks not yet waited for, in order
  std::vector<CudaEvent> spare_;   // events to record again
};

// DeviceScratch of one CUDA device: cudaMalloc'd memory; copies on a non-blocking stream of
// its own, ordered after the operation's ready event (or the legacy default stream as it is at
// OrderAfter), waited for by polling one event recorded after the last copy (never a
// cudaStreamSynchronize of the legacy stream, which would also wait for the caller's later
// kernels there).
class CudaScratch final : public DeviceScratch {
 public:
  // FAILED_PRECONDITION when no CUDA device is visible.
  static StatusOr<std::unique_ptr<CudaScratch>> Create(int device);
  MemoryKind kind() const override { return MemoryKind::kCudaDevice; }
  StatusOr<std::shared_ptr<char>> Allocate(size_t bytes) override;
  Status OrderAfter(const ReadyEvent* ready) override;
  Status CopyAsync(void* dst, const void* src, size_t bytes) override;
  Status Wait(Deadline deadline, const std::function<bool()>& cancelled) override;

 private:
  explicit CudaScratch(int device) : device_(device) {}
  const int device_;
  CudaStream stream_;
  CudaEvent caller_ready_;  // recorded on the legacy stream when no ready event is given
  CudaEvent copied_;        // recorded after the last copy by Wait
};

}  // namespace retort::collectives::nccl
