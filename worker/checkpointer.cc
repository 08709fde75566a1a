#include "worker/checkpointer.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "checkpoint/blob_file.h"
#include "checkpoint/shard_reader.h"
#include "common/backoff_policies.h"
#include "common/logging.h"
#include "common/retry.h"
#include "trainer/flat_parameters.h"
#include "trainer/model_buffers.h"
#include "trainer/models/model.h"
#include "trainer/sharded_adamw.h"

namespace retort::worker {

// What the writer thread writes: a copy of this rank's range, taken on the training thread.
struct ShardSnapshot {
  checkpoint::ShardHeader header;
  torch::Tensor params, exp_avg, exp_avg_sq;
};

namespace {

// Retries a coordinator RPC that may hit a restarting coordinator, until `deadline`.
template <typename F>
auto WithRetries(Deadline deadline, F&& call) -> decltype(call()) {
  Backoff backoff = backoff_policies::kCheckpointRpc.Make();
  return RetryUntil(deadline, backoff, IsRetryable, std::forward<F>(call));
}

// The student's buffer blob from a checkpoint (undefined when the student has no buffers or the
// checkpoint predates them); DATA_LOSS when the file is damaged or of the wrong size.
StatusOr<torch::Tensor> ReadBuffers(trainer::KdStep& kd_step, const std::string& dir,
                                    const v1::CheckpointManifest& manifest) {
  const int64_t words = trainer::ModelBufferWords(kd_step.student());
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

// On the writer's thread: sends `ack` (an ack with its error set: this member's shard of that
// checkpoint failed); a refusal is logged.
void SendFailureAck(CoordinatorClient* client, const v1::AckCheckpointRequest& ack) {
  auto acked = client->AckCheckpoint(ack);
  if (!acked.ok())
    LOG_WARN("trainer") << "checkpoint " << ack.checkpoint_id()
                        << " ack refused: " << acked.status();
}

// Writes `shard` (and rank 0's `buffers`) into `dir`; the files go into `ack`, or the error.
void WriteShardFiles(const ShardSnapshot& shard, const torch::Tensor& buffers,
                     const std::string& dir, v1::AckCheckpointRequest* ack) {
  const auto t0 = std::chrono::steady_clock::now();
  checkpoint::ShardView view;
  view.header = shard.header;
  view.params = shard.params.data_ptr<float>();
  view.exp_avg = shard.exp_avg.data_ptr<float>();
  view.exp_avg_sq = shard.exp_avg_sq.data_ptr<float>();
  auto file = checkpoint::WriteShard(dir, view);
  if (file.ok() && buffers.defined()) {
    // The student's buffers are the same on every rank at a step boundary: rank 0 writes them.
    auto written = checkpoint::WriteBlobFile(
        dir, checkpoint::kModelBuffersFile, checkpoint::kModelBuffersKind, 0,
        buffers.data_ptr<float>(), static_cast<size_t>(buffers.numel()) * sizeof(float));
    if (written.ok())
      *ack->add_files() = *written;
    else
      file = written.status();
  }
  const std::string name = "checkpoint " + std::to_string(ack->checkpoint_id());
  if (!file.ok()) {
    ack->set_error(file.status().ToString());
    LOG_WARN("trainer") << name << " failed on this worker: " << ack->error();
    return;
  }
  *ack->add_files() = *file;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  LOG_INFO("trainer") << name << " at step " << shard.header.global_step << ": wrote "
                      << file->size_bytes() << " bytes in " << seconds << " s to " << dir << "/"
                      << file->path();
}

}  // namespace

Checkpointer::Checkpointer(CoordinatorClient* client, int64_t every_steps, uint64_t seed,
                           PausePoints* pause_points)
    : client_(client), every_steps_(every_steps), seed_(seed), pause_points_(pause_points) {}

void Checkpointer::AckFailed(v1::AckCheckpointRequest ack, const std::string& error) {
  ack.set_error(error);
  LOG_WARN("trainer") << "checkpoint " << ack.checkpoint_id()
                      << " failed on this worker: " << error;
  const bool queued = writer_.Submit([client = client_, ack] { SendFailureAck(client, ack); },
                                     ShardWriter::TaskKind::kMessage);
  if (!queued)
    LOG_WARN("trainer") << "checkpoint " << ack.checkpoint_id() << ": its failure is not told ("
                        << writer_.pending() << " checkpoint tasks queued); the coordinator "
                        << "aborts it with the next generation";
}

bool Checkpointer::WriteIfDue(const PendingCheckpoint& pending, const CheckpointSource& source) {
  const int64_t at = source.meta.global_step;
  // The coordinator names the periodic multiples too: one at a step this worker already began
  // on its own is that same checkpoint, not a new one it missed.
  if (pending.id != 0 && pending.step == last_periodic_step_) last_handled_ = pending.id;
  const bool named = pending.id != 0 && pending.id != last_handled_ && pending.step <= at;
  const bool periodic = every_steps_ > 0 && at % every_steps_ == 0 && at != last_periodic_step_;
  if (!named && !periodic) return false;
  if (periodic) last_periodic_step_ = at;
  if (named) last_handled_ = pending.id;
  const Assignment& a = *source.assignment;
  v1::AckCheckpointRequest ack;
  ack.set_member_id(a.member_id);
  ack.set_generation(a.generation.number());
  if (named && pending.step < at) {
    ack.set_checkpoint_id(pending.id);
    AckFailed(ack, "checkpoint " + std::to_string(pending.id) + " was named for step " +
                       std::to_string(pending.step) +
                       ", which this worker had already passed (step " + std::to_string(at) + ")");
    if (!periodic) return true;
  }
  v1::BeginCheckpointRequest begin;
  begin.set_member_id(a.member_id);
  begin.set_generation(a.generation.number());
  begin.set_step(at);
  // Snapshot the state right after this step (the live optimizer range): a memory copy, so the
  // next step may run while the writer thread begins the checkpoint with the coordinator,
  // writes it and acks it. (Beginning it here made every step at a checkpoint wait on the
  // coordinator: a paused coordinator stalled training for the RPC's whole deadline.)
  trainer::KdStep& step = *source.kd_step;
  const auto& range = step.optimizer().range();
  std::shared_ptr<ShardSnapshot> shard = SnapshotBuffer(range.count);
  shard->params.copy_(step.flat().params().slice(0, range.offset, range.end()));
  shard->exp_avg.copy_(step.optimizer().exp_avg());
  shard->exp_avg_sq.copy_(step.optimizer().exp_avg_sq());
  checkpoint::ShardHeader& h = shard->header;
  h.rank = source.rank;
  h.world_size = source.world_size;
  h.generation = a.generation.number();
  h.seed = seed_;
  h.global_step = source.meta.global_step;
  h.optimizer_step = source.meta.optimizer_step;
  h.epoch = source.meta.epoch;
  h.step_in_epoch = source.meta.step_in_epoch;
  h.total_elements = step.flat().numel();
  h.range_offset = range.offset;
  h.range_count = range.count;
  torch::Tensor buffers;  // rank 0 only, for students with buffers (model_buffers.h)
  if (source.rank == 0 && trainer::ModelBufferWords(step.student()) > 0)
    buffers = trainer::PackModelBuffers(step.student());
  // Test fault injection (pause_points.h): on the writer's thread, the shard on disk, no ack yet.
  auto pause = [pauses = pause_points_, at, rank = source.rank](uint64_t id) {
    if (pauses)
      pauses->Reach(kPauseCheckpointWrite, "checkpoint " + std::to_string(id) + " at step " +
                                               std::to_string(at) + ", rank " +
                                               std::to_string(rank));
  };
  const bool queued =
      writer_.Submit([shard, begin, ack, at, client = client_, buffers, pause]() mutable {
        auto started = client->BeginCheckpoint(begin);
        if (!started.ok()) {
          // The coordinator aborts it (new generation) or never started it.
          LOG_WARN("trainer") << "checkpoint at step " << at
                              << " not written: " << started.status();
          return;
        }
        const uint64_t id = started->checkpoint_id();
        ack.set_checkpoint_id(id);
        WriteShardFiles(*shard, buffers, started->dir(), &ack);
        shard.reset();  // free the snapshot before the ack round trip
        pause(id);
        auto acked = client->AckCheckpoint(ack);
        if (!acked.ok())
          LOG_WARN("trainer") << "checkpoint " << id << " ack refused: " << acked.status();
        else if (acked->committed())
          LOG_INFO("trainer") << "checkpoint " << id << " committed at step " << at;
      });
  if (queued) return true;
  const std::string why = "the shard writer is still busy with " +
                          std::to_string(writer_.pending()) + " earlier checkpoint task(s)";
  if (named) {
    ack.set_checkpoint_id(pending.id);
    AckFailed(ack, why + "; checkpoint " + std::to_string(pending.id) + " at step " +
                       std::to_string(at) + " skipped");
    return true;
  }
  // A periodic one has no id until it is begun: begin it and say it failed, so the others'
  // shards do not wait for this one's (off this thread too).
  const bool told = writer_.Submit(
      [client = client_, begin, ack, at, why]() mutable {
        auto started = client->BeginCheckpoint(begin);
        if (!started.ok()) return;
        ack.set_checkpoint_id(started->checkpoint_id());
        ack.set_error(why + "; checkpoint " + std::to_string(started->checkpoint_id()) +
                      " at step " + std::to_string(at) + " skipped");
        LOG_WARN("trainer") << "checkpoint " << ack.checkpoint_id()
                            << " failed on this worker: " << ack.error();
        SendFailureAck(client, ack);
      },
      ShardWriter::TaskKind::kMessage);
  if (!told)
    LOG_WARN("trainer") << "checkpoint at step " << at << " skipped: " << why
                        << ", and its failure is not told";
  return true;
}

std::shared_ptr<ShardSnapshot> Checkpointer::SnapshotBuffer(int64_t count) {
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

std::vector<uint64_t> Checkpointer::ListCommitted(const std::string& member_id, Deadline deadline) {
  v1::GetCheckpointRequest req;
  req.set_member_id(member_id);
  auto latest = WithRetries(deadline, [&] { return client_->GetCheckpoint(req); });
  if (!latest.ok()) {
    LOG_WARN("trainer") << "cannot list checkpoints: " << latest.status();
    return {};
  }
  if (!latest->found() && latest->committed_checkpoints_size() == 0) return {};
  // The list, even when the newest manifest is unreadable: an older one may be usable.
  std::vector<uint64_t> ids(latest->committed_checkpoints().begin(),
                            latest->committed_checkpoints().end());
  if (ids.empty()) ids.push_back(latest->manifest().checkpoint_id());
  std::reverse(ids.begin(), ids.end());  // newest first
  if (ids.size() > static_cast<size_t>(kMaxCandidates)) ids.resize(kMaxCandidates);
  return ids;
}

StatusOr<CheckpointRange> Checkpointer::ReadOwnRange(const std::string& member_id, uint64_t id,
                                                     trainer::KdStep& kd_step, bool with_buffers,
                                                     torch::Tensor& params, torch::Tensor& exp_avg,
                                                     torch::Tensor& exp_avg_sq, Deadline deadline) {
  v1::GetCheckpointRequest req;
  req.set_member_id(member_id);
  req.set_checkpoint_id(id);
  RETORT_ASSIGN_OR_RETURN(v1::GetCheckpointResponse got,
                          WithRetries(deadline, [&] { return client_->GetCheckpoint(req); }));
  const std::string name = "checkpoint " + std::to_string(id);
  if (!got.found()) return NotFoundError(name + " has no manifest");
  const int64_t n = kd_step.flat().numel();
  if (got.manifest().plan().total_elements() != n)
    return FailedPreconditionError(name + " holds " +
                                   std::to_string(got.manifest().plan().total_elements()) +
                                   " parameters; this student has " + std::to_string(n));
  const auto& range = kd_step.optimizer().range();
  CheckpointRange read;
  RETORT_ASSIGN_OR_RETURN(
      read.header, checkpoint::ReadRangeInto(got.dir(), got.manifest(), range.offset, range.count,
                                             {params.data_ptr<float>(), exp_avg.data_ptr<float>(),
                                              exp_avg_sq.data_ptr<float>()}));
  if (with_buffers) {
    RETORT_ASSIGN_OR_RETURN(read.buffers, ReadBuffers(kd_step, got.dir(), got.manifest()));
  }
  read.written_by = got.manifest().world_size();
  return read;
}

}  // namespace retort::worker
