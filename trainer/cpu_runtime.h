// Process-wide CPU settings for a training process. Call once at startup (or again when the
// thread count changes) from the thread that will drive training; not thread-safe against
// concurrent tensor work.
#pragma once

namespace retort::trainer {

// Sets LibTorch's intra-op thread count (OpenMP sees one core by default on some hosts, so it
// is always set explicitly) and one inter-op thread, and keeps glibc malloc from handing
// tensor-sized blocks back to the kernel after every step: without this, each step's
// activations (several MiB each) are fresh mmap()s or heap growth whose pages are faulted in
// and zeroed again, about 5% of a CPU KD step. The cost is that the process keeps its peak
// heap (like a caching allocator) instead of shrinking between steps.
void ConfigureCpuRuntime(int intra_op_threads);

}  // namespace retort::trainer
