#include "collectives/communicator.h"

#include "collectives/validate.h"

namespace retort::collectives {

namespace {

// Completes at once with `valid` when it is an error; otherwise issues the operation.
template <typename Issue>
WorkPtr IssueIfValid(const char* op, const Status& valid, Issue&& issue) {
  if (!valid.ok()) return CompletedWork(op, valid);
  return issue();
}

}  // namespace

WorkPtr Communicator::ReduceScatterV(ConstBuffer input, MutableBuffer output,
                                     const std::vector<size_t>& counts, ReduceOp op,
                                     const CollectiveOptions& options) {
  return IssueIfValid("reduce_scatter",
                      ValidateReduceScatterV(rank(), size(), input, output, counts),
                      [&] { return DoReduceScatterV(input, output, counts, op, options); });
}

WorkPtr Communicator::AllGatherV(ConstBuffer input, MutableBuffer output,
                                 const std::vector<size_t>& counts,
                                 const CollectiveOptions& options) {
  return IssueIfValid("all_gather", ValidateAllGatherV(rank(), size(), input, output, counts),
                      [&] { return DoAllGatherV(input, output, counts, options); });
}

WorkPtr Communicator::AllReduce(MutableBuffer data, ReduceOp op, const CollectiveOptions& options) {
  return IssueIfValid("all_reduce", CheckBuffer(data.data, data.count, "all_reduce data"),
                      [&] { return DoAllReduce(data, op, options); });
}

WorkPtr Communicator::Broadcast(MutableBuffer data, int root, const CollectiveOptions& options) {
  return IssueIfValid("broadcast", ValidateBroadcast(size(), data, root),
                      [&] { return DoBroadcast(data, root, options); });
}

WorkPtr Communicator::Barrier(const CollectiveOptions& options) { return DoBarrier(options); }

WorkPtr Communicator::Send(ConstBuffer data, int peer, uint32_t tag,
                           const CollectiveOptions& options) {
  return IssueIfValid("send",
                      ValidatePointToPoint(rank(), size(), peer, data.data, data.count, "send"),
                      [&] { return DoSend(data, peer, tag, options); });
}

WorkPtr Communicator::Recv(MutableBuffer data, int peer, uint32_t tag,
                           const CollectiveOptions& options) {
  return IssueIfValid("recv",
                      ValidatePointToPoint(rank(), size(), peer, data.data, data.count, "recv"),
                      [&] { return DoRecv(data, peer, tag, options); });
}

WorkPtr Communicator::AllToAllV(ConstBuffer input, const std::vector<size_t>& send_counts,
                                MutableBuffer output, const std::vector<size_t>& recv_counts,
                                const CollectiveOptions& options) {
  return IssueIfValid(
      "all_to_all_v", ValidateAllToAllV(size(), input, send_counts, output, recv_counts),
      [&] { return DoAllToAllV(input, send_counts, output, recv_counts, options); });
}

WorkPtr Communicator::ReduceScatter(ConstBuffer input, MutableBuffer output, ReduceOp op,
                                    const CollectiveOptions& options) {
  return IssueIfValid(
      "reduce_scatter",
      ValidateEqualCounts("reduce_scatter", "input", input.count, "output", output.count, size()),
      [&] {
        return ReduceScatterV(input, output, std::vector<size_t>(size(), output.count), op,
                              options);
      });
}

WorkPtr Communicator::AllGather(ConstBuffer input, MutableBuffer output,
                                const CollectiveOptions& options) {
  return IssueIfValid(
      "all_gather",
      ValidateEqualCounts("all_gather", "output", output.count, "input", input.count, size()),
      [&] { return AllGatherV(input, output, std::vector<size_t>(size(), input.count), options); });
}

}  // namespace retort::collectives
