#include "collectives/types.h"

#include "common/enum_names.h"

namespace retort::collectives {

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return 4;
    case DataType::kBFloat16:
      return 2;
    case DataType::kFloat16:
      return 2;
  }
  return 0;
}

const char* DataTypeName(DataType dtype) {
  static constexpr NamedValue<DataType> kNames[] = {
      {DataType::kFloat32, "fp32"}, {DataType::kBFloat16, "bf16"}, {DataType::kFloat16, "fp16"}};
  return NameIn(kNames, dtype, "unknown");
}

const char* ReduceOpName(ReduceOp op) {
  static constexpr NamedValue<ReduceOp> kNames[] = {{ReduceOp::kSum, "sum"},
                                                    {ReduceOp::kAverage, "average"}};
  return NameIn(kNames, op, "unknown");
}

const char* MemoryKindName(MemoryKind kind) {
  static constexpr NamedValue<MemoryKind> kNames[] = {{MemoryKind::kHost, "host"},
                                                      {MemoryKind::kPinnedHost, "pinned host"},
                                                      {MemoryKind::kCudaDevice, "CUDA device"}};
  return NameIn(kNames, kind, "unknown");
}

size_t TotalCount(const std::vector<size_t>& counts) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  return total;
}

std::vector<size_t> Offsets(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size(), 0);
  size_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = at;
    at += counts[i];
  }
  return offsets;
}

std::vector<size_t> EvenCounts(size_t total, int parts) {
  std::vector<size_t> counts(static_cast<size_t>(parts), total / static_cast<size_t>(parts));
  for (size_t i = 0; i < total % static_cast<size_t>(parts); ++i) ++counts[i];
  return counts;
}

std::string NativeErrorMessage(const std::string& what, const char* reason, const char* file,
                               int line) {
  return what + ": " + reason + " (" + file + ":" + std::to_string(line) + ")";
}

Status CheckBuffer(const void* data, size_t count, const char* what) {
  if (count > 0 && data == nullptr) {
    return InvalidArgumentError(std::string(what) + " is null but its count is " +
                                std::to_string(count));
  }
  return Status::Ok();
}

}  // namespace retort::collectives
