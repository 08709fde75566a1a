// TrainingSession: the compute side of a worker. Plugs into the WorkerAgent as its
// GenerationHandler; on the first join it builds the teacher, the student and the datasets from
// the job spec, then a training thread follows generations:
//   for each generation that includes this worker: bootstrap a communicator through the
//   coordinator's key-value exchange, (re)build the ZeRO-1 KD step for the generation's
//   sharding plan, seek the data loader to the job's position for (rank, world size), and run
//   steps until the job is done, a newer generation must be switched to, or the member leaves.
// Every step starts with a tiny all-reduce of [newer generation seen, leaving, paused], so all
// ranks switch generation, pause or let a member go at the same step boundary. An agreed switch
// saves the complete state; a failed peer is covered by the in-memory replicas (peer_replica.h)
// taken after every replicate_every_steps-th step, so a kill -9 loses no completed step.
// At the end: top-1 on the test split (each rank evaluates a slice; counts are all-reduced),
// rank 0 exports the student (safetensors) and writes result.json (job_result.h), and every
// worker leaves completing the job (WorkerAgent::CompleteJob).
//
// Files: training_session.cc (generations, steps, evaluation), session_state.cc (state across
// generations: save, recovery, replicas), session_checkpoint.cc (restoring from a disk
// checkpoint); writing and reading checkpoints is the Checkpointer's (checkpointer.h).
//
// Threading: GenerationHandler callbacks arrive on the agent's threads and only post to the
// session's mailbox (session_mailbox.h); all training happens on the session's own thread,
// which reads the mailbox. The session has no lock of its own: every state shared between those
// threads lives in the mailbox, whose methods take its lock (and carry the annotations clang's
// thread-safety analysis checks). The agent is borrowed.
#pragma once

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "collectives/communicator.h"
#include "collectives/ucx/cma_chooser.h"
#include "common/status.h"
#include "trainer/data/batch_mixing.h"
#include "trainer/data/color_jitter.h"
#include "trainer/data/loader.h"
#include "trainer/data/random_erasing.h"
#include "trainer/device.h"
#include "trainer/evaluation.h"
#include "trainer/kd_step.h"
#include "worker/batch_rebalancer.h"
#include "worker/checkpointer.h"
#include "worker/communicator_shard_comm.h"
#include "worker/coordinator_client.h"
#include "worker/job_failure.h"
#include "worker/pause_points.h"
#include "worker/peer_replica.h"
#include "worker/recovery_plan.h"
#include "worker/session_mailbox.h"
#include "worker/step_boundary_exchange.h"
#include "worker/step_log.h"
#include "worker/step_record.h"
#include "worker/trace_recorder.h"
#include "worker/worker_agent.h"

namespace retort::worker {

struct TrainingOptions {
  // Compute threads (0: the job's threads_per_worker, or 1).
  int threads = 0;
  // Deadline of every collective and of communicator bootstrap.
  int64_t comm_timeout_ms = 60000;
  // Where outputs go when the job spec names no output_dir.
  std::string default_output_dir = "retort-out";
  // The network interface(s) the data plane binds (UCX_NET_DEVICES syntax): the interface of
  // the worker's --data-address. Empty: every interface.
  std::string data_plane_devices;
  // Build the GPU data plane with host memory standing in for the device (worker/data_plane.h)
  // when training on the CPU: tests of the GPU compositions on machines without a GPU.
  bool emulate_device_data_plane = false;
  // How large messages to workers on this host travel (collectives/ucx/cma_chooser.h).
  collectives::ucx::CmaPolicy cma_policy = collectives::ucx::CmaPolicy::kAdaptive;
  // Test fault injection (pause_points.h); borrowed, outlives the session; may be null.
  PausePoints* pause_points = nullptr;
  // The training device, resolved ("cpu" or "cuda:N": trainer/device.h).
  std::string device = "cpu";
  // Selects that device on every thread of the session that touches CUDA (trainer/device.h):
  // the setup (on the agent's thread), the training thread, the KD step and the loader's decode
  // threads. Null: the CUDA runtime's. Borrowed; outlives the session.
  trainer::DeviceSelector* device_selector = nullptr;
  // This worker's identity: names its step log and trace files.
  std::string node = "localhost";
  int local_rank = 0;
  // Told of every step and generation (e.g. Prometheus metrics); borrowed, may be null.
  StepObserver* step_observer = nullptr;
  // A step trace window recorded without being asked (0 = none; see trace_recorder.h).
  int64_t trace_first_step = 0;
  int64_t trace_last_step = 0;
};

class TrainingSession final : public GenerationHandler {
 public:
  TrainingSession(TrainingOptions options, CoordinatorClient* client);
  ~TrainingSession() override;
  // Must be called before the agent runs.
  void AttachAgent(WorkerAgent* agent) { agent_ = agent; }

  StatusOr<int64_t> OnJoined(const v1::JoinResponse& response) override;
  void OnGeneration(const v1::Generation& generation, const std::string& member_id,
                    int rank) override;
  void OnDirectives(const v1::Directives& directives) override;
  void OnLeaving(const std::string& reason, Deadline deadline) override;

  // The training thread's final status (OK when the job completed or the member left cleanly).
  Status result() const;

 private:
  Status Setup(const v1::JobSpec& job);
  void TrainingThread();
  Status Train();
  // Leaves the job so the coordinator forms a new generation; the agent re-joins.
  void RejoinToRecover();
  Status StartGeneration(const Assignment& a);
  // Gives the KD step the new generation's communicator (shard_comm_) and plan: creates it from
  // the models on the first generation, reconfigures it (same models and flat buffer) after.
  Status AttachStep(trainer::ShardPlan plan);
  // Runs steps until the job is done (returns OK and sets done_), or a switch/leave is agreed.
  Status RunSteps(const Assignment& a);
  Status Finish(const Assignment& a);
  // Saves parameters and gathers the AdamW moments of every range over the current
  // communicator, so the next generation can re-shard them.
  Status SaveState();
  // Agrees with the new generation's ranks on the training state and installs it (see
  // recovery_plan.h), then takes the new generation's first replica snapshot.
  Status RestoreState(const Assignment& a);
  // Installs the training state at `meta`: the full parameter buffer (the same on every rank)
  // and this rank's range of the AdamW moments.
  Status InstallState(const StateMeta& meta, const torch::Tensor& params,
                      const torch::Tensor& own_exp_avg, const torch::Tensor& own_exp_avg_sq);
  Status RestoreFromFullState(const RecoveryPlan& plan);
  Status RestoreFromReplicas(const RecoveryPlan& plan);
  // Every copy of the state is gone: start over from the job's initial weights.
  Status RestoreFresh(const std::string& why);
  // Snapshot for the peer replica after a completed step (or right after a restore).
  Status CaptureReplica();
  // Broadcasts `blob_at_source` (the student's buffer blob, trainer/model_buffers.h; only
  // read on rank `source`) and installs it on every rank. No-op for students without buffers.
  Status ShareStudentBuffers(int source, const torch::Tensor& blob_at_source);
  // After a failed generation: tell the coordinator which peers the data plane saw die.
  void ReportFailedPeers(const Assignment& a, const Status& error);
  // After RunSteps failed with `error` (in failure_phase_): a failure that will recur on every
  // try (job_failure.h) fails the job through the agent; true then, and training must stop.
  bool FailJobIfRecurring(const Assignment& a, const Status& error);
  // True once a generation newer than `generation` was published, or the member leaves: the
  // communicator being built for `generation` is obsolete (polled by its bootstrap).
  bool Superseded(uint64_t generation) const;
  StateMeta CurrentMeta() const;
  // Waits for a collective on comm_ with the session's collective deadline.
  Status Await(const collectives::WorkPtr& work) const;
  // Restoring from a coordinated checkpoint (session_checkpoint.cc).
  // Loads the newest committed checkpoint every rank can read (a corrupt or truncated one is
  // skipped for the previous one). False when the job has none; DATA_LOSS naming each
  // checkpoint when it has some and none can be read (the job never silently restarts at 0).
  StatusOr<bool> RestoreFromCheckpoint(const Assignment& a);
  // The committed checkpoint ids (newest first), as rank 0 sees them, broadcast to all ranks.
  StatusOr<std::vector<uint64_t>> AgreeOnCheckpoints(const Assignment& a);
  void WriteMetrics(const trainer::StepResult& r, double samples_per_second);
  // Evaluation during training (session_evaluation.cc): after a step the spec's `evaluation`
  // names, every rank counts its slice of the test split and rank 0 reports the sums.
  Status EvaluateIfDue(const Assignment& a);
  // The student's counts on test samples [begin, end), read (and kept, when small) in batches.
  StatusOr<trainer::TopKCounts> CountEvalSlice(int64_t begin, int64_t end);
  // Hands a completed step to the step log, the trace and options_.step_observer.
  void ObserveStep(const StepRecord& record);
  // Straggler rebalancing at a step boundary (session_rebalancing.cc): this rank's part of the
  // exchange before the all-reduce; after it, the measurements and an adopted proposal.
  void WriteRebalancing(StepBoundaryExchange& exchange, int rank);
  Status ApplyRebalancing(const StepBoundaryExchange& exchange, int rank);
  // The 0-based global index of the step the loader returns next (Sampler::GlobalStep).
  int64_t NextGlobalStep() const;

  const TrainingOptions options_;
  CoordinatorClient* const client_;
  WorkerAgent* agent_ = nullptr;

  // Built once, on the first join; used by the training thread only. The models move into
  // kd_step_ when the first generation starts.
  v1::JobSpec job_;
  std::unique_ptr<trainer::Model> teacher_, student_;
  int64_t parameter_count_ = 0;
  // Model FLOPs of one training sample (0: not a built-in ViT) and the bf16 peak of this
  // worker's device (0: unknown), for StepRecord::model_flops_utilization.
  double model_flops_per_sample_ = 0;
  double device_peak_flops_ = 0;
  std::shared_ptr<const trainer::data::Dataset> train_set_, test_set_;
  std::unique_ptr<trainer::data::Loader> loader_;
  trainer::data::MixingOptions mixing_;  // of the training batches (off unless the spec mixes)
  trainer::data::RandomErasingOptions erasing_;  // of the training batches (probability 0: off)
  trainer::data::ColorJitterOptions jitter_;     // of the training batches (strength 0: off)
  // Straggler rebalancing (elastic.straggler.rebalance; null: off), one per generation, and
  // this rank's last step for the next boundary's exchange (0: nothing new to report).
  std::unique_ptr<BatchRebalancer> rebalancer_;
  double last_step_samples_ = 0, last_step_compute_seconds_ = 0;
  std::string rebalance_reason_;  // rank 0: why it sent its last proposal
  // This rank's slice of the test split kept between evaluations (eval_range_ {-1, -1}: none),
  // and the best top-1 exported so far by this process (-1: not known yet).
  std::vector<trainer::Batch> eval_batches_;
  std::pair<int64_t, int64_t> eval_range_{-1, -1};
  double best_top1_ = -1;
  int64_t total_steps_ = 0;
  int64_t global_step_ = 0;
  // The trainer's stream for the data plane (CUDA; null otherwise); outlives shard_comm_.
  std::unique_ptr<collectives::DeviceEvents> device_events_;
  std::unique_ptr<collectives::Communicator> comm_;
  std::unique_ptr<CommunicatorShardComm> shard_comm_;
  std::unique_ptr<trainer::KdStep> kd_step_;
  // The student's flat parameters and buffer blob when the step was created: what a fresh
  // restart (RestoreFresh) puts back.
  torch::Tensor initial_params_, initial_buffers_;
  uint64_t active_generation_ = 0;
  // Complete state saved at an agreed switch (saved_meta_.global_step >= 0 when present):
  // the full parameter buffer and the full AdamW moments.
  StateMeta saved_meta_;
  torch::Tensor saved_params_, saved_exp_avg_, saved_exp_avg_sq_;
  torch::Tensor saved_buffers_;  // the student's buffer blob at saved_meta_
  trainer::data::SamplerState position_;
  PeerReplica replica_;
  // The active generation's ReplicaDistance (recovery_plan.h), from its node groups.
  int replica_distance_ = 1;
  // Writes checkpoint shards in the background and reads them for a restore; built in Setup(),
  // drained before the worker leaves so that a checkpoint at the last step still commits.
  std::unique_ptr<Checkpointer> checkpointer_;
  int64_t replicate_every_steps_ = 1;
  std::ofstream metrics_;
  std::string output_dir_;
  // Built in Setup(); used by the training thread (the recorder's window is also set there,
  // from trace_first_step_/trace_last_step_).
  std::unique_ptr<StepLog> step_log_;
  std::unique_ptr<TraceRecorder> tracer_;
  bool done_ = false;
  // Where RunSteps is (or failed): loading a batch, the step's compute, or communication.
  FailurePhase failure_phase_ = FailurePhase::kCommunication;

  // Everything the agent's threads tell the training thread (thread-safe).
  SessionMailbox mailbox_;
  std::thread thread_;
};

}  // namespace retort::worker
