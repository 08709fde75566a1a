// Which device a worker trains on. Torch-free so that flag parsing can use it anywhere.
//
//   "auto"    cuda:<local rank> when a CUDA device is visible, else cpu
//   "cpu"     the CPU
//   "cuda"    cuda:<local rank>
//   "cuda:N"  that device
// A CUDA device that is not there is FAILED_PRECONDITION naming it and what is visible; a
// malformed spec is INVALID_ARGUMENT.
#pragma once

#include <string>

#include "common/status.h"

namespace retort::trainer {

// The device named by `spec` as "cpu" or "cuda:N", given this worker's local rank on its node
// and the number of CUDA devices the process sees.
StatusOr<std::string> ResolveDevice(const std::string& spec, int local_rank,
                                    int visible_cuda_devices);

// The CUDA device index of a resolved device ("cuda:N" -> N); -1 for "cpu" or anything else.
int CudaIndex(const std::string& resolved_device);

// CUDA devices LibTorch sees (0 without a GPU or in a CPU-only LibTorch).
int VisibleCudaDevices();

// The name of CUDA device `index` as the driver reports it ("NVIDIA H100 80GB HBM3"); "" when
// there is no such device or the build has no CUDA runtime.
std::string CudaDeviceName(int index);

}  // namespace retort::trainer
