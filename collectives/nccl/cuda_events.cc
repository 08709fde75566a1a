#include "collectives/nccl/cuda_events.h"

#include "collectives/nccl/nccl_check.h"

namespace retort::collectives::nccl {

std::shared_ptr<CudaEventPool> MakeCudaEventPool(int device) {
  return CudaEventPool::Create([device]() -> StatusOr<CudaEvent> {
    CUDA_CHECK(cudaSetDevice(device), "cuda event: selecting device " + std::to_string(device));
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cuda event: creating");
    return CudaEvent(e);
  });
}

StatusOr<std::shared_ptr<CudaReadyEvent>> CudaReadyEvent::Create(CudaEventPool& pool,
                                                                 uint64_t serial) {
  RETORT_ASSIGN_OR_RETURN(std::shared_ptr<CudaEvent> event, pool.Acquire());
  return std::shared_ptr<CudaReadyEvent>(new CudaReadyEvent(std::move(event), serial));
}

StatusOr<ReadyEventPtr> RecordEvent(int device, CudaEventPool& pool, cudaStream_t stream,
                                    uint64_t serial) {
  CUDA_CHECK(cudaSetDevice(device), "cuda event: selecting device " + std::to_string(device));
  RETORT_ASSIGN_OR_RETURN(auto event, CudaReadyEvent::Create(pool, serial));
  CUDA_CHECK(cudaEventRecord(event->get(), stream), "cuda event: recording on a stream");
  return ReadyEventPtr(std::move(event));
}

StatusOr<ReadyEventPtr> CudaStreamEvents::RecordReady() {
  return RecordEvent(device_, *pool_, stream_, ++serial_);
}

Status CudaStreamEvents::StreamWait(const ReadyEvent& event) {
  CUDA_CHECK(cudaSetDevice(device_), "cuda events: selecting device " + std::to_string(device_));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(event.native()), 0),
             "cuda events: making the stream wait for event " + std::to_string(event.serial()));
  return Status::Ok();
}

std::string CudaStreamEvents::name() const {
  return "cuda:" + std::to_string(device_) +
         (stream_ == nullptr ? " legacy default stream" : " stream");
}

}  // namespace retort::collectives::nccl
