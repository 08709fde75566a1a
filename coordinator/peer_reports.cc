#include "coordinator/peer_reports.h"

#include <algorithm>

namespace retort::coordinator {

Status PeerReports::Count(const std::string& reporter, Time now) {
  Reporter& r = reporters_[reporter];
  const bool new_window = r.in_window == 0 || now - r.window_start >= limits_.window;
  if (!new_window && r.in_window >= limits_.max_per_window)
    return ResourceExhaustedError(
        reporter + " sent " + std::to_string(r.in_window) + " peer-failure reports within " +
        std::to_string(limits_.window.count()) + " ms (the limit); retry later");
  if (new_window) {
    r.window_start = now;
    r.in_window = 0;
  }
  ++r.in_window;
  return Status::Ok();
}

Status PeerReports::Decide(const std::string& reporter, const std::string& target,
                           const Generation& g) {
  Reporter& r = reporters_[reporter];
  if (r.evicted_generation == g.number)
    return ResourceExhaustedError(reporter + " already had a peer evicted in generation " +
                                  std::to_string(g.number) +
                                  "; its other reports wait for the next generation");
  ExpireSoleHolders(g);
  if (sole_holders_.count(target) > 0) {
    if (reports_generation_ != g.number) {
      reports_against_.clear();
      reports_generation_ = g.number;
    }
    std::set<std::string>& reporters = reports_against_[target];
    reporters.insert(reporter);
    if (reporters.size() < 2)
      return FailedPreconditionError(
          target +
          " holds the only in-memory copy of part of the training state since its "
          "ring neighbour was evicted; one member's report cannot evict it (a second "
          "member's report, or its own missed heartbeats or closed stream, will)");
  }
  r.evicted_generation = g.number;
  ProtectRingNeighbours(target, g);
  return Status::Ok();
}

void PeerReports::Forget(const std::string& member) {
  reporters_.erase(member);
  sole_holders_.erase(member);
}

void PeerReports::ExpireSoleHolders(const Generation& g) {
  std::erase_if(sole_holders_, [&](const auto& entry) {
    return g.number > entry.second.generation && g.step >= entry.second.until_step;
  });
}

void PeerReports::ProtectRingNeighbours(const std::string& target, const Generation& g) {
  const int world = static_cast<int>(g.by_rank.size());
  if (world < 2) return;
  const auto found = std::find(g.by_rank.begin(), g.by_rank.end(), target);
  if (found == g.by_rank.end()) return;
  const int target_rank = static_cast<int>(found - g.by_rank.begin());
  // Replicas are taken every replicate_every_steps steps (0: every step); one more step covers
  // a replica still being captured when the heartbeat reported the step.
  const SoleHolder holder{g.number, g.step + std::max<int64_t>(1, g.replicate_every_steps) + 1};
  for (int delta : {-1, 1}) {
    const std::string& id = g.by_rank[static_cast<size_t>((target_rank + delta + world) % world)];
    if (!id.empty() && id != target) sole_holders_[id] = holder;
  }
}

}  // namespace retort::coordinator
