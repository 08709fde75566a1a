// TrainingSession's training state across generations: the agreed-switch save, the recovery
// plan's execution (full state, peer replicas, fresh start; the checkpoint path is in
// session_checkpoint.cc), the per-step replica snapshot and failure reports.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "common/logging.h"
#include "trainer/flat_parameters.h"
#include "trainer/model_buffers.h"
#include "trainer/models/model.h"
#include "trainer/sharded_adamw.h"
#include "worker/training_session.h"

namespace retort::worker {

Status TrainingSession::Await(const collectives::WorkPtr& work) const {
  return work->Wait(Deadline::AfterMs(options_.comm_timeout_ms));
}

StateMeta TrainingSession::CurrentMeta() const {
  return StateMeta{global_step_, kd_step_->optimizer().step(), position_.epoch, position_.step};
}

Status TrainingSession::RestoreState(const Assignment& a) {
  StateDescriptor mine;
  mine.full = saved_meta_;
  replica_.Describe(&mine);
  const int world = comm_->size();
  constexpr size_t kFields = StateDescriptor::kFields;
  std::vector<int64_t> packed(kFields), all(kFields * world);
  mine.Pack(packed.data());
  // Raw int64s travel as pairs of 32-bit words: AllGather only copies.
  const size_t words = kFields * 2;
  RETORT_RETURN_IF_ERROR(
      Await(comm_->AllGather({packed.data(), words, collectives::DataType::kFloat32},
                             {all.data(), words * world, collectives::DataType::kFloat32})));
  std::vector<StateDescriptor> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(StateDescriptor::Unpack(&all[r * kFields]));
  RecoveryPlan plan = PlanRecovery(ranks);
  LOG_INFO("trainer") << "generation " << a.generation.number() << " starts from "
                      << RecoveryKindName(plan.kind) << ": " << plan.reason;
  switch (plan.kind) {
    case RecoveryPlan::kFullState:
      RETORT_RETURN_IF_ERROR(RestoreFromFullState(plan));
      break;
    case RecoveryPlan::kReplicas:
      RETORT_RETURN_IF_ERROR(RestoreFromReplicas(plan));
      break;
    case RecoveryPlan::kFresh:  // a new job, or every worker restarted: resume from disk
    case RecoveryPlan::kCheckpoint: {
      RETORT_ASSIGN_OR_RETURN(bool loaded, RestoreFromCheckpoint(a));
      if (!loaded)
        RETORT_RETURN_IF_ERROR(RestoreFresh(
            plan.kind == RecoveryPlan::kFresh
                ? ""
                : "every in-memory copy of some optimizer range is lost and no checkpoint could "
                  "be loaded"));
      break;
    }
  }
  saved_meta_ = StateMeta();
  saved_params_ = saved_exp_avg_ = saved_exp_avg_sq_ = saved_buffers_ = torch::Tensor();
  // The new generation's first snapshot, so a failure before its first step loses nothing.
  return CaptureReplica();
}

Status TrainingSession::RestoreFresh(const std::string& why) {
  if (!why.empty())
    LOG_ERROR("trainer") << why << ": the job restarts from step 0 with its initial weights";
  // Every rank puts back the weights and buffers the job started from (kept since the step was
  // created; the optimizer of a reconfigured step starts empty).
  global_step_ = 0;
  position_ = {0, 0};
  replica_.Clear();
  kd_step_->flat().params().copy_(initial_params_);
  return trainer::UnpackModelBuffers(initial_buffers_.data_ptr<float>(), initial_buffers_.numel(),
                                     kd_step_->student());
}

Status TrainingSession::RestoreFromFullState(const RecoveryPlan& plan) {
  const int64_t n = kd_step_->flat().numel();
  torch::Tensor p = torch::empty({n}), m = torch::empty({n}), v = torch::empty({n});
  if (comm_->rank() == plan.source) {
    p.copy_(saved_params_);
    m.copy_(saved_exp_avg_);
    v.copy_(saved_exp_avg_sq_);
  }
  for (torch::Tensor* t : {&p, &m, &v})
    RETORT_RETURN_IF_ERROR(Await(comm_->Broadcast(
        {t->data_ptr<float>(), static_cast<size_t>(n), collectives::DataType::kFloat32},
        plan.source)));
  RETORT_RETURN_IF_ERROR(ShareStudentBuffers(plan.source, saved_buffers_));
  const auto& range = kd_step_->optimizer().range();
  return InstallState(plan.meta, p, m.slice(0, range.offset, range.end()),
                      v.slice(0, range.offset, range.end()));
}

Status TrainingSession::RestoreFromReplicas(const RecoveryPlan& plan) {
  // Each old range is contributed by exactly one rank into zeros, so the sum is exact.
  const int64_t n = kd_step_->flat().numel();
  torch::Tensor all = torch::zeros({3 * n});
  torch::Tensor p = all.slice(0, 0, n), m = all.slice(0, n, 2 * n), v = all.slice(0, 2 * n, 3 * n);
  const int rank = comm_->rank();
  const bool own = plan.contributes_own[rank], pred = plan.contributes_predecessor[rank];
  // Every contributor's snapshot holds the whole buffer blob; the first one shares it.
  int buffer_source = -1;
  for (int r = 0; r < comm_->size() && buffer_source < 0; ++r)
    if (plan.contributes_own[r] || plan.contributes_predecessor[r]) buffer_source = r;
  torch::Tensor snapshot_buffers;
  if (own || pred) {
    const PeerReplica::Snapshot* snap = replica_.At(plan.meta.global_step);
    if (!snap)
      return InternalError("the recovery plan needs this rank's snapshot at step " +
                           std::to_string(plan.meta.global_step) + ", which it does not hold");
    auto put = [&](const trainer::ShardRange& r, const torch::Tensor& sp, const torch::Tensor& sm,
                   const torch::Tensor& sv) {
      p.slice(0, r.offset, r.end()).copy_(sp);
      m.slice(0, r.offset, r.end()).copy_(sm);
      v.slice(0, r.offset, r.end()).copy_(sv);
    };
    if (own) put(snap->own, snap->own_params, snap->own_exp_avg, snap->own_exp_avg_sq);
    if (pred)
      put(snap->predecessor, snap->predecessor_params, snap->predecessor_exp_avg,
          snap->predecessor_exp_avg_sq);
    snapshot_buffers = snap->buffers;
  }
  RETORT_RETURN_IF_ERROR(Await(comm_->AllReduce(
      {all.data_ptr<float>(), static_cast<size_t>(3 * n), collectives::DataType::kFloat32},
      collectives::ReduceOp::kSum)));
  if (buffer_source >= 0)
    RETORT_RETURN_IF_ERROR(ShareStudentBuffers(buffer_source, snapshot_buffers));
  const auto& range = kd_step_->optimizer().range();
  return InstallState(plan.meta, p, m.slice(0, range.offset, range.end()),
                      v.slice(0, range.offset, range.end()));
}

Status TrainingSession::InstallState(const StateMeta& meta, const torch::Tensor& params,
                                     const torch::Tensor& own_exp_avg,
                                     const torch::Tensor& own_exp_avg_sq) {
  global_step_ = meta.global_step;
  position_ = {meta.epoch, meta.step_in_epoch};
  kd_step_->flat().params().copy_(params);
  const auto& range = kd_step_->optimizer().range();
  trainer::OptimizerShardState piece;
  piece.range = range;
  piece.step = meta.optimizer_step;
  piece.params = params.slice(0, range.offset, range.end()).clone();
  piece.exp_avg = own_exp_avg.clone();
  piece.exp_avg_sq = own_exp_avg_sq.clone();
  return kd_step_->optimizer().Import(piece);
}

Status TrainingSession::CaptureReplica() {
  return replica_.Capture(*comm_, kd_step_->plan(), kd_step_->flat().params(),
                          kd_step_->optimizer().exp_avg(), kd_step_->optimizer().exp_avg_sq(),
                          trainer::PackModelBuffers(kd_step_->student()), CurrentMeta(),
                          replica_distance_, options_.comm_timeout_ms);
}

Status TrainingSession::ShareStudentBuffers(int source, const torch::Tensor& blob_at_source) {
  trainer::Model& student = kd_step_->student();
  const int64_t words = trainer::ModelBufferWords(student);
  if (words == 0) return Status::Ok();
  const bool have = blob_at_source.defined() && blob_at_source.numel() == words;
  torch::Tensor blob = comm_->rank() == source && have ? blob_at_source.clone()
                                                       : torch::zeros({words}, torch::kFloat);
  RETORT_RETURN_IF_ERROR(Await(comm_->Broadcast(
      {blob.data_ptr<float>(), static_cast<size_t>(words), collectives::DataType::kFloat32},
      source)));
  if (comm_->rank() == source && !have)
    return InternalError("rank " + std::to_string(source) +
                         " was to share the student's buffers but holds none of the right size");
  return trainer::UnpackModelBuffers(blob.data_ptr<float>(), words, student);
}

void TrainingSession::ReportFailedPeers(const Assignment& a, const Status& error) {
  if (!comm_ || comm_->generation() != a.generation.number()) return;
  for (int r : comm_->FailedPeers()) {
    if (r < 0 || r >= a.generation.members_size()) continue;
    v1::PeerFailureReport report;
    report.set_member_id(a.member_id);
    report.set_generation(a.generation.number());
    report.set_failed_member_id(a.generation.members(r).member_id());
    report.set_failed_rank(r);
    report.set_detail(error.message().substr(0, 512));
    auto resp = client_->ReportPeerFailure(report);
    LOG_WARN("trainer") << "reported rank " << r << " (" << report.failed_member_id()
                        << ") as failed: "
                        << (resp.ok() ? (resp->evicted() ? "evicted" : "already gone")
                                      : resp.status().ToString());
  }
}

Status TrainingSession::SaveState() {
  const auto& plan = kd_step_->plan();
  std::vector<size_t> counts;
  for (const auto& r : plan.ranges) counts.push_back(static_cast<size_t>(r.count));
  const int64_t n = kd_step_->flat().numel();
  const auto& range = kd_step_->optimizer().range();
  torch::Tensor m = torch::empty({n}), v = torch::empty({n});
  for (auto [local, full] :
       {std::pair{kd_step_->optimizer().exp_avg(), &m}, {kd_step_->optimizer().exp_avg_sq(), &v}}) {
    torch::Tensor contiguous = local.to(torch::kCPU).contiguous();  // host buffers below
    RETORT_RETURN_IF_ERROR(Await(comm_->AllGatherV(
        {contiguous.data_ptr<float>(), static_cast<size_t>(range.count),
         collectives::DataType::kFloat32},
        {full->data_ptr<float>(), static_cast<size_t>(n), collectives::DataType::kFloat32},
        counts)));
  }
  saved_params_ = kd_step_->flat().params().clone();
  saved_buffers_ = trainer::PackModelBuffers(kd_step_->student());
  saved_exp_avg_ = m;
  saved_exp_avg_sq_ = v;
  saved_meta_ = CurrentMeta();
  return Status::Ok();
}

}  // namespace retort::worker
