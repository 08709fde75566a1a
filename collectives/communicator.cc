#include "collectives/communicator.h"

namespace retort::collectives {

WorkPtr Communicator::ReduceScatter(ConstBuffer input, MutableBuffer output, ReduceOp op,
                                    const CollectiveOptions& options) {
  if (input.count != output.count * static_cast<size_t>(size())) {
    return CompletedWork(
        "reduce_scatter",
        InvalidArgumentError("reduce_scatter: input count " + std::to_string(input.count) +
                             " != size " + std::to_string(size()) + " x output count " +
                             std::to_string(output.count)));
  }
  return ReduceScatterV(input, output, std::vector<size_t>(size(), output.count), op, options);
}

WorkPtr Communicator::AllGather(ConstBuffer input, MutableBuffer output,
                                const CollectiveOptions& options) {
  if (output.count != input.count * static_cast<size_t>(size())) {
    return CompletedWork(
        "all_gather",
        InvalidArgumentError("all_gather: output count " + std::to_string(output.count) +
                             " != size " + std::to_string(size()) + " x input count " +
                             std::to_string(input.count)));
  }
  return AllGatherV(input, output, std::vector<size_t>(size(), input.count), options);
}

}  // namespace retort::collectives
