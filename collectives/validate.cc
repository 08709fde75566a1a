#include "collectives/validate.h"

#include <string>

namespace retort::collectives {
namespace {

std::string Str(size_t v) { return std::to_string(v); }

Status CheckCounts(const char* op, int size, const std::vector<size_t>& counts, const char* name) {
  if (counts.size() != static_cast<size_t>(size)) {
    return InvalidArgumentError(std::string(op) + ": " + name + " has " + Str(counts.size()) +
                                " entries, the communicator has " + Str(size) + " ranks");
  }
  return Status::Ok();
}

Status CheckSameDtype(const char* op, DataType a, DataType b) {
  if (a != b) {
    return InvalidArgumentError(std::string(op) + ": input dtype " + DataTypeName(a) +
                                " != output dtype " + DataTypeName(b));
  }
  return Status::Ok();
}

bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0) return false;
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

Status ValidateReduceScatterV(int rank, int size, ConstBuffer input, MutableBuffer output,
                              const std::vector<size_t>& counts) {
  const char* op = "reduce_scatter";
  RETORT_RETURN_IF_ERROR(CheckCounts(op, size, counts, "counts"));
  RETORT_RETURN_IF_ERROR(CheckSameDtype(op, input.dtype, output.dtype));
  if (input.count != TotalCount(counts)) {
    return InvalidArgumentError(std::string(op) + ": input count " + Str(input.count) +
                                " != sum(counts) " + Str(TotalCount(counts)));
  }
  if (output.count != counts[rank]) {
    return InvalidArgumentError(std::string(op) + ": output count " + Str(output.count) +
                                " != counts[rank " + std::to_string(rank) + "] " +
                                Str(counts[rank]));
  }
  RETORT_RETURN_IF_ERROR(CheckBuffer(input.data, input.count, "reduce_scatter input"));
  RETORT_RETURN_IF_ERROR(CheckBuffer(output.data, output.count, "reduce_scatter output"));
  const size_t elem = DataTypeSize(input.dtype);
  const void* own = static_cast<const char*>(input.data) + Offsets(counts)[rank] * elem;
  if (output.data != own && Overlap(input.data, input.bytes(), output.data, output.bytes())) {
    return InvalidArgumentError(
        "reduce_scatter: output overlaps input other than as this rank's own segment");
  }
  return Status::Ok();
}

Status ValidateAllGatherV(int rank, int size, ConstBuffer input, MutableBuffer output,
                          const std::vector<size_t>& counts) {
  const char* op = "all_gather";
  RETORT_RETURN_IF_ERROR(CheckCounts(op, size, counts, "counts"));
  RETORT_RETURN_IF_ERROR(CheckSameDtype(op, input.dtype, output.dtype));
  if (output.count != TotalCount(counts)) {
    return InvalidArgumentError(std::string(op) + ": output count " + Str(output.count) +
                                " != sum(counts) " + Str(TotalCount(counts)));
  }
  if (input.count != counts[rank]) {
    return InvalidArgumentError(std::string(op) + ": input count " + Str(input.count) +
                                " != counts[rank " + std::to_string(rank) + "] " +
                                Str(counts[rank]));
  }
  RETORT_RETURN_IF_ERROR(CheckBuffer(input.data, input.count, "all_gather input"));
  RETORT_RETURN_IF_ERROR(CheckBuffer(output.data, output.count, "all_gather output"));
  const size_t elem = DataTypeSize(input.dtype);
  const void* own = static_cast<const char*>(output.data) + Offsets(counts)[rank] * elem;
  if (input.data != own && Overlap(input.data, input.bytes(), output.data, output.bytes())) {
    return InvalidArgumentError(
        "all_gather: input overlaps output other than as this rank's own segment");
  }
  return Status::Ok();
}

Status ValidateBroadcast(int size, MutableBuffer data, int root) {
  if (root < 0 || root >= size) {
    return InvalidArgumentError("broadcast: root " + std::to_string(root) + " outside [0, " +
                                std::to_string(size) + ")");
  }
  return CheckBuffer(data.data, data.count, "broadcast data");
}

Status ValidatePeer(int rank, int size, int peer, const char* op) {
  if (peer < 0 || peer >= size) {
    return InvalidArgumentError(std::string(op) + ": peer " + std::to_string(peer) +
                                " outside [0, " + std::to_string(size) + ")");
  }
  if (peer == rank) {
    return InvalidArgumentError(std::string(op) + ": peer " + std::to_string(peer) +
                                " is this rank");
  }
  return Status::Ok();
}

Status ValidatePointToPoint(int rank, int size, int peer, const void* data, size_t count,
                            const char* op) {
  RETORT_RETURN_IF_ERROR(ValidatePeer(rank, size, peer, op));
  return CheckBuffer(data, count, (std::string(op) + " data").c_str());
}

Status ValidateEqualCounts(const char* op, const char* total_name, size_t total,
                           const char* part_name, size_t part, int size) {
  if (total != part * static_cast<size_t>(size)) {
    return InvalidArgumentError(std::string(op) + ": " + total_name + " count " + Str(total) +
                                " != size " + std::to_string(size) + " x " + part_name + " count " +
                                Str(part));
  }
  return Status::Ok();
}

Status ValidateAllToAllV(int size, ConstBuffer input, const std::vector<size_t>& send_counts,
                         MutableBuffer output, const std::vector<size_t>& recv_counts) {
  const char* op = "all_to_all_v";
  RETORT_RETURN_IF_ERROR(CheckCounts(op, size, send_counts, "send_counts"));
  RETORT_RETURN_IF_ERROR(CheckCounts(op, size, recv_counts, "recv_counts"));
  RETORT_RETURN_IF_ERROR(CheckSameDtype(op, input.dtype, output.dtype));
  if (input.count != TotalCount(send_counts)) {
    return InvalidArgumentError(std::string(op) + ": input count " + Str(input.count) +
                                " != sum(send_counts) " + Str(TotalCount(send_counts)));
  }
  if (output.count != TotalCount(recv_counts)) {
    return InvalidArgumentError(std::string(op) + ": output count " + Str(output.count) +
                                " != sum(recv_counts) " + Str(TotalCount(recv_counts)));
  }
  RETORT_RETURN_IF_ERROR(CheckBuffer(input.data, input.count, "all_to_all_v input"));
  RETORT_RETURN_IF_ERROR(CheckBuffer(output.data, output.count, "all_to_all_v output"));
  if (Overlap(input.data, input.bytes(), output.data, output.bytes())) {
    return InvalidArgumentError("all_to_all_v: input and output overlap");
  }
  return Status::Ok();
}

}  // namespace retort::collectives
