// The coordinator's domain object: membership, generations, the sharding plan, the bootstrap
// key-value exchange, coordinated checkpoints and the job state machine. gRPC services are thin
// adapters over this class (worker_service.cc, control_service.cc); it has no gRPC types.
//
// Threading: every public method is thread-safe. State is guarded by mu_. Listener callbacks
// (generations, events) are invoked with subs_mu_ held and must not block or call back into the
// Coordinator; lock order is mu_ -> subs_mu_ -> listener's own lock. Time advances through
// Tick(), called every tick_ms by the thread Start() creates (or by tests, with a FakeClock).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "coordinator/state_store.h"
#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

struct CoordinatorOptions {
  std::string state_dir;
  // Where checkpoint manifests are committed; default <state_dir>/checkpoints.
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
  // Override the job's elastic bounds when > 0.
  int min_workers = 0;
  int max_workers = 0;
  int64_t shard_alignment = 64;
  size_t max_kv_value_bytes = 1 << 20;
  size_t max_kv_keys_per_generation = 65536;
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
  void Start();
  void Shutdown();
  // Evicts silent members and forms a generation when membership has settled.
  void Tick();
  // True once the job is stopped or completed and every member has left.
  bool Finished() const;
  // Blocks until Finished() or the deadline (steady clock ms); returns Finished().
  bool WaitFinished(int64_t timeout_ms);

  // --- worker-facing ---
  StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& request);
  StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  Status Leave(const v1::LeaveRequest& request);
  StatusOr<v1::PeerFailureResponse> ReportPeerFailure(const v1::PeerFailureReport& report);
  Status KvPut(const v1::KvPutRequest& request);
  StatusOr<v1::KvGetResponse> KvGet(const v1::KvGetRequest& request);
  StatusOr<v1::BeginCheckpointResponse> BeginCheckpoint(const v1::BeginCheckpointRequest& request);
  StatusOr<v1::AckCheckpointResponse> AckCheckpoint(const v1::AckCheckpointRequest& request);
  StatusOr<v1::GetCheckpointResponse> GetCheckpoint(const v1::GetCheckpointRequest& request);
  // A member's generation stream opened / closed (from the gRPC layer; unknown ids are ignored).
  // A closed stream is the fastest sign of a killed process: see disconnect_grace_ms.
  void WatchOpened(const std::string& member_id);
  void WatchClosed(const std::string& member_id);

  // --- operator-facing ---
  v1::StatusResponse GetStatus() const;
  StatusOr<v1::ControlResponse> Pause();
  StatusOr<v1::ControlResponse> Resume();
  StatusOr<v1::CheckpointResponse> RequestCheckpoint();
  StatusOr<v1::ControlResponse> Scale(const v1::ScaleRequest& request);
  StatusOr<v1::ControlResponse> Drain(const v1::DrainRequest& request);
  StatusOr<v1::ControlResponse> Stop(const v1::StopRequest& request);

  // --- subscriptions --- The listener must stay alive until Unsubscribe returns.
  // SubscribeGenerations delivers the current generation (if any) immediately.
  void SubscribeGenerations(GenerationListener* listener);
  void UnsubscribeGenerations(GenerationListener* listener);
  void SubscribeEvents(EventListener* listener);
  void UnsubscribeEvents(EventListener* listener);
  std::shared_ptr<const v1::Generation> CurrentGeneration() const;

  const CoordinatorOptions& options() const { return options_; }

 private:
  struct MemberRecord {
    std::string id;
    v1::MemberIdentity identity;
    int64_t parameter_count = 0;
    std::chrono::steady_clock::time_point last_heartbeat;
    int64_t step = 0;
    int64_t epoch = 0;
    v1::StepMetrics metrics;
    bool draining = false;
    std::string leave_reason;
    int32_t rank = -1;
    int open_watches = 0;
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

  // All *Locked helpers require mu_.
  Status PersistLocked();
  void MarkMembershipChangedLocked();
  void RemoveMemberLocked(const std::string& id, const std::string& kind, const std::string& why);
  void FormGenerationLocked();
  void UpdateFinishedLocked();
  void SetStateLocked(v1::JobState state, const std::string& why);
  // Moves the job to FAILED for `failure` (a recurring failure a member reported), once: later
  // failures are logged and ignored. Every member is then asked to leave (coordinator_failure.cc).
  void FailJobLocked(const v1::JobFailure& failure);
  Status CheckMemberLocked(const std::string& member_id) const;
  Status CheckGenerationLocked(uint64_t generation, const char* what) const;
  void EmitLocked(const std::string& kind, const std::string& message,
                  const std::string& member_id = "");
  // Drops the pending checkpoint and deletes its directory (partial shards, temp files).
  void AbortPendingCheckpointLocked(const std::string& why);
  // Makes a pending checkpoint at `step` and persists the id counter; emits `event`.
  Status StartPendingCheckpointLocked(int64_t step, uint64_t generation, const std::string& why);
  // Steps ahead of the fastest member at which a new checkpoint may be named, so that every
  // member hears of it (through a heartbeat) before reaching it.
  int64_t CheckpointMarginStepsLocked() const;
  // job.checkpoint.every_steps > 0: names the next multiple of every_steps once the members'
  // steps come within two margins of it (called on every heartbeat).
  void MaybeStartPeriodicCheckpointLocked();
  Status CommitCheckpointLocked();
  int64_t MaxMemberStepLocked() const;
  // True while a restarted coordinator still waits for the previous generation's members; ends
  // (and clears awaiting_rejoin_) once they are all back or rejoin_deadline_ passed.
  bool AwaitingRejoinLocked(std::chrono::steady_clock::time_point now);
  std::vector<std::string> MissingRejoinersLocked() const;

  // Startup (Create): checks the committed checkpoints state.json lists, drops unusable ones
  // (falling back to the newest usable one) and refuses to start when none is usable, unless
  // options.restart_from_scratch. Removes uncommitted checkpoint directories and temp files.
  static Status ReconcileCheckpoints(const CoordinatorOptions& options,
                                     v1::CoordinatorState* state);

  const CoordinatorOptions options_;
  const Clock* const clock_;
  StateStore store_;
  const std::chrono::steady_clock::time_point started_;

  mutable std::mutex mu_;
  std::condition_variable finished_cv_;
  v1::CoordinatorState state_;                                   // GUARDED_BY(mu_)
  std::unordered_map<std::string, MemberRecord> members_;        // GUARDED_BY(mu_)
  uint64_t next_member_serial_ = 1;                              // GUARDED_BY(mu_)
  bool membership_dirty_ = false;                                // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point membership_changed_at_;  // GUARDED_BY(mu_)
  std::shared_ptr<const v1::Generation> generation_;             // GUARDED_BY(mu_)
  std::map<std::string, std::string> kv_;                // GUARDED_BY(mu_), current generation
  size_t kv_bytes_ = 0;                                  // GUARDED_BY(mu_)
  std::optional<PendingCheckpoint> pending_checkpoint_;  // GUARDED_BY(mu_)
  // Step of the last periodic checkpoint started (committed or not): a failed one is not
  // retried at the same step.
  int64_t last_periodic_step_ = 0;  // GUARDED_BY(mu_)
  bool finished_ = false;           // GUARDED_BY(mu_)
  // (node, local_rank) of the previous generation's members not yet re-joined after a restart.
  std::set<std::pair<std::string, int>> awaiting_rejoin_;  // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point rejoin_deadline_;  // GUARDED_BY(mu_)
  // A new generation that could not be persisted is retried with backoff; the failure is logged
  // once per generation (or when the error changes), not at every attempt.
  int persist_failures_ = 0;                                    // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point next_persist_attempt_;  // GUARDED_BY(mu_)
  std::string persist_failure_logged_;                          // GUARDED_BY(mu_)

  mutable std::mutex subs_mu_;
  std::set<GenerationListener*> generation_listeners_;  // GUARDED_BY(subs_mu_)
  std::set<EventListener*> event_listeners_;            // GUARDED_BY(subs_mu_)

  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool stopping_ = false;  // GUARDED_BY(thread_mu_)
  std::thread ticker_;
};

const char* JobStateName(v1::JobState state);
// The coordinator boot a member id ("w<boot>-<serial>") was assigned in; 0 when malformed.
uint64_t MemberIdBoot(const std::string& member_id);

// Longest JobFailure.message a member may report.
constexpr size_t kMaxFailureMessageBytes = 4096;
// Checks a reported JobFailure's sizes (an empty one is valid: no failure).
Status ValidateJobFailure(const v1::JobFailure& failure);

}  // namespace retort::coordinator
