// NCCL_CHECK / CUDA_CHECK: wrap an NCCL or CUDA runtime call; on failure return a Status
// naming what was being done, file:line and the library's own message (and, for NCCL, its
// last error string).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "collectives/native_check.h"
#include "common/status.h"

namespace retort::collectives::nccl {

Status NcclError(ncclResult_t result, const std::string& what, const char* file, int line);
Status CudaError(cudaError_t error, const std::string& what, const char* file, int line);
// ncclInProgress is not a failure: a non-blocking communicator's call is still running.
inline bool NcclFailed(ncclResult_t r) { return r != ncclSuccess && r != ncclInProgress; }
inline bool CudaFailed(cudaError_t e) { return e != cudaSuccess; }

}  // namespace retort::collectives::nccl

#define NCCL_CHECK(expr, what)                                                     \
  RETORT_NATIVE_CHECK(ncclResult_t, expr, ::retort::collectives::nccl::NcclFailed, \
                      ::retort::collectives::nccl::NcclError, what)

#define CUDA_CHECK(expr, what)                                                    \
  RETORT_NATIVE_CHECK(cudaError_t, expr, ::retort::collectives::nccl::CudaFailed, \
                      ::retort::collectives::nccl::CudaError, what)
