// RoutedCommunicator: one communicator over two, chosen per operation by where its buffers
// live: device memory goes to `device` (NCCL among the GPUs of a node), host memory to `host`
// (UCX), so a GPU worker's gradients take NCCL while its host-side collectives (metrics,
// replicas, checkpoint tables) keep UCX. Every rank routes the same operation the same way
// (its buffers are of the same kind everywhere), so each sub-communicator sees one consistent
// order. Barrier synchronises the ranks through `host` (device work is not ordered by it). Abort()
// aborts both; a failed operation breaks the sub-communicator it ran on (the worker then builds
// both anew for the next generation). Threading: as Communicator; both sub-communicators are owned.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace retort::collectives {

class RoutedCommunicator final : public Communicator {
 public:
  // Both over the same ranks and generation; `device` must take `device_kind`.
  static StatusOr<std::unique_ptr<RoutedCommunicator>> Create(std::unique_ptr<Communicator> device,
                                                              std::unique_ptr<Communicator> host,
                                                              MemoryKind device_kind);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  uint64_t generation() const override { return host_->generation(); }
  std::chrono::milliseconds default_timeout() const override { return host_->default_timeout(); }
  std::string name() const override {
    return "routed(" + device_->name() + " | " + host_->name() + ")";
  }
  bool AcceptsMemory(MemoryKind kind) const override {
    return kind == device_kind_ ? device_->AcceptsMemory(kind) : host_->AcceptsMemory(kind);
  }
  void Abort(const std::string& reason) override;
  std::vector<int> FailedPeers() const override;

 protected:
  RETORT_COMMUNICATOR_OPERATIONS(, override);

 private:
  RoutedCommunicator(std::unique_ptr<Communicator> device, std::unique_ptr<Communicator> host,
                     MemoryKind device_kind)
      : device_(std::move(device)), host_(std::move(host)), device_kind_(device_kind) {}
  // The communicator for buffers of `kind`.
  Communicator& For(MemoryKind kind) { return kind == device_kind_ ? *device_ : *host_; }

  std::unique_ptr<Communicator> device_;
  std::unique_ptr<Communicator> host_;
  const MemoryKind device_kind_;
};

}  // namespace retort::collectives
