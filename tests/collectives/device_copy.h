// DeviceCopy: a cudaMalloc'd buffer that host TypedBuffers are copied to and from around one
// operation, for the GPU tests of the collectives (skipped without a GPU).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>

namespace retort::collectives::testing {

class DeviceCopy {
 public:
  explicit DeviceCopy(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)), cudaSuccess);
  }
  ~DeviceCopy() { cudaFree(ptr_); }
  void From(const void* host) {
    ASSERT_EQ(cudaMemcpy(ptr_, host, bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void To(void* host) const {
    ASSERT_EQ(cudaMemcpy(host, ptr_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

}  // namespace retort::collectives::testing
