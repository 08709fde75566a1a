// NcclCallPlan: which NCCL calls (and device-to-device copies) the NCCL communicator issues for
// one reduce-scatter-v or all-gather-v, and for its warm-up. Pure and std-only (no CUDA or NCCL
// headers), so what would be issued is unit-tested on machines without a GPU; NcclCommunicator
// runs a plan call by call on its stream.
//
// Choice of calls for per-rank counts c (n ranks, m = max c, S = sum c):
// - all equal: one ncclReduceScatter / ncclAllGather straight on the caller's buffers;
// - nearly even (the padding n*m - S is at most 1/8 of S, as for every whole-buffer collective
//   over the coordinator's aligned sharding plan, whose ranges differ by at most one alignment
//   unit and whose last range is shorter): padded to m per rank in a scratch buffer, so that NCCL
//   still runs one ncclReduceScatter / ncclAllGather: the chunks are copied into or out of their
//   padded slots (device copies on the same stream, adjacent chunks merged into one copy), and
//   what lands in the padding is never read;
// - otherwise (sparse counts, e.g. a gradient bucket that touches two ranks' ranges): grouped
//   ncclReduce / ncclBroadcast, one per rank with a non-zero count, which moves S elements where
//   padding would move n*m.
// Offsets and counts are in elements of the operation's data type.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace retort::collectives::nccl {

enum class NcclCallKind { kCopy, kReduceScatter, kAllGather, kAllReduce, kReduce, kBroadcast };

// Which buffer a call's pointer is in: the caller's input or output, or scratch (device memory
// of NcclCallPlan::scratch_elements the communicator provides for the plan).
enum class PlanBuffer { kInput, kOutput, kScratch };

struct PlanRef {
  PlanBuffer buffer = PlanBuffer::kInput;
  size_t offset = 0;  // elements
  bool operator==(const PlanRef&) const = default;
};

struct NcclCall {
  NcclCallKind kind = NcclCallKind::kCopy;
  PlanRef send;  // source (copy), sendbuff (NCCL)
  PlanRef recv;  // destination (copy), recvbuff (NCCL)
  // Elements: copied (copy), per rank (ncclReduceScatter's recvcount, ncclAllGather's
  // sendcount), or moved (ncclAllReduce, ncclReduce, ncclBroadcast).
  size_t count = 0;
  int root = -1;  // ncclReduce / ncclBroadcast only
};

struct NcclCallPlan {
  size_t scratch_elements = 0;  // 0: the plan uses no scratch
  // The NCCL calls run between ncclGroupStart and ncclGroupEnd (several ncclReduce or
  // ncclBroadcast calls must, so that NCCL schedules them as one operation).
  bool grouped = false;
  std::vector<NcclCall> calls;  // in issue order; copies are ordered on the same stream
};

// True when counts are uneven but close enough to pad (see the header comment).
bool PadsToEqualCounts(const std::vector<size_t>& counts);

// Reduce-scatter of input (sum(counts) elements, rank r's part at offsets[r]) into output
// (counts[rank] elements) on rank `rank`.
NcclCallPlan PlanReduceScatterV(const std::vector<size_t>& counts, int rank);
// All-gather of input (counts[rank] elements) into output (sum(counts) elements, rank r's part
// at offsets[r]) on rank `rank`.
NcclCallPlan PlanAllGatherV(const std::vector<size_t>& counts, int rank);
// The warm-up a new communicator of `size` ranks runs before it is handed out, so that NCCL
// connects its peers (which it otherwise does lazily, inside the first collective that uses an
// algorithm) while creation still waits: every kind of call a training step issues
// (ncclReduceScatter, ncclAllGather, ncclAllReduce, ncclBroadcast from rank 0; ncclReduce and
// grouped calls use the ring that these connect), each at two sizes, one element per rank and
// `large_elements` per rank, since NCCL's tuner picks its algorithm (ring, tree, NVLS) by size:
// the step's 2-float all-reduce is small, its gradient buckets and the parameters' all-gather
// large. In place in a scratch of size * large_elements elements.
inline constexpr size_t kWarmUpLargeElements = size_t{1} << 18;  // KdStep's default bucket
NcclCallPlan PlanWarmUp(int size, int rank, size_t large_elements = kWarmUpLargeElements);

// "ncclReduceScatter scratch+0 -> output+0 x4", "copy input+8 -> scratch+12 x3",
// "ncclReduce input+0 -> output+0 x5 root 2": for tests and error messages.
std::string Describe(const NcclCall& call);
std::vector<std::string> Describe(const NcclCallPlan& plan);

}  // namespace retort::collectives::nccl
