// PeerReplica: in-memory copies of the ZeRO-1 optimizer state that survive the loss of any one
// rank, or of one whole node. After a step completes, each rank snapshots its own range of the
// flat parameters and its AdamW moments, and the range of its "predecessor", the rank
// `replica_distance` places before it in the ring (ReplicaDistance in recovery_plan.h: on
// another node whenever the layout allows): the predecessor's parameters come from the
// (replicated) flat buffer, its moments over the data plane (each rank sends its moments to
// rank + distance and receives rank - distance's). The two newest snapshots are kept: ranks can be
// at most one snapshot apart when a peer dies, so together the survivors always hold a common step.
//
// A snapshot belongs to the generation (and rank, plan) it was taken in. A capture in a new
// generation replaces the old generation's snapshots only once it succeeded, so a failure
// while the new generation starts still leaves the old ones usable.
//
// Threading: training thread only. Owns its tensors (CPU, float32).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "collectives/communicator.h"
#include "common/status.h"
#include "trainer/shard_plan.h"
#include "worker/recovery_plan.h"

namespace retort::worker {

class PeerReplica {
 public:
  struct Snapshot {
    StateMeta meta;  // meta.global_step < 0: empty
    trainer::ShardRange own, predecessor;
    torch::Tensor own_params, own_exp_avg, own_exp_avg_sq;
    torch::Tensor predecessor_params, predecessor_exp_avg, predecessor_exp_avg_sq;
    // The student's buffers (trainer/model_buffers.h blob; empty when it has none). The same on
    // every rank at a step boundary, so each snapshot holds the whole blob.
    torch::Tensor buffers;
  };

  // Snapshots the state after a completed step. `flat_params` is the whole parameter buffer;
  // `exp_avg`/`exp_avg_sq` cover plan.ranges[comm.rank()]; `buffers` is the student's buffer
  // blob (may be undefined when it has none). `replica_distance` (>= 1, the same on every rank
  // of the generation) picks the predecessor. Exchanges moments with the ranks that far away
  // (every rank of the generation must call it at the same step). On error the new snapshot is
  // dropped and the older ones are kept.
  Status Capture(collectives::Communicator& comm, const trainer::ShardPlan& plan,
                 const torch::Tensor& flat_params, const torch::Tensor& exp_avg,
                 const torch::Tensor& exp_avg_sq, const torch::Tensor& buffers,
                 const StateMeta& meta, int replica_distance, int64_t timeout_ms);

  // Fills old_generation/old_rank/old_world/old_replica_distance and snapshot[] of `d`.
  void Describe(StateDescriptor* d) const;
  // The snapshot at `global_step`, or null.
  const Snapshot* At(int64_t global_step) const;
  // The newest snapshot, or null.
  const Snapshot* Latest() const;
  uint64_t generation() const { return generation_; }
  void Clear();

 private:
  uint64_t generation_ = 0;
  int rank_ = -1;
  int world_ = 0;
  int replica_distance_ = 1;
  Snapshot slots_[2];
  int newest_ = -1;  // index into slots_
};

}  // namespace retort::worker
