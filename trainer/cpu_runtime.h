// Process-wide CPU settings for a training process.
#pragma once

namespace retort::trainer {

// Keeps glibc malloc from handing tensor-sized blocks back to the kernel after every step.
// Without it, each step's activations (several MiB each) are fresh mmap()s, or land in a
// per-thread heap that is unmapped again when the step frees it, and their pages are faulted
// in and zeroed every step: 5-20% of a CPU KD step, depending on how the heaps happen to be
// laid out. Every thread allocates from the main heap (one arena), which grows once and is
// trimmed only past 1 GiB of free space at its top, so the process keeps its peak heap (like
// a caching allocator). Call first thing in main(): threads that already allocated keep the
// arena they have. Idempotent.
void KeepTensorMemoryInProcess();

// KeepTensorMemoryInProcess(), then LibTorch's intra-op thread count (OpenMP sees one core by
// default on some hosts, so it is always set explicitly) and one inter-op thread (settable once
// per process; later calls keep it). Call from the thread that will drive training, before
// tensor work starts; not thread-safe against concurrent tensor work.
void ConfigureCpuRuntime(int intra_op_threads);

}  // namespace retort::trainer
