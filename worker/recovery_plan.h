// Recovery planning: when a generation starts, every rank describes the training state it holds
// (a StateDescriptor, all-gathered as raw int64s) and every rank runs PlanRecovery on the same
// table, so all agree without another round trip on where the state comes from:
//  - kFullState: some rank saved the complete state at an agreed switch (graceful membership
//    change: drain, SIGTERM, scale, a join); it broadcasts it.
//  - kReplicas: a peer failed. Every rank of the previous generation kept step-boundary
//    snapshots of its own optimizer range and of the range of the rank `replica_distance`
//    places before it in the ring, its "predecessor" (PeerReplica; ReplicaDistance puts that
//    rank on another node). The plan picks the newest step at which every range of the previous
//    generation is held by a survivor, and which survivor contributes which range.
//  - kCheckpoint: the replicas cannot cover every range (a rank and the holder of its replica
//    lost together, or every worker restarted): load the last committed disk checkpoint.
//  - kFresh: nobody holds state: start the job from its initial weights.
// Each generation's complete copy (full state, else replicas covering every range) is a state
// on the job's trajectory; the one at the highest step wins, the newest generation on a tie.
// So a fenced zombie's older copy never wins over the progress made without it, and survivors'
// memory wins over a newer generation that went back to a disk checkpoint without them.
//
// Pure logic, no torch and no communication: unit-tested on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace retort::worker {

// Training progress a state copy is at.
struct StateMeta {
  int64_t global_step = -1;  // -1: no such copy
  int64_t optimizer_step = 0;
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
};

struct StateDescriptor {
  // Complete parameters and moments saved at an agreed switch.
  StateMeta full;
  // The generation this rank last trained in (0: none), its rank and world size there.
  int64_t old_generation = 0;
  int64_t old_rank = -1;
  int64_t old_world = 0;
  // The two newest complete replica snapshots (either may be absent: global_step -1).
  StateMeta snapshot[2];
  // In the old generation, this rank held the replica of old rank
  // (old_rank - old_replica_distance) mod old_world.
  int64_t old_replica_distance = 1;

  static constexpr int kFields = 16;
  void Pack(int64_t* out) const;
  static StateDescriptor Unpack(const int64_t* in);
};

struct RecoveryPlan {
  enum Kind { kFresh, kFullState, kReplicas, kCheckpoint };
  Kind kind = kFresh;
  // The state every rank installs (kFullState, kReplicas).
  StateMeta meta;
  // kFullState: the rank that broadcasts.
  int source = -1;
  // kReplicas: per new rank, whether it contributes its own old range and/or the replica of its
  // old predecessor's range (at meta.global_step).
  std::vector<bool> contributes_own, contributes_predecessor;
  // Why this plan (for logs).
  std::string reason;
};

RecoveryPlan PlanRecovery(const std::vector<StateDescriptor>& ranks);

// How far along the ring (rank r's replica is held by rank (r + distance) mod world) the
// replicas of a generation go, given each rank's node (ranks node-major, as the coordinator
// numbers them). The smallest distance that puts every replica on another node than its range,
// so losing a whole node loses no range; when no distance does (one node, or a node holding
// more than half the ranks), the one leaving the fewest replicas on their own node. 1 when
// every rank is on its own node or the world has one rank.
int ReplicaDistance(const std::vector<int>& node_of_rank);

const char* RecoveryKindName(RecoveryPlan::Kind kind);

}  // namespace retort::worker
