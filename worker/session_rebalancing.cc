// Straggler rebalancing in the training session (elastic.straggler.rebalance): at every step
// boundary each rank sends its last step's samples and compute seconds in the boundary
// all-reduce (StepBoundaryExchange), every rank feeds the same sums to its BatchRebalancer,
// and rank 0 sends the proposal the window calls for, which every rank adopts from the same
// later step: the loader plans that step and the ones after with the new shares. The lead is
// the loader's prefetch depth, so no step already planned changes. Slices are weighted by
// their size (trainer/data/sampler.h): the loss is the even split's but for float
// reassociation. A BatchNorm student's batch statistics are per rank, so there its numbers
// follow the per-rank batch sizes, as they would with any uneven split (DESIGN.md).
#include <string>

#include "common/logging.h"
#include "worker/training_session.h"

namespace retort::worker {
namespace {

std::string Join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

}  // namespace

int64_t TrainingSession::NextGlobalStep() const {
  return loader_->sampler().GlobalStep(loader_->position());
}

void TrainingSession::WriteRebalancing(StepBoundaryExchange& exchange, int rank) {
  exchange.SetMeasurement(last_step_samples_, last_step_compute_seconds_);
  // Reported once: a boundary without a new step (paused) sends nothing.
  last_step_samples_ = last_step_compute_seconds_ = 0;
  if (rank != 0) return;
  if (auto p = rebalancer_->Propose()) {
    exchange.SetProposal(NextGlobalStep() + loader_->prefetch_depth(), p->shares);
    rebalance_reason_ = p->reason;
  }
}

Status TrainingSession::ApplyRebalancing(const StepBoundaryExchange& exchange, int rank) {
  // The measurements are of the step just completed.
  rebalancer_->Observe(NextGlobalStep() - 1, exchange.samples(), exchange.seconds());
  const auto proposal = exchange.proposal();
  if (!proposal) return Status::Ok();
  RETORT_RETURN_IF_ERROR(loader_->SetShares(proposal->from_step, proposal->shares));
  rebalancer_->Adopt(proposal->shares, proposal->from_step);
  if (rank == 0)
    LOG_INFO("trainer") << "batch shares from step " << proposal->from_step + 1 << ": "
                        << Join(proposal->shares) << " samples by rank (" << rebalance_reason_
                        << ")";
  return Status::Ok();
}

}  // namespace retort::worker
