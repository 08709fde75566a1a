// Element types, reduction ops and buffer views shared by every communicator.
// Buffers are raw pointer + element count + dtype: collectives/ knows nothing of tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace retort::collectives {

enum class DataType : uint8_t { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// sum, or sum followed by a division by the number of contributing ranks.
enum class ReduceOp : uint8_t { kSum = 0, kAverage = 1 };

size_t DataTypeSize(DataType dtype);
const char* DataTypeName(DataType dtype);
const char* ReduceOpName(ReduceOp op);

// Where a buffer's bytes live. A backend takes the kinds its Communicator::AcceptsMemory says
// and refuses the others when an operation is issued (INVALID_ARGUMENT naming both), never
// dereferencing device memory on the host. kPinnedHost is page-locked host memory (CUDA can
// copy it asynchronously at full speed); it is host memory to every host backend.
enum class MemoryKind : uint8_t { kHost = 0, kPinnedHost = 1, kCudaDevice = 2 };
const char* MemoryKindName(MemoryKind kind);
inline bool IsHostMemory(MemoryKind kind) { return kind != MemoryKind::kCudaDevice; }

// A read-only run of `count` elements of `dtype` at `data`, in `memory`. Not owning.
struct ConstBuffer {
  const void* data = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  MemoryKind memory = MemoryKind::kHost;
  size_t bytes() const { return count * DataTypeSize(dtype); }
};

// A writable run of `count` elements of `dtype` at `data`, in `memory`. Not owning.
struct MutableBuffer {
  void* data = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  MemoryKind memory = MemoryKind::kHost;
  size_t bytes() const { return count * DataTypeSize(dtype); }
  ConstBuffer AsConst() const { return ConstBuffer{data, count, dtype, memory}; }
};

// Sum of a counts vector (elements).
size_t TotalCount(const std::vector<size_t>& counts);
// Prefix offsets of a counts vector: offsets[i] = sum(counts[0..i)).
std::vector<size_t> Offsets(const std::vector<size_t>& counts);
// Splits `total` elements into `parts` contiguous counts that differ by at most one.
std::vector<size_t> EvenCounts(size_t total, int parts);

// The message of a failed call into a native library (NCCL, CUDA, UCX): what was attempted,
// the library's own reason, and the call site.
std::string NativeErrorMessage(const std::string& what, const char* reason, const char* file,
                               int line);

// Validates a buffer argument: non-null data when count > 0. `what` names the argument.
Status CheckBuffer(const void* data, size_t count, const char* what);

}  // namespace retort::collectives
