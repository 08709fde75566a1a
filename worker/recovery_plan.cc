#include "worker/recovery_plan.h"

#include <algorithm>
#include <set>

#include "common/enum_names.h"

namespace retort::worker {
namespace {

void PackMeta(const StateMeta& m, int64_t* out) {
  out[0] = m.global_step;
  out[1] = m.optimizer_step;
  out[2] = m.epoch;
  out[3] = m.step_in_epoch;
}

StateMeta UnpackMeta(const int64_t* in) { return StateMeta{in[0], in[1], in[2], in[3]}; }

bool HasState(const StateDescriptor& d) {
  return d.full.global_step >= 0 || d.snapshot[0].global_step >= 0 ||
         d.snapshot[1].global_step >= 0;
}

const StateMeta* SnapshotAt(const StateDescriptor& d, int64_t step) {
  for (const auto& s : d.snapshot)
    if (s.global_step >= 0 && s.global_step == step) return &s;
  return nullptr;
}

// The replica plan for the ranks that last trained in `generation`, at the newest step whose
// every old range is held by some survivor; false when no step works.
bool PlanReplicas(const std::vector<StateDescriptor>& ranks, int64_t generation,
                  RecoveryPlan* plan) {
  std::vector<int> candidates;
  int64_t old_world = 0, distance = 0;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    if (ranks[r].old_generation != generation || !HasState(ranks[r])) continue;
    if (old_world != 0 &&
        (ranks[r].old_world != old_world || ranks[r].old_replica_distance != distance))
      return false;  // inconsistent
    old_world = ranks[r].old_world;
    distance = ranks[r].old_replica_distance;
    candidates.push_back(r);
  }
  if (candidates.empty() || old_world <= 0 || distance < 1) return false;
  std::set<int64_t, std::greater<>> steps;
  for (int r : candidates)
    for (const auto& s : ranks[r].snapshot)
      if (s.global_step >= 0) steps.insert(s.global_step);
  for (int64_t step : steps) {
    std::vector<bool> own(ranks.size(), false), pred(ranks.size(), false);
    const StateMeta* meta = nullptr;
    bool covered = true;
    for (int64_t range = 0; range < old_world && covered; ++range) {
      int owner = -1, holder = -1;
      for (int r : candidates) {
        if (!SnapshotAt(ranks[r], step)) continue;
        if (ranks[r].old_rank == range && owner < 0) owner = r;
        if (old_world > 1 && ranks[r].old_rank == (range + distance) % old_world && holder < 0)
          holder = r;
      }
      if (owner >= 0) {
        own[owner] = true;
        meta = SnapshotAt(ranks[owner], step);
      } else if (holder >= 0) {
        pred[holder] = true;
        meta = SnapshotAt(ranks[holder], step);
      } else {
        covered = false;
      }
    }
    if (!covered) continue;
    plan->kind = RecoveryPlan::kReplicas;
    plan->meta = *meta;
    plan->contributes_own = own;
    plan->contributes_predecessor = pred;
    plan->reason = "in-memory replicas of generation " + std::to_string(generation) +
                   " cover every optimizer range at step " + std::to_string(step);
    return true;
  }
  return false;
}

// The best complete copy of the state that generation `generation` left: a full state saved at
// an agreed switch, else replicas covering every range. False when there is none.
bool PlanGeneration(const std::vector<StateDescriptor>& ranks, int64_t generation,
                    RecoveryPlan* plan) {
  RecoveryPlan full;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const auto& d = ranks[r];
    if (d.old_generation != generation || d.full.global_step < 0) continue;
    if (full.source < 0 || d.full.global_step > full.meta.global_step) {
      full.source = r;
      full.meta = d.full;
    }
  }
  if (full.source >= 0) {
    full.kind = RecoveryPlan::kFullState;
    full.reason = "rank " + std::to_string(full.source) +
                  " saved the complete state at an agreed switch in generation " +
                  std::to_string(generation);
    *plan = full;
    return true;
  }
  return PlanReplicas(ranks, generation, plan);
}

}  // namespace

void StateDescriptor::Pack(int64_t* out) const {
  PackMeta(full, out);
  out[4] = old_generation;
  out[5] = old_rank;
  out[6] = old_world;
  PackMeta(snapshot[0], out + 7);
  PackMeta(snapshot[1], out + 11);
  out[15] = old_replica_distance;
}

StateDescriptor StateDescriptor::Unpack(const int64_t* in) {
  StateDescriptor d;
  d.full = UnpackMeta(in);
  d.old_generation = in[4];
  d.old_rank = in[5];
  d.old_world = in[6];
  d.snapshot[0] = UnpackMeta(in + 7);
  d.snapshot[1] = UnpackMeta(in + 11);
  d.old_replica_distance = in[15];
  return d;
}

RecoveryPlan PlanRecovery(const std::vector<StateDescriptor>& ranks) {
  RecoveryPlan plan;
  std::set<int64_t, std::greater<>> generations;
  for (const auto& d : ranks)
    if (HasState(d)) generations.insert(d.old_generation);
  if (generations.empty()) {
    plan.kind = RecoveryPlan::kFresh;
    plan.reason = "no rank holds training state";
    return plan;
  }
  // Every generation's complete copy is a state on the job's trajectory; the one at the
  // highest step wins, the newer generation on a tie. An older generation can only be ahead
  // when a newer one went back to a disk checkpoint (it formed without the members that held
  // the newer state, e.g. the first member to re-join a restarted coordinator): the survivors'
  // memory then wins over the disk.
  int64_t plan_generation = -1;
  for (int64_t g : generations) {  // newest first
    RecoveryPlan candidate;
    if (!PlanGeneration(ranks, g, &candidate)) continue;
    if (plan_generation < 0 || candidate.meta.global_step > plan.meta.global_step) {
      if (plan_generation >= 0)
        candidate.reason += ", ahead of generation " + std::to_string(plan_generation) +
                            "'s copy at step " + std::to_string(plan.meta.global_step);
      plan = candidate;
      plan_generation = g;
    }
  }
  if (plan_generation >= 0) return plan;
  plan = RecoveryPlan();
  plan.kind = RecoveryPlan::kCheckpoint;
  plan.reason = "the surviving in-memory replicas do not cover every optimizer range";
  return plan;
}

int ReplicaDistance(const std::vector<int>& node_of_rank) {
  const int world = static_cast<int>(node_of_rank.size());
  int best = 1, best_same_node = world + 1;
  for (int distance = 1; distance < world; ++distance) {
    int same_node = 0;
    for (int r = 0; r < world; ++r)
      same_node += node_of_rank[r] == node_of_rank[(r + distance) % world];
    if (same_node < best_same_node) {
      best = distance;
      best_same_node = same_node;
    }
    if (same_node == 0) break;
  }
  return best;
}

const char* RecoveryKindName(RecoveryPlan::Kind kind) {
  static constexpr NamedValue<RecoveryPlan::Kind> kNames[] = {
      {RecoveryPlan::kFresh, "fresh"},
      {RecoveryPlan::kFullState, "full-state"},
      {RecoveryPlan::kReplicas, "replicas"},
      {RecoveryPlan::kCheckpoint, "checkpoint"}};
  return NameIn(kNames, kind, "?");
}

}  // namespace retort::worker
