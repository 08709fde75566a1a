// Peer-failure reports: the Coordinator checks who reports whom and applies the eviction;
// PeerReports (peer_reports.h) holds the rules that decide it (rate, one eviction per reporter
// per generation, sole holders need two reporters). See coordinator.h for the threading contract.
#include "coordinator/coordinator.h"

namespace retort::coordinator {
namespace {

constexpr size_t kMaxDetailBytes = 4096;

}  // namespace

StatusOr<v1::PeerFailureResponse> Coordinator::ReportPeerFailure(const v1::PeerFailureReport& r) {
  if (r.detail().size() > kMaxDetailBytes)
    return InvalidArgumentError("detail: longer than 4096 characters");
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(r.member_id()));
  RETORT_RETURN_IF_ERROR(CheckGenerationLocked(r.generation(), "peer failure report"));
  RETORT_RETURN_IF_ERROR(CheckInGenerationLocked(r.member_id(), "peer failure report"));
  // Every report that got this far counts against the reporter's rate.
  RETORT_RETURN_IF_ERROR(peer_reports_.Count(r.member_id(), clock_->Now()));

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

  PeerReports::Generation g{
      .number = generation_->number(),
      .by_rank = std::vector<std::string>(static_cast<size_t>(generation_->members_size())),
      .step = MaxMemberStepLocked(),
      .replicate_every_steps = state_.job().checkpoint().replicate_every_steps()};
  for (const auto& m : generation_->members())
    if (m.rank() >= 0 && m.rank() < generation_->members_size() && members_.count(m.member_id()))
      g.by_rank[static_cast<size_t>(m.rank())] = m.member_id();
  RETORT_RETURN_IF_ERROR(peer_reports_.Decide(r.member_id(), target, g));
  NoteLossLocked("peer_failure", true);
  RemoveMemberLocked(target, "member_evicted",
                     "reported failed by " + r.member_id() + ": " + r.detail());
  resp.set_evicted(true);
  return resp;
}

}  // namespace retort::coordinator
