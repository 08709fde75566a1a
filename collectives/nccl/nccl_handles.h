// RAII owners of the CUDA and NCCL handles the NCCL communicator uses. Move-only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <utility>

namespace retort::collectives::nccl {

// Owns one handle (a pointer-like CUDA or NCCL type), released with `Release` when the owner
// goes or on reset(). Moving hands the handle over; a moved-from or default owner holds none.
template <typename Handle, auto Release>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(Handle h) : handle_(h) {}
  UniqueHandle(UniqueHandle&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    std::swap(handle_, o.handle_);
    return *this;
  }
  ~UniqueHandle() { reset(); }
  Handle get() const { return handle_; }
  // Releases the handle now; idempotent.
  void reset() {
    if (handle_ != nullptr) (void)Release(std::exchange(handle_, nullptr));
  }

 private:
  Handle handle_ = nullptr;
};

// A non-blocking CUDA stream.
using CudaStream = UniqueHandle<cudaStream_t, cudaStreamDestroy>;
// A CUDA event without timing.
using CudaEvent = UniqueHandle<cudaEvent_t, cudaEventDestroy>;
// Device memory from cudaMalloc.
using DeviceBuffer = UniqueHandle<void*, cudaFree>;
// A CUDA memory pool for stream-ordered allocation (cudaMallocFromPoolAsync / cudaFreeAsync:
// no device-wide synchronisation, unlike cudaMalloc / cudaFree); its memory is released once
// the last stream-ordered free has run.
using CudaMemPool = UniqueHandle<cudaMemPool_t, cudaMemPoolDestroy>;
// An NCCL communicator, always released with ncclCommAbort (also at a healthy generation
// switch; reset() on timeouts and errors): ncclCommDestroy would wait for operations that may
// never finish, and the graceful ncclCommFinalize is not used.
using NcclComm = UniqueHandle<ncclComm_t, ncclCommAbort>;

}  // namespace retort::collectives::nccl
