// Checkpointer: a worker's side of coordinated checkpoints (the coordinator names them, collects
// the acks and commits the manifest: coordinator_checkpoint.cc).
//   Writing: at the step the coordinator named, or at a multiple of checkpoint.every_steps
//   (which every member begins on its own, so no multiple depends on hearing of it in time),
//   snapshot this rank's optimizer range (a memory copy on the training thread, into buffers
//   reused across checkpoints) and queue the rest on a background ShardWriter: begin the
//   checkpoint with the coordinator, write the shard, ack it. Training goes on, and no step
//   waits on the coordinator (a paused or restarting one costs the checkpoint, not the step).
//   Failures are logged and acked as errors from the writer's thread (the coordinator then
//   aborts that checkpoint).
//   Reading: list the committed checkpoints and read this rank's range of one, verified.
//
// Threading: every method on the training thread; queued tasks (begin, write, ack, and the acks
// of refusals) run on the writer's thread and touch only their snapshot and the client. Owns the
// writer (its destructor drains); borrows the client and the pause points, which outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/shard_file.h"
#include "common/deadline.h"
#include "common/status.h"
#include "trainer/kd_step.h"
#include "worker/coordinator_client.h"
#include "worker/pause_points.h"
#include "worker/recovery_plan.h"
#include "worker/session_mailbox.h"
#include "worker/shard_writer.h"

namespace retort::worker {

struct ShardSnapshot;  // checkpointer.cc

// The trained state one step left, borrowed for a WriteIfDue call.
struct CheckpointSource {
  const Assignment* assignment = nullptr;
  trainer::KdStep* kd_step = nullptr;
  StateMeta meta;  // meta.global_step: the step just completed
  int rank = 0;
  int world_size = 1;
};

// This rank's part of one committed checkpoint, read by ReadOwnRange.
struct CheckpointRange {
  checkpoint::ShardHeader header;
  torch::Tensor buffers;  // the student's buffer blob, when asked for and the checkpoint has it
  int written_by = 0;     // world size that wrote it
};

class Checkpointer {
 public:
  // Most committed checkpoints a restore tries, newest first.
  static constexpr int kMaxCandidates = 16;

  Checkpointer(CoordinatorClient* client, int64_t every_steps, uint64_t seed,
               PausePoints* pause_points);

  // Writes this rank's shard when a checkpoint is due after `source`'s step, `pending` being
  // the checkpoint the coordinator last named (heartbeats). True when one was due (begun, or
  // acked or logged as failed): the call's time is then the step's checkpoint phase.
  bool WriteIfDue(const PendingCheckpoint& pending, const CheckpointSource& source);
  // Waits for queued writes and their acks; false when one still runs at `deadline`.
  bool Drain(Deadline deadline) { return writer_.Drain(deadline); }

  // The committed checkpoint ids as the coordinator lists them, newest first, at most
  // kMaxCandidates; empty (logged) when it lists none or cannot answer by `deadline`.
  std::vector<uint64_t> ListCommitted(const std::string& member_id, Deadline deadline);
  // Reads checkpoint `id`'s range of `kd_step`'s optimizer shard into `params`, `exp_avg` and
  // `exp_avg_sq` (range-sized, float32 CPU) and, with `with_buffers`, the student's buffer blob.
  // NOT_FOUND without a manifest, FAILED_PRECONDITION for another parameter count, DATA_LOSS
  // for a damaged file; the coordinator's errors once retries run out at `deadline`.
  StatusOr<CheckpointRange> ReadOwnRange(const std::string& member_id, uint64_t id,
                                         trainer::KdStep& kd_step, bool with_buffers,
                                         torch::Tensor& params, torch::Tensor& exp_avg,
                                         torch::Tensor& exp_avg_sq, Deadline deadline);

 private:
  // A snapshot of `count` elements per array that no queued write holds.
  std::shared_ptr<ShardSnapshot> SnapshotBuffer(int64_t count);
  // Acks checkpoint `ack.checkpoint_id()` as failed with `error` (logged), from the writer's
  // thread.
  void AckFailed(v1::AckCheckpointRequest ack, const std::string& error);

  CoordinatorClient* const client_;
  const int64_t every_steps_;
  const uint64_t seed_;
  PausePoints* const pause_points_;
  uint64_t last_handled_ = 0;        // id of the last named checkpoint this worker answered
  int64_t last_periodic_step_ = -1;  // step of the last periodic one it began
  // Reused across checkpoints (a fresh allocation would fault in every page on the training
  // thread); one is free when the writer no longer holds it.
  std::vector<std::shared_ptr<ShardSnapshot>> snapshot_pool_;
  ShardWriter writer_;  // last: destroyed (drained) first
};

}  // namespace retort::worker
