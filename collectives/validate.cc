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

// Reduce-scatter and all-gather share their rules, mirrored: one side holds every rank's
// segment (`whole`: the reduce-scatter's input, the all-gather's output), the other this rank's
// own (`own`), which may alias its segment in `whole` and must not overlap the rest of it.
Status ValidateSegments(const char* op, int rank, int size, const void* whole, size_t whole_count,
                        const char* whole_name, const void* own, size_t own_count,
                        const char* own_name, DataType dtype, const std::vector<size_t>& counts) {
  RETORT_RETURN_IF_ERROR(CheckCounts(op, size, counts, "counts"));
  const std::string prefix = std::string(op) + ": ";
  if (whole_count != TotalCount(counts)) {
    return InvalidArgumentError(prefix + whole_name + " count " + Str(whole_count) +
                                " != sum(counts) " + Str(TotalCount(counts)));
  }
  if (own_count != counts[rank]) {
    return InvalidArgumentError(prefix + own_name + " count " + Str(own_count) +
                                " != counts[rank " + std::to_string(rank) + "] " +
                                Str(counts[rank]));
  }
  const std::string whole_what = std::string(op) + " " + whole_name;
  const std::string own_what = std::string(op) + " " + own_name;
  RETORT_RETURN_IF_ERROR(CheckBuffer(whole, whole_count, whole_what.c_str()));
  RETORT_RETURN_IF_ERROR(CheckBuffer(own, own_count, own_what.c_str()));
  const size_t elem = DataTypeSize(dtype);
  const void* own_segment = static_cast<const char*>(whole) + Offsets(counts)[rank] * elem;
  if (own != own_segment && Overlap(whole, whole_count * elem, own, own_count * elem)) {
    return InvalidArgumentError(prefix + own_name + " overlaps " + whole_name +
                                " other than as this rank's own segment");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateReduceScatterV(int rank, int size, ConstBuffer input, MutableBuffer output,
                              const std::vector<size_t>& counts) {
  RETORT_RETURN_IF_ERROR(CheckSameDtype("reduce_scatter", input.dtype, output.dtype));
  return ValidateSegments("reduce_scatter", rank, size, input.data, input.count, "input",
                          output.data, output.count, "output", input.dtype, counts);
}

Status ValidateAllGatherV(int rank, int size, ConstBuffer input, MutableBuffer output,
                          const std::vector<size_t>& counts) {
  RETORT_RETURN_IF_ERROR(CheckSameDtype("all_gather", input.dtype, output.dtype));
  return ValidateSegments("all_gather", rank, size, output.data, output.count, "output", input.data,
                          input.count, "input", input.dtype, counts);
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
