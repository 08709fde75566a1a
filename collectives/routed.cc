#include "collectives/routed.h"

#include <algorithm>

namespace retort::collectives {

StatusOr<std::unique_ptr<RoutedCommunicator>> RoutedCommunicator::Create(
    std::unique_ptr<Communicator> device, std::unique_ptr<Communicator> host,
    MemoryKind device_kind) {
  if (device == nullptr || host == nullptr)
    return InvalidArgumentError("routed: needs a device and a host communicator");
  if (device->rank() != host->rank() || device->size() != host->size() ||
      device->generation() != host->generation()) {
    return InvalidArgumentError(
        "routed: " + device->name() + " is rank " + std::to_string(device->rank()) + " of " +
        std::to_string(device->size()) + " (generation " + std::to_string(device->generation()) +
        "), " + host->name() + " rank " + std::to_string(host->rank()) + " of " +
        std::to_string(host->size()) + " (generation " + std::to_string(host->generation()) +
        "): they must be the same world");
  }
  if (!device->AcceptsMemory(device_kind)) {
    return InvalidArgumentError("routed: the " + device->name() + " communicator does not take " +
                                MemoryKindName(device_kind) + " memory");
  }
  return std::unique_ptr<RoutedCommunicator>(
      new RoutedCommunicator(std::move(device), std::move(host), device_kind));
}

void RoutedCommunicator::Abort(const std::string& reason) {
  device_->Abort(reason);
  host_->Abort(reason);
}

std::vector<int> RoutedCommunicator::FailedPeers() const {
  std::vector<int> peers = device_->FailedPeers();
  for (int p : host_->FailedPeers())
    if (std::find(peers.begin(), peers.end(), p) == peers.end()) peers.push_back(p);
  std::sort(peers.begin(), peers.end());
  return peers;
}

WorkPtr RoutedCommunicator::DoReduceScatterV(ConstBuffer input, MutableBuffer output,
                                             const std::vector<size_t>& counts, ReduceOp op,
                                             const CollectiveOptions& options) {
  return For(input.memory).ReduceScatterV(input, output, counts, op, options);
}

WorkPtr RoutedCommunicator::DoAllGatherV(ConstBuffer input, MutableBuffer output,
                                         const std::vector<size_t>& counts,
                                         const CollectiveOptions& options) {
  return For(input.memory).AllGatherV(input, output, counts, options);
}

WorkPtr RoutedCommunicator::DoAllReduce(MutableBuffer data, ReduceOp op,
                                        const CollectiveOptions& options) {
  return For(data.memory).AllReduce(data, op, options);
}

WorkPtr RoutedCommunicator::DoBroadcast(MutableBuffer data, int root,
                                        const CollectiveOptions& options) {
  return For(data.memory).Broadcast(data, root, options);
}

WorkPtr RoutedCommunicator::DoBarrier(const CollectiveOptions& options) {
  return host_->Barrier(options);
}

WorkPtr RoutedCommunicator::DoSend(ConstBuffer data, int peer, uint32_t tag,
                                   const CollectiveOptions& options) {
  return For(data.memory).Send(data, peer, tag, options);
}

WorkPtr RoutedCommunicator::DoRecv(MutableBuffer data, int peer, uint32_t tag,
                                   const CollectiveOptions& options) {
  return For(data.memory).Recv(data, peer, tag, options);
}

WorkPtr RoutedCommunicator::DoAllToAllV(ConstBuffer input, const std::vector<size_t>& send_counts,
                                        MutableBuffer output,
                                        const std::vector<size_t>& recv_counts,
                                        const CollectiveOptions& options) {
  return For(input.memory).AllToAllV(input, send_counts, output, recv_counts, options);
}

}  // namespace retort::collectives
