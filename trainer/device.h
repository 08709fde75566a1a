// The CUDA devices this process sees, through LibTorch and the CUDA runtime. Which of them a
// worker trains on (--device auto, cpu, cuda, cuda:N) is decided by worker/worker_device.h,
// torch-free, from the count VisibleCudaDevices() returns.
#pragma once

#include <string>

namespace retort::trainer {

// CUDA devices LibTorch sees (0 without a GPU or in a CPU-only LibTorch).
int VisibleCudaDevices();

// The name of CUDA device `index` as the driver reports it ("NVIDIA H100 80GB HBM3"); "" when
// there is no such device or the build has no CUDA runtime.
std::string CudaDeviceName(int index);

}  // namespace retort::trainer
