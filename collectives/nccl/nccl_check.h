// NCCL_CHECK / CUDA_CHECK: wrap an NCCL or CUDA runtime call; on failure return a Status
// naming what was being done, file:line and the library's own message (and, for NCCL, its
// last error string).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "common/status.h"

namespace retort::collectives::nccl {

Status NcclError(ncclResult_t result, const std::string& what, const char* file, int line);
Status CudaError(cudaError_t error, const std::string& what, const char* file, int line);

}  // namespace retort::collectives::nccl

#define NCCL_CHECK(expr, what)                                                                     \
  do {                                                                                             \
    ncclResult_t nccl_check_result_ = (expr);                                                      \
    if (nccl_check_result_ != ncclSuccess && nccl_check_result_ != ncclInProgress) {               \
      return ::retort::collectives::nccl::NcclError(nccl_check_result_, what, __FILE__, __LINE__); \
    }                                                                                              \
  } while (0)

#define CUDA_CHECK(expr, what)                                                                    \
  do {                                                                                            \
    cudaError_t cuda_check_error_ = (expr);                                                       \
    if (cuda_check_error_ != cudaSuccess) {                                                       \
      return ::retort::collectives::nccl::CudaError(cuda_check_error_, what, __FILE__, __LINE__); \
    }                                                                                             \
  } while (0)
