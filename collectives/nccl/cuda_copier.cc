#include "collectives/nccl/cuda_copier.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "collectives/nccl/nccl_check.h"
#include "collectives/nccl/nccl_communicator.h"

namespace retort::collectives::nccl {
namespace {

// `bytes` from `src` to `dst` on `stream` of `device`, selected first (the calling thread may
// have another device current). `who` names the component and `what` the copy in an error.
Status CopyOnStream(const char* who, int device, cudaStream_t stream, void* dst, const void* src,
                    size_t bytes, cudaMemcpyKind kind, const char* what) {
  CUDA_CHECK(cudaSetDevice(device),
             std::string(who) + ": selecting device " + std::to_string(device));
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream),
             std::string(who) + ": copying " + std::to_string(bytes) + " bytes " + what);
  return Status::Ok();
}

// Polls `event` until it has completed (OK), reports a failure (INTERNAL), `cancelled` says so
// (ABORTED) or `deadline` passes (DEADLINE_EXCEEDED). `who` names the component and `copies`
// the work the event marks the end of, in errors.
Status PollEvent(cudaEvent_t event, Deadline deadline, const std::function<bool()>& cancelled,
                 const std::string& who, const std::string& copies) {
  for (;;) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return Status::Ok();
    if (state != cudaErrorNotReady)
      return CudaError(state, who + ": " + copies + " failed", __FILE__, __LINE__);
    if (cancelled && cancelled()) return AbortedError(who + ": wait for copies aborted");
    if (deadline.Expired())
      return DeadlineExceededError(who + ": " + copies + " did not finish in time");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace

StatusOr<std::unique_ptr<CudaCopier>> CudaCopier::Create(int device, cudaStream_t caller_stream) {
  if (CudaDeviceCount() == 0) return FailedPreconditionError("cuda copier: no CUDA device visible");
  std::unique_ptr<CudaCopier> c(new CudaCopier(device, caller_stream));
  CUDA_CHECK(cudaSetDevice(device), "cuda copier: selecting device " + std::to_string(device));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
             "cuda copier: creating its stream");
  c->stream_ = CudaStream(stream);
  cudaEvent_t event = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
             "cuda copier: creating an event");
  c->caller_ready_ = CudaEvent(event);
  return c;
}

StatusOr<std::shared_ptr<char>> CudaCopier::AllocateStaging(size_t bytes) {
  CUDA_CHECK(cudaSetDevice(device_), "cuda copier: selecting device " + std::to_string(device_));
  void* p = nullptr;
  CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
             "cuda copier: pinning " + std::to_string(bytes) + " bytes of staging memory");
  return std::shared_ptr<char>(static_cast<char*>(p), [](char* q) { cudaFreeHost(q); });
}

// Every entry point selects the copier's device first: the executor threads that call them
// start on device 0, and an event or copy on another device's stream fails or orders nothing.
Status CudaCopier::OrderAfter(const ReadyEvent* ready) {
  CUDA_CHECK(cudaSetDevice(device_), "cuda copier: selecting device " + std::to_string(device_));
  if (ready != nullptr) {
    CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), static_cast<cudaEvent_t>(ready->native()), 0),
               "cuda copier: ordering copies after the caller's ready event");
    return Status::Ok();
  }
  CUDA_CHECK(cudaEventRecord(caller_ready_.get(), caller_),
             "cuda copier: recording the caller's stream");
  CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), caller_ready_.get(), 0),
             "cuda copier: ordering copies after the caller's stream");
  return Status::Ok();
}

Status CudaCopier::CopyToHost(void* host, const void* device, size_t bytes) {
  return CopyOnStream("cuda copier", device_, stream_.get(), host, device, bytes,
                      cudaMemcpyDeviceToHost, "to host staging");
}

Status CudaCopier::CopyToDevice(void* device, const void* host, size_t bytes) {
  return CopyOnStream("cuda copier", device_, stream_.get(), device, host, bytes,
                      cudaMemcpyHostToDevice, "to the device");
}

StatusOr<DeviceCopier::Mark> CudaCopier::MarkIssued() {
  CUDA_CHECK(cudaSetDevice(device_), "cuda copier: selecting device " + std::to_string(device_));
  CudaEvent event;
  if (!spare_.empty()) {
    event = std::move(spare_.back());
    spare_.pop_back();
  } else {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
               "cuda copier: creating an event");
    event = CudaEvent(e);
  }
  CUDA_CHECK(cudaEventRecord(event.get(), stream_.get()), "cuda copier: recording a mark");
  recorded_.push_back(Recorded{++issued_, std::move(event)});
  return issued_;
}

Status CudaCopier::Wait(Mark mark, Deadline deadline, const std::function<bool()>& cancelled) {
  // Wait may run on a thread that issued nothing (a progress thread): select the device before
  // its first CUDA call, so that thread makes no context on device 0.
  CUDA_CHECK(cudaSetDevice(device_), "cuda copier: selecting device " + std::to_string(device_));
  while (!recorded_.empty() && recorded_.front().mark <= mark) {
    Recorded& r = recorded_.front();
    RETORT_RETURN_IF_ERROR(
        PollEvent(r.event.get(), deadline, cancelled, "cuda copier", "staging copies"));
    spare_.push_back(std::move(r.event));
    recorded_.pop_front();
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<CudaScratch>> CudaScratch::Create(int device) {
  if (CudaDeviceCount() == 0)
    return FailedPreconditionError("cuda scratch: no CUDA device visible");
  std::unique_ptr<CudaScratch> c(new CudaScratch(device));
  CUDA_CHECK(cudaSetDevice(device), "cuda scratch: selecting device " + std::to_string(device));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
             "cuda scratch: creating its stream");
  c->stream_ = CudaStream(stream);
  for (CudaEvent* owned : {&c->caller_ready_, &c->copied_}) {
    cudaEvent_t event = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
               "cuda scratch: creating an event");
    *owned = CudaEvent(event);
  }
  return c;
}

StatusOr<std::shared_ptr<char>> CudaScratch::Allocate(size_t bytes) {
  CUDA_CHECK(cudaSetDevice(device_), "cuda scratch: selecting device " + std::to_string(device_));
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1)),
             "cuda scratch: allocating " + std::to_string(bytes) + " bytes");
  return std::shared_ptr<char>(static_cast<char*>(p), [](char* q) { cudaFree(q); });
}

Status CudaScratch::OrderAfter(const ReadyEvent* ready) {
  CUDA_CHECK(cudaSetDevice(device_), "cuda scratch: selecting device " + std::to_string(device_));
  cudaEvent_t after = ready != nullptr ? static_cast<cudaEvent_t>(ready->native()) : nullptr;
  if (after == nullptr) {
    CUDA_CHECK(cudaEventRecord(caller_ready_.get(), cudaStreamLegacy),
               "cuda scratch: recording the caller's stream");
    after = caller_ready_.get();
  }
  CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), after, 0),
             "cuda scratch: ordering copies after the caller");
  return Status::Ok();
}

Status CudaScratch::CopyAsync(void* dst, const void* src, size_t bytes) {
  return CopyOnStream("cuda scratch", device_, stream_.get(), dst, src, bytes,
                      cudaMemcpyDeviceToDevice, "on the device");
}

Status CudaScratch::Wait(Deadline deadline, const std::function<bool()>& cancelled) {
  CUDA_CHECK(cudaSetDevice(device_), "cuda scratch: selecting device " + std::to_string(device_));
  CUDA_CHECK(cudaEventRecord(copied_.get(), stream_.get()), "cuda scratch: recording the copies");
  return PollEvent(copied_.get(), deadline, cancelled, "cuda scratch", "device copies");
}

}  // namespace retort::collectives::nccl
