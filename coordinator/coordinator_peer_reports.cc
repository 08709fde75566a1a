// Peer-failure reports (see coordinator.h for the threading contract). A report is evidence,
// not a command:
//  - Reporter and target are both in the current generation, and the report names it: a
//    report about an older or newer generation is ABORTED, one by or about a member outside it
//    FAILED_PRECONDITION.
//  - A member may send max_peer_reports_per_window reports per window, and its reports evict at
//    most one peer per generation (RESOURCE_EXHAUSTED beyond).
//  - A report cannot lose the job's newest in-memory state. Every rank keeps a replica of its
//    ring predecessor's optimizer range, so after a report evicted a member, that member's ring
//    neighbours hold the only copy of two ranges until the next generation has trained and
//    replicated again. Until then one report cannot evict them (FAILED_PRECONDITION): it takes
//    reports from two different members, or the neighbour's own silence (heartbeat deadline,
//    closed generation stream), which no other member can fake.
#include "common/logging.h"
#include "coordinator/coordinator.h"

namespace retort::coordinator {
namespace {

constexpr size_t kMaxDetailBytes = 4096;

}  // namespace

void Coordinator::ExpireSoleHoldersLocked() {
  const uint64_t current = generation_ ? generation_->number() : 0;
  const int64_t step = MaxMemberStepLocked();
  for (auto it = sole_holders_.begin(); it != sole_holders_.end();) {
    if (current > it->second.generation && step >= it->second.until_step)
      it = sole_holders_.erase(it);
    else
      ++it;
  }
}

void Coordinator::ProtectRingNeighboursLocked(const std::string& target) {
  const int world = generation_->members_size();
  if (world < 2) return;
  std::vector<std::string> by_rank(static_cast<size_t>(world));
  int target_rank = -1;
  for (const auto& m : generation_->members()) {
    if (m.rank() < 0 || m.rank() >= world) continue;
    by_rank[static_cast<size_t>(m.rank())] = m.member_id();
    if (m.member_id() == target) target_rank = m.rank();
  }
  if (target_rank < 0) return;
  // Replicas are taken every replicate_every_steps steps (0: every step); one more step covers
  // a replica still being captured when the heartbeat reported the step.
  const int64_t every = std::max<int64_t>(1, state_.job().checkpoint().replicate_every_steps());
  SoleHolder holder{generation_->number(), MaxMemberStepLocked() + every + 1};
  for (int delta : {-1, 1}) {
    const std::string& id = by_rank[static_cast<size_t>((target_rank + delta + world) % world)];
    if (!id.empty() && id != target && members_.count(id) > 0) sole_holders_[id] = holder;
  }
}

StatusOr<v1::PeerFailureResponse> Coordinator::ReportPeerFailure(const v1::PeerFailureReport& r) {
  if (r.detail().size() > kMaxDetailBytes)
    return InvalidArgumentError("detail: longer than 4096 characters");
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(r.member_id()));
  RETORT_RETURN_IF_ERROR(CheckGenerationLocked(r.generation(), "peer failure report"));
  RETORT_RETURN_IF_ERROR(CheckInGenerationLocked(r.member_id(), "peer failure report"));
  MemberRecord& reporter = members_.at(r.member_id());
  const auto now = clock_->Now();
  const bool new_window = reporter.reports_in_window == 0 ||
                          now - reporter.report_window_start >=
                              std::chrono::milliseconds(options_.peer_report_window_ms);
  if (!new_window && reporter.reports_in_window >= options_.max_peer_reports_per_window)
    return ResourceExhaustedError(
        r.member_id() + " sent " + std::to_string(reporter.reports_in_window) +
        " peer-failure reports within " + std::to_string(options_.peer_report_window_ms) +
        " ms (the limit); retry later");
  if (new_window) {
    reporter.report_window_start = now;
    reporter.reports_in_window = 0;
  }
  ++reporter.reports_in_window;  // every report that got this far counts against the rate

  std::string target = r.failed_member_id();
  if (target.empty()) {
    for (const auto& m : generation_->members())
      if (m.rank() == r.failed_rank()) target = m.member_id();
    if (target.empty())
      return InvalidArgumentError("failed_rank " + std::to_string(r.failed_rank()) +
                                  " is not in generation " + std::to_string(generation_->number()));
  }
  if (target == r.member_id()) return InvalidArgumentError("a member cannot report itself failed");
  RETORT_RETURN_IF_ERROR(CheckInGenerationLocked(target, "reported peer"));
  v1::PeerFailureResponse resp;
  if (members_.count(target) == 0) return resp;  // already gone
  const uint64_t current = generation_->number();
  if (reporter.report_evicted_generation == current)
    return ResourceExhaustedError(r.member_id() + " already had a peer evicted in generation " +
                                  std::to_string(current) +
                                  "; its other reports wait for the next generation");
  ExpireSoleHoldersLocked();
  if (sole_holders_.count(target) > 0) {
    if (reports_generation_ != current) {
      reports_against_.clear();
      reports_generation_ = current;
    }
    auto& reporters = reports_against_[target];
    reporters.insert(r.member_id());
    if (reporters.size() < 2)
      return FailedPreconditionError(
          target +
          " holds the only in-memory copy of part of the training state since its "
          "ring neighbour was evicted; one member's report cannot evict it (a second "
          "member's report, or its own missed heartbeats or closed stream, will)");
  }
  reporter.report_evicted_generation = current;
  ProtectRingNeighboursLocked(target);
  NoteLossLocked("peer_failure", true);
  RemoveMemberLocked(target, "member_evicted",
                     "reported failed by " + r.member_id() + ": " + r.detail());
  resp.set_evicted(true);
  return resp;
}

}  // namespace retort::coordinator
