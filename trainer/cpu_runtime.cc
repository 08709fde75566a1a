#include "trainer/cpu_runtime.h"

#include <ATen/Parallel.h>
#include <malloc.h>

#include <algorithm>

namespace retort::trainer {

void KeepTensorMemoryInProcess() {
#ifdef M_MMAP_THRESHOLD
  // 32 MiB is glibc's largest mmap threshold on 64-bit; blocks up to it come from the heap.
  // A fixed value also turns off the dynamic threshold, which starts at 128 KiB.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Free memory is returned to the kernel only past 1 GiB at the top of the heap.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Per-thread arenas grow in 64 MiB heaps that are unmapped whole once empty, whatever the
  // trim threshold: a step whose activations spill into a second heap pays its page faults
  // again every step. One arena (the brk heap) has no such boundary.
  mallopt(M_ARENA_MAX, 1);
#endif
}

void ConfigureCpuRuntime(int intra_op_threads) {
  KeepTensorMemoryInProcess();
  at::set_num_threads(std::max(1, intra_op_threads));
  static const bool interop_set = [] {
    at::set_num_interop_threads(1);
    return true;
  }();
  (void)interop_set;
}

}  // namespace retort::trainer
