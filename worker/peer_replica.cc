#include "worker/peer_replica.h"

#include <algorithm>
#include <string>
#include <utility>

#include "trainer/host_staging.h"

namespace retort::worker {
namespace {

constexpr uint32_t kReplicaTag = 0x7e91;

// Copies src into *dst in host memory (pinned when src lives on a device), reusing *dst's
// storage when it already has the right size: snapshots never hold device memory, and every
// buffer handed to the communicator below is host memory.
void CopyInto(torch::Tensor* dst, const torch::Tensor& src) {
  if (!dst->defined() || dst->numel() != src.numel() || !dst->is_cpu())
    *dst = trainer::HostStagingBuffer(src.numel(), src);
  dst->copy_(src.reshape({-1}));
}

collectives::MutableBuffer Floats(torch::Tensor& t) {
  return {t.data_ptr<float>(), static_cast<size_t>(t.numel()), collectives::DataType::kFloat32};
}

}  // namespace

Status PeerReplica::Capture(collectives::Communicator& comm, const trainer::ShardPlan& plan,
                            const torch::Tensor& flat_params, const torch::Tensor& exp_avg,
                            const torch::Tensor& exp_avg_sq, const torch::Tensor& buffers,
                            const StateMeta& meta, int replica_distance, int64_t timeout_ms) {
  const int rank = comm.rank(), world = comm.size();
  if (replica_distance < 1 || (world > 1 && replica_distance >= world))
    return InvalidArgumentError("replica distance " + std::to_string(replica_distance) +
                                " is not in [1, " + std::to_string(std::max(1, world - 1)) + "]");
  const bool same_generation =
      comm.generation() == generation_ && newest_ >= 0 && replica_distance == replica_distance_;
  // Write into the older slot of this generation, or a scratch snapshot for a new one.
  Snapshot scratch;
  Snapshot& s = same_generation ? slots_[1 - newest_] : scratch;
  s.meta = StateMeta();
  s.own = plan.ranges[rank];
  CopyInto(&s.own_params, flat_params.slice(0, s.own.offset, s.own.end()));
  CopyInto(&s.own_exp_avg, exp_avg);
  CopyInto(&s.own_exp_avg_sq, exp_avg_sq);
  if (buffers.defined() && buffers.numel() > 0)
    CopyInto(&s.buffers, buffers);
  else
    s.buffers = torch::Tensor();
  if (world > 1) {
    const int successor = (rank + replica_distance) % world;
    const int predecessor = (rank + world - replica_distance) % world;
    s.predecessor = plan.ranges[predecessor];
    CopyInto(&s.predecessor_params,
             flat_params.slice(0, s.predecessor.offset, s.predecessor.end()));
    torch::Tensor outgoing = torch::cat({s.own_exp_avg, s.own_exp_avg_sq});
    torch::Tensor incoming = torch::empty({2 * s.predecessor.count});
    auto send = comm.Send({outgoing.data_ptr<float>(), static_cast<size_t>(outgoing.numel()),
                           collectives::DataType::kFloat32},
                          successor, kReplicaTag);
    auto recv = comm.Recv(Floats(incoming), predecessor, kReplicaTag);
    Status sent = send->Wait(Deadline::AfterMs(timeout_ms));
    Status received = recv->Wait(Deadline::AfterMs(timeout_ms));
    if (!sent.ok()) return sent;
    if (!received.ok()) return received;
    CopyInto(&s.predecessor_exp_avg, incoming.slice(0, 0, s.predecessor.count));
    CopyInto(&s.predecessor_exp_avg_sq,
             incoming.slice(0, s.predecessor.count, 2 * s.predecessor.count));
  } else {
    s.predecessor = trainer::ShardRange();
    s.predecessor_params = s.predecessor_exp_avg = s.predecessor_exp_avg_sq = torch::Tensor();
  }
  s.meta = meta;
  if (same_generation) {
    newest_ = 1 - newest_;
  } else {
    slots_[0] = std::move(scratch);
    slots_[1] = Snapshot();
    newest_ = 0;
    generation_ = comm.generation();
    rank_ = rank;
    world_ = world;
    replica_distance_ = replica_distance;
  }
  return Status::Ok();
}

void PeerReplica::Describe(StateDescriptor* d) const {
  d->old_generation = static_cast<int64_t>(generation_);
  d->old_rank = rank_;
  d->old_world = world_;
  d->old_replica_distance = replica_distance_;
  for (int i = 0; i < 2; ++i) d->snapshot[i] = slots_[i].meta;
}

const PeerReplica::Snapshot* PeerReplica::At(int64_t global_step) const {
  for (const auto& s : slots_)
    if (s.meta.global_step >= 0 && s.meta.global_step == global_step) return &s;
  return nullptr;
}

const PeerReplica::Snapshot* PeerReplica::Latest() const {
  return newest_ >= 0 && slots_[newest_].meta.global_step >= 0 ? &slots_[newest_] : nullptr;
}

void PeerReplica::Clear() {
  slots_[0] = Snapshot();
  slots_[1] = Snapshot();
  newest_ = -1;
  generation_ = 0;
  rank_ = -1;
  world_ = 0;
  replica_distance_ = 1;
}

}  // namespace retort::worker
