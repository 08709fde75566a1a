// TrainingSession's side of coordinated checkpoints: writing this rank's shard at the step the
// coordinator named, and loading the newest readable committed checkpoint at any world size.
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "checkpoint/blob_file.h"
#include "checkpoint/shard_file.h"
#include "checkpoint/shard_reader.h"
#include "common/backoff_policies.h"
#include "common/logging.h"
#include "common/retry.h"
#include "trainer/flat_parameters.h"
#include "trainer/model_buffers.h"
#include "trainer/models/model.h"
#include "trainer/sharded_adamw.h"
#include "worker/training_session.h"

namespace retort::worker {

// What the writer thread writes: a copy of this rank's range, taken on the training thread.
struct ShardSnapshot {
  checkpoint::ShardHeader header;
  torch::Tensor params, exp_avg, exp_avg_sq;
};

namespace {

constexpr int kMaxCheckpointCandidates = 16;

// Retries a coordinator RPC that may hit a restarting coordinator, until `deadline`.
template <typename F>
auto WithRetries(Deadline deadline, F&& call) -> decltype(call()) {
  Backoff backoff = backoff_policies::kCheckpointRpc.Make();
  return RetryUntil(deadline, backoff, IsRetryable, std::forward<F>(call));
}

}  // namespace

void TrainingSession::WriteCheckpointIfDue(const Assignment& a) {
  const PendingCheckpoint pending = mailbox_.pending_checkpoint();
  uint64_t id = pending.id;
  const int64_t step = pending.step;
  // Due: the checkpoint the coordinator named (heard of by heartbeat), or a multiple of
  // checkpoint.every_steps, which every member begins on its own so that no multiple depends on
  // hearing of it in time.
  const int64_t every = job_.checkpoint().every_steps();
  const bool named = id != 0 && id != last_checkpoint_handled_ && step <= global_step_;
  const bool periodic =
      every > 0 && global_step_ % every == 0 && global_step_ != last_periodic_checkpoint_step_;
  if (!named && !periodic) return;
  if (periodic) last_periodic_checkpoint_step_ = global_step_;
  v1::AckCheckpointRequest ack;
  ack.set_member_id(a.member_id);
  ack.set_generation(a.generation.number());
  if (named && step < global_step_) {
    last_checkpoint_handled_ = id;
    ack.set_checkpoint_id(id);
    ack.set_error("checkpoint " + std::to_string(id) + " was named for step " +
                  std::to_string(step) + ", which this worker had already passed (step " +
                  std::to_string(global_step_) + ")");
    LOG_WARN("trainer") << "checkpoint " << id << " failed on this worker: " << ack.error();
    auto acked = client_->AckCheckpoint(ack);
    if (!acked.ok())
      LOG_WARN("trainer") << "checkpoint " << id << " ack refused: " << acked.status();
    if (!periodic) return;
  }
  v1::BeginCheckpointRequest begin;
  begin.set_member_id(a.member_id);
  begin.set_generation(a.generation.number());
  begin.set_step(global_step_);
  auto started = client_->BeginCheckpoint(begin);
  if (!started.ok()) {
    LOG_WARN("trainer") << "checkpoint at step " << global_step_
                        << " not written: " << started.status();
    return;  // the coordinator aborts it (new generation) or it times out there
  }
  id = started->checkpoint_id();
  last_checkpoint_handled_ = id;
  ack.set_checkpoint_id(id);
  // Snapshot the state right after this step (the live optimizer range): a memory copy, so
  // the next step may run while the writer thread writes it.
  const auto& range = kd_step_->optimizer().range();
  std::shared_ptr<ShardSnapshot> shard = SnapshotBuffer(range.count);
  shard->params.copy_(kd_step_->flat().params().slice(0, range.offset, range.end()));
  shard->exp_avg.copy_(kd_step_->optimizer().exp_avg());
  shard->exp_avg_sq.copy_(kd_step_->optimizer().exp_avg_sq());
  const StateMeta meta = CurrentMeta();
  checkpoint::ShardHeader& h = shard->header;
  h.rank = comm_->rank();
  h.world_size = comm_->size();
  h.generation = a.generation.number();
  h.seed = job_.seed();
  h.global_step = meta.global_step;
  h.optimizer_step = meta.optimizer_step;
  h.epoch = meta.epoch;
  h.step_in_epoch = meta.step_in_epoch;
  h.total_elements = kd_step_->flat().numel();
  h.range_offset = range.offset;
  h.range_count = range.count;
  const std::string dir = started->dir();
  const int64_t at = global_step_;
  CoordinatorClient* client = client_;
  torch::Tensor buffers;  // rank 0 only, for students with buffers (model_buffers.h)
  if (comm_->rank() == 0 && trainer::ModelBufferWords(kd_step_->student()) > 0)
    buffers = trainer::PackModelBuffers(kd_step_->student());
  // Test fault injection (pause_points.h): on the writer's thread, the shard on disk, no ack yet.
  auto pause = [pauses = options_.pause_points, what = "checkpoint " + std::to_string(id) +
                                                       " at step " + std::to_string(at) +
                                                       ", rank " + std::to_string(comm_->rank())] {
    if (pauses) pauses->Reach(kPauseCheckpointWrite, what);
  };
  bool queued = shard_writer_.Submit([shard, dir, ack, id, at, client, buffers, pause]() mutable {
    const auto t0 = std::chrono::steady_clock::now();
    checkpoint::ShardView view;
    view.header = shard->header;
    view.params = shard->params.data_ptr<float>();
    view.exp_avg = shard->exp_avg.data_ptr<float>();
    view.exp_avg_sq = shard->exp_avg_sq.data_ptr<float>();
    auto file = checkpoint::WriteShard(dir, view);
    if (file.ok() && buffers.defined()) {
      // The student's buffers are the same on every rank at a step boundary: rank 0 writes them.
      auto written = checkpoint::WriteBlobFile(
          dir, checkpoint::kModelBuffersFile, checkpoint::kModelBuffersKind, 0,
          buffers.data_ptr<float>(), static_cast<size_t>(buffers.numel()) * sizeof(float));
      if (written.ok())
        *ack.add_files() = *written;
      else
        file = written.status();
    }
    if (file.ok()) {
      *ack.add_files() = *file;
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      LOG_INFO("trainer") << "checkpoint " << id << " at step " << at << ": wrote "
                          << file->size_bytes() << " bytes in " << seconds << " s to " << dir << "/"
                          << file->path();
    } else {
      ack.set_error(file.status().ToString());
      LOG_WARN("trainer") << "checkpoint " << id << " failed on this worker: " << ack.error();
    }
    shard.reset();  // free the snapshot before the ack round trip
    pause();
    auto acked = client->AckCheckpoint(ack);
    if (!acked.ok())
      LOG_WARN("trainer") << "checkpoint " << id << " ack refused: " << acked.status();
    else if (acked->committed())
      LOG_INFO("trainer") << "checkpoint " << id << " committed at step " << at;
  });
  if (!queued) {
    ack.set_error("the shard writer is still busy with " + std::to_string(shard_writer_.pending()) +
                  " earlier checkpoint(s); checkpoint " + std::to_string(id) + " at step " +
                  std::to_string(at) + " skipped");
    LOG_WARN("trainer") << ack.error();
    auto acked = client_->AckCheckpoint(ack);
    if (!acked.ok())
      LOG_WARN("trainer") << "checkpoint " << id << " ack refused: " << acked.status();
  }
}

StatusOr<std::vector<uint64_t>> TrainingSession::AgreeOnCheckpoints(const Assignment& a) {
  // [count, ids...] as int64, broadcast from rank 0 (raw words travel as float32 pairs).
  std::vector<int64_t> table(1 + kMaxCheckpointCandidates, 0);
  if (comm_->rank() == 0) {
    v1::GetCheckpointRequest req;
    req.set_member_id(a.member_id);
    auto latest = WithRetries(Deadline::AfterMs(options_.comm_timeout_ms / 2),
                              [&] { return client_->GetCheckpoint(req); });
    if (!latest.ok()) {
      LOG_WARN("trainer") << "cannot list checkpoints: " << latest.status();
    } else if (latest->found() || latest->committed_checkpoints_size() > 0) {
      // The list, even when the newest manifest is unreadable: an older one may be usable.
      std::vector<uint64_t> ids(latest->committed_checkpoints().begin(),
                                latest->committed_checkpoints().end());
      if (ids.empty()) ids.push_back(latest->manifest().checkpoint_id());
      std::reverse(ids.begin(), ids.end());  // newest first
      for (size_t i = 0; i < ids.size() && i < kMaxCheckpointCandidates; ++i) {
        table[1 + i] = static_cast<int64_t>(ids[i]);
        table[0] = static_cast<int64_t>(i + 1);
      }
    }
  }
  RETORT_RETURN_IF_ERROR(Await(
      comm_->Broadcast({table.data(), table.size() * 2, collectives::DataType::kFloat32}, 0)));
  std::vector<uint64_t> ids;
  for (int64_t i = 0; i < table[0]; ++i) ids.push_back(static_cast<uint64_t>(table[1 + i]));
  return ids;
}

std::shared_ptr<ShardSnapshot> TrainingSession::SnapshotBuffer(int64_t count) {
  // A buffer only this pool still holds is free: the writer dropped its reference.
  for (auto& s : snapshot_pool_) {
    if (s.use_count() == 1 && s->params.numel() == count) {
      // Pairs with the writer's release of its reference: its reads of the buffer are done.
      std::atomic_thread_fence(std::memory_order_acquire);
      return s;
    }
  }
  auto s = std::make_shared<ShardSnapshot>();
  s->params = torch::empty({count});
  s->exp_avg = torch::empty({count});
  s->exp_avg_sq = torch::empty({count});
  // Replace a free buffer of another size (a new generation's range) before growing the pool.
  for (auto& old : snapshot_pool_)
    if (old.use_count() == 1) return old = s;
  snapshot_pool_.push_back(s);
  return s;
}

StatusOr<torch::Tensor> TrainingSession::ReadCheckpointBuffers(
    const std::string& dir, const v1::CheckpointManifest& manifest) {
  const int64_t words = trainer::ModelBufferWords(kd_step_->student());
  if (words == 0) return torch::Tensor();
  const v1::CheckpointFile* file =
      checkpoint::FindFileOfKind(manifest, checkpoint::kModelBuffersKind);
  if (!file) {
    LOG_WARN("trainer") << "checkpoint " << manifest.checkpoint_id()
                        << " holds no student buffers (written before buffers were "
                           "checkpointed): they keep their initial values";
    return torch::Tensor();
  }
  RETORT_ASSIGN_OR_RETURN(std::string bytes, checkpoint::ReadBlobFile(dir, *file));
  if (static_cast<int64_t>(bytes.size()) != words * static_cast<int64_t>(sizeof(float)))
    return DataLossError("checkpoint " + std::to_string(manifest.checkpoint_id()) + ": " +
                         file->path() + " holds " + std::to_string(bytes.size()) +
                         " bytes of buffers; this student's buffers take " +
                         std::to_string(words * sizeof(float)));
  torch::Tensor blob = torch::empty({words}, torch::kFloat);
  std::memcpy(blob.data_ptr<float>(), bytes.data(), bytes.size());
  return blob;
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
    Status mine;
    checkpoint::ShardHeader header;
    torch::Tensor buffers;  // rank 0: the checkpoint's student buffers, when it has them
    v1::GetCheckpointRequest req;
    req.set_member_id(a.member_id);
    req.set_checkpoint_id(id);
    auto got = WithRetries(Deadline::AfterMs(options_.comm_timeout_ms / 2),
                           [&] { return client_->GetCheckpoint(req); });
    if (!got.ok()) {
      mine = got.status();
    } else if (!got->found()) {
      mine = NotFoundError("checkpoint " + std::to_string(id) + " has no manifest");
    } else if (got->manifest().plan().total_elements() != n) {
      mine = FailedPreconditionError("checkpoint " + std::to_string(id) + " holds " +
                                     std::to_string(got->manifest().plan().total_elements()) +
                                     " parameters; this student has " + std::to_string(n));
    } else {
      auto read = checkpoint::ReadRangeInto(
          got->dir(), got->manifest(), range.offset, range.count,
          {own_p.data_ptr<float>(), own_m.data_ptr<float>(), own_v.data_ptr<float>()});
      if (read.ok())
        header = *read;
      else
        mine = read.status();
      if (mine.ok() && comm_->rank() == 0) {
        auto blob = ReadCheckpointBuffers(got->dir(), got->manifest());
        if (blob.ok())
          buffers = *blob;
        else
          mine = blob.status();
      }
    }
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
    RETORT_RETURN_IF_ERROR(ShareStudentBuffers(
        0, buffers.defined() ? buffers : trainer::PackModelBuffers(kd_step_->student())));
    StateMeta meta{header.global_step, header.optimizer_step, header.epoch, header.step_in_epoch};
    RETORT_RETURN_IF_ERROR(InstallState(meta, p, own_m, own_v));
    LOG_INFO("trainer") << "resumed from checkpoint " << id << " at step " << meta.global_step
                        << " (written by " << got->manifest().world_size() << " rank(s), read by "
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
