// The CUDA devices this process sees, through LibTorch and the CUDA runtime. Which of them a
// worker trains on (--device auto, cpu, cuda, cuda:N) is decided by worker/worker_device.h,
// torch-free, from the count VisibleCudaDevices() returns.
//
// The current device is per thread (the CUDA runtime's, which is LibTorch's too): a thread
// that has not selected one makes its CUDA calls on device 0 and creates a context there. So on
// a node where every worker sees every GPU, each thread of a worker that touches CUDA selects
// the worker's device first, through a DeviceSelector: the session's threads (its setup, which
// loads the teacher, and its training thread), the KD step where it is created, and the data
// loader's decode threads. The collectives select theirs at every call (collectives/nccl/).
// DeviceSelector is the seam: CPU tests pass a recording one and assert which thread selected
// which device.
#pragma once

#include <string>

#include "common/status.h"

namespace retort::trainer {

// CUDA devices LibTorch sees (0 without a GPU or in a CPU-only LibTorch).
int VisibleCudaDevices();

// The name of CUDA device `index` as the driver reports it ("NVIDIA H100 80GB HBM3"); "" when
// there is no such device or the build has no CUDA runtime.
std::string CudaDeviceName(int index);

// Selects the calling thread's current CUDA device. Threading: any thread; implementations are
// thread-safe.
class DeviceSelector {
 public:
  virtual ~DeviceSelector() = default;
  // Makes CUDA device `index` (>= 0) the calling thread's current device.
  virtual Status Select(int index) = 0;
};

// The CUDA runtime's selector (through LibTorch's device guard, so LibTorch's current device
// moves with it). FAILED_PRECONDITION naming the device in a LibTorch without CUDA or when the
// device is not visible. Process-wide and stateless.
DeviceSelector& CudaRuntimeSelector();

// Selects CUDA device `index` on the calling thread through `selector` (null: the CUDA
// runtime's); nothing for index < 0 (the CPU). `who` names the thread in the error.
Status SelectThreadDevice(int index, DeviceSelector* selector, const std::string& who);

}  // namespace retort::trainer
