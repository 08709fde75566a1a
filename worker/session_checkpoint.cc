// TrainingSession's side of restoring from a coordinated checkpoint at any world size: the
// ranks agree on the candidates and on the first one every rank can read (the reading itself,
// and all writing, is the Checkpointer's: checkpointer.h).
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "common/logging.h"
#include "trainer/flat_parameters.h"
#include "trainer/model_buffers.h"
#include "trainer/sharded_adamw.h"
#include "worker/training_session.h"

namespace retort::worker {

StatusOr<std::vector<uint64_t>> TrainingSession::AgreeOnCheckpoints(const Assignment& a) {
  // [count, ids...] as int64, broadcast from rank 0 (raw words travel as float32 pairs).
  std::vector<int64_t> table(1 + Checkpointer::kMaxCandidates, 0);
  if (comm_->rank() == 0) {
    const std::vector<uint64_t> ids =
        checkpointer_->ListCommitted(a.member_id, Deadline::AfterMs(options_.comm_timeout_ms / 2));
    table[0] = static_cast<int64_t>(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) table[1 + i] = static_cast<int64_t>(ids[i]);
  }
  RETORT_RETURN_IF_ERROR(Await(
      comm_->Broadcast({table.data(), table.size() * 2, collectives::DataType::kFloat32}, 0)));
  std::vector<uint64_t> ids;
  for (int64_t i = 0; i < table[0]; ++i) ids.push_back(static_cast<uint64_t>(table[1 + i]));
  return ids;
}

StatusOr<bool> TrainingSession::RestoreFromCheckpoint(const Assignment& a) {
  RETORT_ASSIGN_OR_RETURN(std::vector<uint64_t> ids, AgreeOnCheckpoints(a));
  const int64_t n = kd_step_->flat().numel();
  const auto& range = kd_step_->optimizer().range();
  torch::Tensor own_p = torch::empty({range.count}), own_m = torch::empty({range.count}),
                own_v = torch::empty({range.count});
  std::string rejected;
  for (uint64_t id : ids) {
    // Every rank reads its own new range; all agree to use the checkpoint only when every
    // rank could read (and verify) its part.
    StatusOr<CheckpointRange> read = checkpointer_->ReadOwnRange(
        a.member_id, id, *kd_step_, /*with_buffers=*/comm_->rank() == 0, own_p, own_m, own_v,
        Deadline::AfterMs(options_.comm_timeout_ms / 2));
    const Status mine = read.status();
    if (!mine.ok())
      LOG_ERROR("trainer") << "checkpoint " << id << " unusable on this rank: " << mine;
    float failures = mine.ok() ? 0.f : 1.f;
    RETORT_RETURN_IF_ERROR(Await(comm_->AllReduce({&failures, 1, collectives::DataType::kFloat32},
                                                  collectives::ReduceOp::kSum)));
    if (failures > 0) {
      LOG_WARN("trainer") << "checkpoint " << id << " could not be read by " << failures
                          << " rank(s); trying the previous one";
      rejected += "; checkpoint " + std::to_string(id) + ": unreadable on " +
                  std::to_string(static_cast<int>(failures)) + " rank(s)" +
                  (mine.ok() ? "" : " (here: " + mine.message().substr(0, 300) + ")");
      continue;
    }
    // Parameters are replicated: gather every rank's range.
    const auto& plan = kd_step_->plan();
    std::vector<size_t> counts;
    for (const auto& r : plan.ranges) counts.push_back(static_cast<size_t>(r.count));
    torch::Tensor p = torch::empty({n});
    RETORT_RETURN_IF_ERROR(Await(comm_->AllGatherV(
        {own_p.data_ptr<float>(), static_cast<size_t>(range.count),
         collectives::DataType::kFloat32},
        {p.data_ptr<float>(), static_cast<size_t>(n), collectives::DataType::kFloat32}, counts)));
    const torch::Tensor& buffers = read->buffers;
    RETORT_RETURN_IF_ERROR(ShareStudentBuffers(
        0, buffers.defined() ? buffers : trainer::PackModelBuffers(kd_step_->student())));
    const checkpoint::ShardHeader& header = read->header;
    StateMeta meta{header.global_step, header.optimizer_step, header.epoch, header.step_in_epoch};
    RETORT_RETURN_IF_ERROR(InstallState(meta, p, own_m, own_v));
    LOG_INFO("trainer") << "resumed from checkpoint " << id << " at step " << meta.global_step
                        << " (written by " << read->written_by << " rank(s), read by "
                        << comm_->size() << ")";
    return true;
  }
  if (!ids.empty())
    return DataLossError("the job has " + std::to_string(ids.size()) +
                         " committed checkpoint(s) and none can be read" + rejected +
                         "; refusing to start over from step 0 (the operator restarts the "
                         "coordinator with --restart-from-scratch to do that)");
  return false;
}

}  // namespace retort::worker
