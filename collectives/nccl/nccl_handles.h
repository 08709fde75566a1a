// RAII owners of the CUDA and NCCL handles the NCCL communicator uses. Move-only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <utility>

namespace retort::collectives::nccl {

// A non-blocking CUDA stream, destroyed with the owner.
class CudaStream {
 public:
  CudaStream() = default;
  explicit CudaStream(cudaStream_t s) : stream_(s) {}
  CudaStream(CudaStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& o) noexcept {
    std::swap(stream_, o.stream_);
    return *this;
  }
  ~CudaStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A CUDA event without timing, destroyed with the owner.
class CudaEvent {
 public:
  CudaEvent() = default;
  explicit CudaEvent(cudaEvent_t e) : event_(e) {}
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept {
    std::swap(event_, o.event_);
    return *this;
  }
  ~CudaEvent() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Device memory from cudaMalloc, freed with the owner.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(void* p) : ptr_(p) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// A CUDA memory pool for stream-ordered allocation (cudaMallocFromPoolAsync / cudaFreeAsync:
// no device-wide synchronisation, unlike cudaMalloc / cudaFree), destroyed with the owner
// (its memory is released once the last stream-ordered free has run).
class CudaMemPool {
 public:
  CudaMemPool() = default;
  explicit CudaMemPool(cudaMemPool_t p) : pool_(p) {}
  CudaMemPool(CudaMemPool&& o) noexcept : pool_(std::exchange(o.pool_, nullptr)) {}
  CudaMemPool& operator=(CudaMemPool&& o) noexcept {
    std::swap(pool_, o.pool_);
    return *this;
  }
  ~CudaMemPool() {
    if (pool_ != nullptr) cudaMemPoolDestroy(pool_);
  }
  cudaMemPool_t get() const { return pool_; }

 private:
  cudaMemPool_t pool_ = nullptr;
};

// An NCCL communicator, always released with ncclCommAbort (also at a healthy generation
// switch): ncclCommDestroy would wait for operations that may never finish, and the graceful
// ncclCommFinalize is not used.
class NcclComm {
 public:
  NcclComm() = default;
  explicit NcclComm(ncclComm_t c) : comm_(c) {}
  NcclComm(NcclComm&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)) {}
  NcclComm& operator=(NcclComm&& o) noexcept {
    std::swap(comm_, o.comm_);
    return *this;
  }
  ~NcclComm() { Abort(); }
  ncclComm_t get() const { return comm_; }
  // Idempotent; used on timeouts and errors and by the destructor.
  void Abort() {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  ncclComm_t comm_ = nullptr;
};

}  // namespace retort::collectives::nccl
