#include "trainer/cpu_runtime.h"

#include <ATen/Parallel.h>
#include <malloc.h>

#include <algorithm>

namespace retort::trainer {

void ConfigureCpuRuntime(int intra_op_threads) {
  at::set_num_threads(std::max(1, intra_op_threads));
  // Only settable before the pool starts; later calls keep the first value.
  static const bool interop_set = [] {
    at::set_num_interop_threads(1);
    return true;
  }();
  (void)interop_set;
#ifdef M_MMAP_THRESHOLD
  // 32 MiB is glibc's largest mmap threshold on 64-bit; blocks up to it come from the heap.
  // A fixed value also turns off the dynamic threshold, which otherwise starts at 128 KiB.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Free heap memory is returned to the kernel only past 1 GiB at the top of a heap.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace retort::trainer
