// The coordinator's domain object: membership, generations, the sharding plan, the bootstrap
// key-value exchange, coordinated checkpoints and the job state machine. gRPC services are thin
// adapters over this class (services.h: WorkerService and ControlService); it has no gRPC types.
//
// Threading: every public method is thread-safe. State is guarded by mu_. Listener callbacks
// (generations, events) are invoked with subs_mu_ held and must not block or call back into the
// Coordinator; lock order is mu_ -> subs_mu_ -> listener's own lock. Time advances through
// Tick(), called every tick_ms by the thread Start() creates (or by tests, with a FakeClock).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "coordinator/checkpoint_files.h"
#include "coordinator/coordinator_observer.h"
#include "coordinator/job_state_file.h"
#include "coordinator/kv_exchange.h"
#include "coordinator/own_pause_detector.h"
#include "coordinator/peer_reports.h"
#include "coordinator/rejoin_gate.h"
#include "coordinator/straggler_drain.h"
#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

struct CoordinatorOptions {
  std::string state_dir;
  // Where checkpoint manifests are committed. Empty: the job spec's checkpoint.dir when it sets
  // one, else <state_dir>/checkpoints (ResolveCheckpointDir). Set, it overrides the spec's.
  std::string checkpoint_dir;
  int64_t heartbeat_interval_ms = 1000;
  // A member silent for this long is evicted.
  int64_t eviction_timeout_ms = 5000;
  // A member whose every generation stream closed (its process or connection is gone) and
  // that opens no new one within this grace is evicted; 0 = only heartbeats evict.
  int64_t disconnect_grace_ms = 500;
  // A new generation forms once membership has been quiet this long (or max_workers reached).
  int64_t settle_ms = 200;
  int64_t tick_ms = 50;
  // Ticks further apart than this mean the coordinator itself was paused (own_pause_detector.h):
  // before judging heartbeats, every member's deadline moves forward by the pause, so the
  // coordinator does not evict its members for its own stall. 0 = off (the library's default:
  // tests with a FakeClock jump time between ticks as a shorthand; retort-coordinator turns it on
  // with --own-pause-threshold-ms, default 1000). Must exceed tick_ms when set.
  int64_t own_pause_threshold_ms = 0;
  // Override the job's elastic bounds when > 0.
  int min_workers = 0;
  int max_workers = 0;
  int64_t shard_alignment = 64;
  // Abuse limits (kv_exchange.h, peer_reports.h): the key-value store is
  // bounded per member and in total (keys + values, in bytes) and cleared with its generation.
  size_t max_kv_value_bytes = 1 << 20;
  size_t max_kv_keys_per_generation = 65536;
  size_t max_kv_bytes_per_member = 4 << 20;
  size_t max_kv_bytes_total = 64 << 20;
  // Open generation streams per member; streams of ids that are not members (tools, a worker
  // between a coordinator restart and its re-join) share max_workers + kStreamMargin.
  int max_generation_streams_per_member = 4;
  // Peer-failure reports a member may send per window (RESOURCE_EXHAUSTED beyond).
  int max_peer_reports_per_window = 4;
  int64_t peer_report_window_ms = 10000;
  // After a restart, wait up to this long for the previous generation's members (by node and
  // local_rank) to re-join before forming a generation: their in-memory state may be newer than
  // the last checkpoint, and a generation formed without them would resume from disk. Ends early
  // once all of them are back; 0 = do not wait.
  int64_t rejoin_grace_ms = 10000;
  // When state.json lists committed checkpoints and none of them can be used (manifest missing
  // or corrupt, a shard missing or of the wrong size), Create() refuses to start, naming each
  // checkpoint and why; with this set it forgets them and the job starts from step 0.
  bool restart_from_scratch = false;
  // Writes state.json; nullptr = the real file system. Borrowed (tests inject faults).
  StateFileWriter* state_writer = nullptr;
  // Longest wait between attempts to persist a new generation that failed to persist.
  int64_t persist_retry_max_ms = 5000;
  // Told of evictions, recoveries and checkpoints (metrics); nullptr = none. Borrowed.
  CoordinatorObserver* observer = nullptr;
};

// Receives each new generation. Called with subs_mu_ held: must not block.
class GenerationListener {
 public:
  virtual ~GenerationListener() = default;
  virtual void OnGeneration(std::shared_ptr<const v1::Generation> generation) = 0;
};

// Receives operator-facing events. Called with subs_mu_ held: must not block.
class EventListener {
 public:
  virtual ~EventListener() = default;
  virtual void OnEvent(const v1::Event& event) = 0;
};

class Coordinator {
 public:
  // Loads durable state from options.state_dir. `job` is required when no state exists; when
  // state exists and `job` is given, they must agree on the job name.
  static StatusOr<std::unique_ptr<Coordinator>> Create(CoordinatorOptions options,
                                                       std::optional<v1::JobSpec> job,
                                                       const Clock* clock);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Starts the tick thread. Shutdown() stops it (idempotent; also done by the destructor).
  void Start() RETORT_EXCLUDES(thread_mu_);
  void Shutdown() RETORT_EXCLUDES(thread_mu_);
  // Evicts silent members and forms a generation when membership has settled.
  void Tick() RETORT_EXCLUDES(mu_);
  // True once the job is stopped or completed and every member has left.
  bool Finished() const RETORT_EXCLUDES(mu_);
  // Blocks until Finished() or the deadline (steady clock ms); returns Finished().
  bool WaitFinished(int64_t timeout_ms) RETORT_EXCLUDES(mu_);

  // --- worker-facing ---
  // A job that has ended or is ending answers OK with only `ended_state` (and `failure`) set.
  StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& request) RETORT_EXCLUDES(mu_);
  // Checks the member secret a call for `member_id` carries (JoinResponse.member_secret; the
  // gRPC layer reads it from the call's metadata). OK for an id that is no member (the call
  // itself then answers NOT_FOUND) and for an empty id; UNAUTHENTICATED when the secret is
  // missing or no member's, PERMISSION_DENIED when it is another member's. Changes nothing.
  Status AuthenticateMember(const std::string& member_id, const std::string& secret) const
      RETORT_EXCLUDES(mu_);
  StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request)
      RETORT_EXCLUDES(mu_);
  Status Leave(const v1::LeaveRequest& request) RETORT_EXCLUDES(mu_);
  StatusOr<v1::PeerFailureResponse> ReportPeerFailure(const v1::PeerFailureReport& report)
      RETORT_EXCLUDES(mu_);
  Status KvPut(const v1::KvPutRequest& request) RETORT_EXCLUDES(mu_);
  StatusOr<v1::KvGetResponse> KvGet(const v1::KvGetRequest& request) RETORT_EXCLUDES(mu_);
  StatusOr<v1::BeginCheckpointResponse> BeginCheckpoint(const v1::BeginCheckpointRequest& request)
      RETORT_EXCLUDES(mu_);
  StatusOr<v1::AckCheckpointResponse> AckCheckpoint(const v1::AckCheckpointRequest& request)
      RETORT_EXCLUDES(mu_);
  StatusOr<v1::GetCheckpointResponse> GetCheckpoint(const v1::GetCheckpointRequest& request)
      RETORT_EXCLUDES(mu_);
  // A member's generation stream opened / closed (from the gRPC layer). A closed stream is the
  // fastest sign of a killed process: see disconnect_grace_ms. WatchOpened refuses a stream
  // beyond the limits (RESOURCE_EXHAUSTED; see max_generation_streams_per_member), counting
  // nothing; every OK WatchOpened must be paired with one WatchClosed of the same id and kind.
  // The kind says which count the stream went to: pass it back to WatchClosed (an id that was
  // not a member when its stream opened may be one when it closes).
  enum class WatchKind { kMember, kOther };
  StatusOr<WatchKind> WatchOpened(const std::string& member_id) RETORT_EXCLUDES(mu_);
  void WatchClosed(const std::string& member_id, WatchKind kind = WatchKind::kMember)
      RETORT_EXCLUDES(mu_);

  // --- operator-facing ---
  v1::StatusResponse GetStatus() const RETORT_EXCLUDES(mu_);
  // Members of a RUNNING job whose reported step has not advanced for `deadline` (heartbeats
  // still arriving: a hung collective looks like this), as "id (node/local rank) at step N".
  // A new generation restarts every member's clock (recovery is not a stall). Empty while the
  // job waits, is paused or has ended. Feeds the health port's progress status (readiness).
  std::vector<std::string> StalledMembers(std::chrono::milliseconds deadline) const
      RETORT_EXCLUDES(mu_);
  StatusOr<v1::ControlResponse> Pause() RETORT_EXCLUDES(mu_);
  StatusOr<v1::ControlResponse> Resume() RETORT_EXCLUDES(mu_);
  StatusOr<v1::CheckpointResponse> RequestCheckpoint() RETORT_EXCLUDES(mu_);
  StatusOr<v1::ControlResponse> Scale(const v1::ScaleRequest& request) RETORT_EXCLUDES(mu_);
  StatusOr<v1::ControlResponse> Drain(const v1::DrainRequest& request) RETORT_EXCLUDES(mu_);
  StatusOr<v1::ControlResponse> Stop(const v1::StopRequest& request) RETORT_EXCLUDES(mu_);
  // Asks every member to record a step trace (coordinator_trace.cc).
  StatusOr<v1::TraceResponse> RequestTrace(const v1::TraceRequest& request) RETORT_EXCLUDES(mu_);

  // --- subscriptions --- The listener must stay alive until Unsubscribe returns.
  // SubscribeGenerations delivers the current generation (if any) immediately.
  void SubscribeGenerations(GenerationListener* listener) RETORT_EXCLUDES(mu_, subs_mu_);
  void UnsubscribeGenerations(GenerationListener* listener) RETORT_EXCLUDES(subs_mu_);
  void SubscribeEvents(EventListener* listener) RETORT_EXCLUDES(subs_mu_);
  void UnsubscribeEvents(EventListener* listener) RETORT_EXCLUDES(subs_mu_);
  std::shared_ptr<const v1::Generation> CurrentGeneration() const RETORT_EXCLUDES(mu_);

  const CoordinatorOptions& options() const { return options_; }

 private:
  struct MemberRecord {
    std::string id;
    // Random; every later call for this member carries it (AuthenticateMember).
    std::string secret;
    v1::MemberIdentity identity;
    int64_t parameter_count = 0;
    std::chrono::steady_clock::time_point last_heartbeat;
    int64_t step = 0;
    // When `step` last advanced (or the member joined, or saw a new generation).
    std::chrono::steady_clock::time_point step_advanced_at;
    int64_t epoch = 0;
    v1::StepMetrics metrics;
    uint64_t generation = 0;  // as the member last reported it
    bool draining = false;
    std::string leave_reason;
    int32_t rank = -1;
    int open_watches = 0;
    // Highest generation this member's heartbeats carried: an older one is stale (ABORTED).
    uint64_t heartbeat_generation = 0;
    // Set when the last open generation stream closed; cleared when one opens.
    std::optional<std::chrono::steady_clock::time_point> watch_lost_at;
  };
  struct PendingCheckpoint {
    uint64_t id = 0;
    int64_t step = 0;
    uint64_t generation = 0;
    std::map<std::string, std::vector<v1::CheckpointFile>> acks;  // member id -> files
  };

  Coordinator(CoordinatorOptions options, v1::CoordinatorState state, const Clock* clock);

  // The *Locked helpers require mu_.
  Status PersistLocked() RETORT_REQUIRES(mu_);
  void MarkMembershipChangedLocked() RETORT_REQUIRES(mu_);
  void RemoveMemberLocked(const std::string& id, const std::string& kind, const std::string& why)
      RETORT_REQUIRES(mu_);
  // Members were lost for `cause` (CoordinatorObserver): an eviction is reported at once, and
  // the next generation formed counts as a recovery from it.
  void NoteLossLocked(const char* cause, bool eviction) RETORT_REQUIRES(mu_);
  void FormGenerationLocked() RETORT_REQUIRES(mu_);
  // Updates batch_split_ from the members' reports; a change is a "batch_split" event.
  void UpdateBatchSplitLocked() RETORT_REQUIRES(mu_);
  // Drains member `id` when StragglerDrain says it stayed too slow (never below min_workers).
  void MaybeDrainStragglerLocked(const std::string& id) RETORT_REQUIRES(mu_);
  void UpdateFinishedLocked() RETORT_REQUIRES(mu_);
  void SetStateLocked(v1::JobState state, const std::string& why) RETORT_REQUIRES(mu_);
  // Moves the job to FAILED for `failure` (a recurring failure a member reported), once: later
  // failures are logged and ignored. Every member is then asked to leave (coordinator_failure.cc).
  void FailJobLocked(const v1::JobFailure& failure) RETORT_REQUIRES(mu_);
  Status CheckMemberLocked(const std::string& member_id) const RETORT_REQUIRES(mu_);
  // A key-value caller: a member, of the current generation, with a rank in it.
  Status CheckKvCallerLocked(const std::string& member_id, uint64_t generation,
                             const char* what) const RETORT_REQUIRES(mu_);
  // FAILED_PRECONDITION unless `member_id` has a rank in the current generation.
  Status CheckInGenerationLocked(const std::string& member_id, const char* what) const
      RETORT_REQUIRES(mu_);
  Status CheckGenerationLocked(uint64_t generation, const char* what) const RETORT_REQUIRES(mu_);
  // A member's reported parameter count: valid, and the job's once the job has one.
  Status CheckParameterCountLocked(int64_t count) const RETORT_REQUIRES(mu_);
  void EmitLocked(const std::string& kind, const std::string& message,
                  const std::string& member_id = "") RETORT_REQUIRES(mu_);
  // Drops the pending checkpoint and deletes its directory (partial shards, temp files).
  // `failed`: it could not be written or committed (a member's shard write, the manifest), as
  // opposed to dropped by a membership change: it counts in checkpoint_health_, and
  // checkpoint.max_consecutive_failures of them in a row pause the job.
  void AbortPendingCheckpointLocked(const std::string& why, bool failed = false)
      RETORT_REQUIRES(mu_);
  // Makes a pending checkpoint at `step` and persists the id counter; emits `event`.
  Status StartPendingCheckpointLocked(int64_t step, uint64_t generation, const std::string& why)
      RETORT_REQUIRES(mu_);
  // Steps ahead of the fastest member at which a new checkpoint may be named, so that every
  // member hears of it (through a heartbeat) before reaching it.
  int64_t CheckpointMarginStepsLocked() const RETORT_REQUIRES(mu_);
  // job.checkpoint.every_steps > 0: names the next multiple of every_steps once the members'
  // steps come within two margins of it (called on every heartbeat).
  void MaybeStartPeriodicCheckpointLocked() RETORT_REQUIRES(mu_);
  Status CommitCheckpointLocked() RETORT_REQUIRES(mu_);
  int64_t MaxMemberStepLocked() const RETORT_REQUIRES(mu_);
  // True while a restarted coordinator still waits for the previous generation's members
  // (rejoin_gate_); when the wait ends, says so in an event.
  bool AwaitingRejoinLocked(std::chrono::steady_clock::time_point now) RETORT_REQUIRES(mu_);
  // (node, local rank) of every member.
  std::set<RejoinGate::Place> MemberPlacesLocked() const RETORT_REQUIRES(mu_);
  // The coordinator was paused for `pause` beyond its tick (OwnPauseDetector): moves every
  // member's heartbeat, stream-loss and step-progress times forward by it (never past `now`),
  // so their deadlines count only time the coordinator ran; logged, an event and a metric.
  void ForgiveOwnPauseLocked(std::chrono::nanoseconds pause,
                             std::chrono::steady_clock::time_point now) RETORT_REQUIRES(mu_);

  const CoordinatorOptions options_;
  const Clock* const clock_;
  JobStateFile store_;
  const CheckpointFiles checkpoint_files_;  // options_.checkpoint_dir; stateless (no lock)
  const std::chrono::steady_clock::time_point started_;

  mutable Mutex mu_;
  CondVar finished_cv_;
  v1::CoordinatorState state_ RETORT_GUARDED_BY(mu_);
  std::unordered_map<std::string, MemberRecord> members_ RETORT_GUARDED_BY(mu_);
  uint64_t next_member_serial_ RETORT_GUARDED_BY(mu_) = 1;
  bool membership_dirty_ RETORT_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point membership_changed_at_ RETORT_GUARDED_BY(mu_);
  std::shared_ptr<const v1::Generation> generation_ RETORT_GUARDED_BY(mu_);
  KvExchange kv_ RETORT_GUARDED_BY(mu_);  // current generation's
  std::optional<PendingCheckpoint> pending_checkpoint_ RETORT_GUARDED_BY(mu_);
  // Peer-failure reports (coordinator_peer_reports.cc).
  PeerReports peer_reports_ RETORT_GUARDED_BY(mu_);
  // Generation streams of ids that are not members.
  int anonymous_watches_ RETORT_GUARDED_BY(mu_) = 0;
  // Step of the last periodic checkpoint started (committed or not): a failed one is not
  // retried at the same step.
  int64_t last_periodic_step_ RETORT_GUARDED_BY(mu_) = 0;
  bool finished_ RETORT_GUARDED_BY(mu_) = false;
  // The previous generation's members not yet re-joined after a restart.
  RejoinGate rejoin_gate_ RETORT_GUARDED_BY(mu_);
  // The last checkpoint whose late acknowledgement was logged (one line per checkpoint).
  uint64_t last_late_ack_logged_ RETORT_GUARDED_BY(mu_) = 0;
  // Checkpoints that failed to commit since this coordinator started (StatusResponse, metrics);
  // consecutive_failures is reset by a commit.
  v1::CheckpointHealth checkpoint_health_ RETORT_GUARDED_BY(mu_);
  // The step of the last checkpoint that failed: a member that begins one there afterwards
  // (it reached the step before hearing of the failure) is refused rather than retried.
  int64_t failed_checkpoint_step_ RETORT_GUARDED_BY(mu_) = -1;
  // Evaluations during training reported by members (evaluation_record.h; step 0: none yet).
  v1::EvaluationResult last_evaluation_ RETORT_GUARDED_BY(mu_);
  v1::EvaluationResult best_evaluation_ RETORT_GUARDED_BY(mu_);
  // The current generation's batch split as its members report it (reported_batch_split.h);
  // empty until every rank reported one.
  v1::BatchSplit batch_split_ RETORT_GUARDED_BY(mu_);
  // elastic.straggler.drain_below / drain_after_steps (off when 0), fed by heartbeats.
  StragglerDrain straggler_drain_ RETORT_GUARDED_BY(mu_){0, 0};
  // Gaps between ticks: the coordinator's own pauses (own_pause_threshold_ms).
  OwnPauseDetector own_pauses_ RETORT_GUARDED_BY(mu_);
  // A new generation that could not be persisted is retried with backoff; the failure is logged
  // once per generation (or when the error changes), not at every attempt.
  int persist_failures_ RETORT_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point next_persist_attempt_ RETORT_GUARDED_BY(mu_);
  std::string persist_failure_logged_ RETORT_GUARDED_BY(mu_);
  // Why members were lost since the last generation formed ("" = none): see NoteLossLocked.
  std::string recovery_cause_ RETORT_GUARDED_BY(mu_);
  // The step trace window asked by an operator (0 = none), passed on in heartbeat directives.
  int64_t trace_first_step_ RETORT_GUARDED_BY(mu_) = 0;
  int64_t trace_last_step_ RETORT_GUARDED_BY(mu_) = 0;

  // Taken after mu_ where both are held (listeners are called with both).
  mutable Mutex subs_mu_ RETORT_ACQUIRED_AFTER(mu_);
  std::set<GenerationListener*> generation_listeners_ RETORT_GUARDED_BY(subs_mu_);
  std::set<EventListener*> event_listeners_ RETORT_GUARDED_BY(subs_mu_);

  Mutex thread_mu_;
  CondVar thread_cv_;
  bool stopping_ RETORT_GUARDED_BY(thread_mu_) = false;
  std::thread ticker_;
};

// The checkpoint directory a coordinator uses: `flag` (CoordinatorOptions.checkpoint_dir, from
// --checkpoint-dir) when set, else the job spec's checkpoint.dir, else <state_dir>/checkpoints;
// absolute (workers open the paths the coordinator hands out). When the flag and the spec
// name different directories, the flag wins and the coordinator logs that it does.
std::string ResolveCheckpointDir(const std::string& flag, const v1::JobSpec& job,
                                 const std::string& state_dir);

// The coordinator boot a member id ("w<boot>-<serial>") was assigned in; 0 when malformed.
uint64_t MemberIdBoot(const std::string& member_id);

// Generation streams of non-members allowed beyond max_workers (see CoordinatorOptions).
constexpr int kStreamMargin = 16;

// Largest step (and epoch) a member may report, in heartbeats and BeginCheckpoint: far beyond any
// job, and small enough that the checkpoint and trace arithmetic on it cannot overflow.
constexpr int64_t kMaxReportedStep = int64_t{1} << 53;

// Largest student parameter count a member may report (2^40, about 1.1e12: 4 TiB of fp32
// weights, far beyond any student one device trains) and a state file may hold: the plan, the
// checkpoint sizes and the replicas are computed from it.
constexpr int64_t kMaxParameterCount = int64_t{1} << 40;
// INVALID_ARGUMENT unless 0 <= count <= kMaxParameterCount (0: the member does not know it yet).
Status ValidateParameterCount(int64_t count);

// Longest JobFailure.message a member may report.
constexpr size_t kMaxFailureMessageBytes = 4096;
// Checks a reported JobFailure's sizes (an empty one is valid: no failure).
Status ValidateJobFailure(const v1::JobFailure& failure);

}  // namespace retort::coordinator
