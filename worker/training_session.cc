#include "worker/training_session.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "collectives/ucx/ucx_communicator.h"
#include "collectives/ucx/ucx_hierarchical.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "trainer/cpu_runtime.h"
#include "trainer/data/batch.h"
#include "trainer/flat_parameters.h"
#include "trainer/kd_loss.h"
#include "trainer/models/model.h"
#include "trainer/safetensors.h"
#include "trainer/sharded_adamw.h"
#include "worker/coordinator_store.h"
#include "worker/job_setup.h"

namespace retort::worker {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kBatchWaitMs = 120000;
// See Train(): how long a worker whose generation failed waits for the next one.
constexpr int64_t kStuckGenerationMs = 10000;
constexpr int64_t kMaxStuckGenerationMs = 60000;

// Control flags all-reduced at every step boundary.
enum Flag { kNewerGeneration = 0, kLeaving = 1, kPaused = 2, kFlagCount = 3 };

// Layout of nodes for the hierarchical communicator: usable when every node holds the same
// number (> 1) of ranks and there is more than one node.
std::optional<collectives::NodeLayout> HierarchicalLayout(const v1::Generation& g) {
  if (g.nodes_size() < 2) return std::nullopt;
  const int per_node = g.nodes(0).ranks_size();
  if (per_node < 2) return std::nullopt;
  collectives::NodeLayout layout;
  layout.node_of_rank.assign(g.members_size(), 0);
  for (int n = 0; n < g.nodes_size(); ++n) {
    if (g.nodes(n).ranks_size() != per_node) return std::nullopt;
    for (int r : g.nodes(n).ranks()) layout.node_of_rank[r] = n;
  }
  return layout;
}

// Identifies a member's process across coordinator restarts, which give it a new member id:
// a process that re-joined keeps (node, local_rank, incarnation); a restarted one does not.
std::string MemberProcessKey(const v1::Member& m) {
  if (m.identity().incarnation().empty()) return m.member_id();  // coordinator hides it
  return m.identity().node() + "/" + std::to_string(m.identity().local_rank()) + "/" +
         m.identity().incarnation();
}

}  // namespace

TrainingSession::TrainingSession(TrainingOptions options, CoordinatorClient* client)
    : options_(std::move(options)), client_(client) {}

TrainingSession::~TrainingSession() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    leaving_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status TrainingSession::result() const {
  std::lock_guard<std::mutex> lock(mu_);
  return result_;
}

StatusOr<int64_t> TrainingSession::OnJoined(const v1::JoinResponse& response) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return parameter_count_;  // a re-join after a coordinator restart
  }
  RETORT_RETURN_IF_ERROR(Setup(response.job()));
  std::lock_guard<std::mutex> lock(mu_);
  started_ = true;
  thread_ = std::thread([this] { TrainingThread(); });
  return parameter_count_;
}

void TrainingSession::OnGeneration(const v1::Generation& generation, const std::string& member_id,
                                   int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = Assignment{generation, member_id, rank};
  cv_.notify_all();
  if (!running_comm_ || generation.number() <= running_comm_->generation()) return;
  for (const auto& id : running_members_) {
    bool still_member = false;
    for (const auto& m : generation.members()) still_member |= MemberProcessKey(m) == id;
    if (!still_member) {
      // A member left without an agreed switch (evicted: dead or silent). Collectives with it
      // would only end at their deadline; abort them now. Harmless after an agreed switch,
      // when the communicator is no longer in use.
      running_comm_->Abort("generation " + std::to_string(generation.number()) + " no longer has " +
                           id);
      return;
    }
  }
}

void TrainingSession::OnDirectives(const v1::Directives& directives) {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = directives.paused();
  pending_checkpoint_id_ = directives.checkpoint_id();
  pending_checkpoint_step_ = directives.checkpoint_step();
}

void TrainingSession::OnLeaving(const std::string& reason, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  leaving_ = true;
  cv_.notify_all();
  if (!started_) return;
  cv_.wait_until(lock, deadline.when(), [this] { return training_done_; });
}

Status TrainingSession::Setup(const v1::JobSpec& job) {
  job_ = job;
  int threads = options_.threads > 0 ? options_.threads : std::max(1, job.threads_per_worker());
  trainer::ConfigureCpuRuntime(threads);
  if (HasTeacher(job)) {
    RETORT_ASSIGN_OR_RETURN(teacher_, BuildModel(job.teacher(), job.seed()));
  }
  RETORT_ASSIGN_OR_RETURN(student_, BuildModel(job.student(), job.seed() + 1));
  parameter_count_ = trainer::FlatParameterCount(*student_);
  RETORT_ASSIGN_OR_RETURN(train_set_, OpenDataset(job, /*train=*/true));
  RETORT_ASSIGN_OR_RETURN(test_set_, OpenDataset(job, /*train=*/false));
  if (teacher_) RETORT_RETURN_IF_ERROR(CheckTeacherBeatsChance(job, *teacher_, *test_set_));
  RETORT_ASSIGN_OR_RETURN(loader_,
                          trainer::data::Loader::Create(train_set_, MakeLoaderOptions(job, true)));
  total_steps_ = TotalSteps(job, loader_->sampler().steps_per_epoch());
  replicate_every_steps_ = std::max<int64_t>(1, job.checkpoint().replicate_every_steps());
  output_dir_ = job.output_dir().empty() ? options_.default_output_dir : job.output_dir();
  RETORT_RETURN_IF_ERROR(MakeDirectories(output_dir_));
  LOG_INFO("trainer") << "job '" << job.name() << "': "
                      << (teacher_ ? teacher_->Describe() + " -> " : std::string("supervised "))
                      << student_->Describe() << " (" << parameter_count_ << " parameters), "
                      << train_set_->size() << " training samples, " << total_steps_ << " steps of "
                      << job.global_batch() << ", " << threads << " thread(s)";
  return Status::Ok();
}

void TrainingSession::TrainingThread() {
  Status s = Train();
  if (!s.ok()) LOG_ERROR("trainer") << "training stopped: " << s;
  if (!shard_writer_.Drain(Deadline::AfterMs(options_.comm_timeout_ms)))
    LOG_WARN("trainer") << "a checkpoint shard is still being written after "
                        << options_.comm_timeout_ms << " ms; leaving without its ack";
  {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = s;
    training_done_ = true;
  }
  cv_.notify_all();
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_comm_ = nullptr;
  }
  kd_step_.reset();
  shard_comm_.reset();
  comm_.reset();
  if (agent_)
    agent_->RequestStop(s.ok() ? (done_ ? "completed" : "left")
                               : "training failed: " + s.message());
}

std::optional<TrainingSession::Assignment> TrainingSession::WaitForAssignment(
    uint64_t after, std::optional<Deadline> deadline, bool* timed_out) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (leaving_) return std::nullopt;
    if (latest_ && latest_->generation.number() > after && latest_->rank >= 0 &&
        latest_->generation.state() == v1::JOB_STATE_RUNNING &&
        latest_->generation.plan().total_elements() == parameter_count_)
      return latest_;
    // Times out only when no newer generation formed at all (one that is waiting for more
    // workers, or excludes this worker, is progress).
    if (deadline && deadline->Expired() && !(latest_ && latest_->generation.number() > after)) {
      *timed_out = true;
      return std::nullopt;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

Status TrainingSession::Train() {
  // After a failed generation, how long to wait for the coordinator's next one before forcing
  // a membership change (when nobody died, nobody else would).
  // Doubles with every forced re-join in a row (transient failures back off), back to
  // kStuckGenerationMs once a generation completes a step.
  std::optional<Deadline> stuck_deadline;
  int64_t stuck_ms = kStuckGenerationMs;
  while (!done_) {
    bool timed_out = false;
    auto a = WaitForAssignment(active_generation_, stuck_deadline, &timed_out);
    if (timed_out) {
      LOG_WARN("trainer") << "no new generation " << stuck_ms << " ms after generation "
                          << active_generation_ << " failed; leaving and re-joining to force one";
      RejoinToRecover();
      stuck_ms = std::min(stuck_ms * 2, kMaxStuckGenerationMs);
      stuck_deadline = Deadline::AfterMs(stuck_ms);
      continue;
    }
    if (!a) return Status::Ok();  // leaving before (or between) generations
    stuck_deadline.reset();
    Status s = StartGeneration(*a);
    if (s.code() == StatusCode::kDataLoss) return s;  // no usable checkpoint: never from step 0
    if (!s.ok()) {
      // A newer generation superseded this one while bootstrapping, or a peer vanished: wait
      // for the coordinator's next generation.
      LOG_WARN("trainer") << "generation " << a->generation.number() << " not started: " << s;
      ReportFailedPeers(*a, s);
      active_generation_ = a->generation.number();
      stuck_deadline = Deadline::AfterMs(stuck_ms);
      continue;
    }
    const int64_t first_step = global_step_;
    s = RunSteps(*a);
    if (global_step_ > first_step) stuck_ms = kStuckGenerationMs;
    if (!s.ok() && FailJobIfRecurring(*a, s)) return s;
    if (!s.ok()) {
      LOG_WARN("trainer") << "generation " << a->generation.number() << " interrupted: " << s;
      ReportFailedPeers(*a, s);
      stuck_deadline = Deadline::AfterMs(stuck_ms);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (leaving_ && !done_) return Status::Ok();
  }
  return Status::Ok();
}

bool TrainingSession::Superseded(uint64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  return leaving_ || (latest_ && latest_->generation.number() > generation);
}

bool TrainingSession::FailJobIfRecurring(const Assignment& a, const Status& error) {
  const bool disturbed =
      Superseded(a.generation.number()) || (comm_ && !comm_->FailedPeers().empty());
  v1::JobFailure failure = MakeJobFailure(failure_phase_, error, global_step_, disturbed);
  if (failure.kind() != v1::FAILURE_KIND_RECURRING) return false;
  LOG_ERROR("trainer") << "step " << global_step_ + 1 << " failed in " << failure.phase()
                       << " with an error that recurs on every try; failing the job: " << error;
  if (agent_) agent_->FailJob(std::move(failure));
  return true;
}

void TrainingSession::RejoinToRecover() {
  std::string member_id;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!latest_) return;
    member_id = latest_->member_id;
    generation = latest_->generation.number();
  }
  // Leaving changes membership, so the coordinator forms a new generation; the agent's next
  // heartbeat finds this member gone and joins again under a new id (with its state intact).
  v1::LeaveRequest leave;
  leave.set_member_id(member_id);
  leave.set_reason("generation " + std::to_string(generation) +
                   " failed and no newer one formed; re-joining");
  Status s = client_->Leave(leave);
  if (!s.ok()) LOG_WARN("trainer") << "leave to re-join failed: " << s;
}

Status TrainingSession::StartGeneration(const Assignment& a) {
  const v1::Generation& g = a.generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_comm_ = nullptr;
    running_members_.clear();
  }
  kd_step_.reset();
  shard_comm_.reset();
  comm_.reset();

  CoordinatorStore store(client_, a.member_id, g.number());
  collectives::ucx::UcxCommunicatorOptions uo;
  uo.default_timeout = std::chrono::milliseconds(options_.comm_timeout_ms);
  uo.bootstrap_timeout = std::chrono::milliseconds(options_.comm_timeout_ms);
  uo.cancelled = [this, number = g.number()] { return Superseded(number); };
  auto t0 = Clock::now();
  if (auto layout = HierarchicalLayout(g)) {
    RETORT_ASSIGN_OR_RETURN(comm_, collectives::ucx::CreateHierarchicalUcxCommunicator(
                                       &store, a.rank, g.members_size(), g.number(), *layout, uo));
  } else {
    RETORT_ASSIGN_OR_RETURN(auto ucx, collectives::ucx::UcxCommunicator::Create(
                                          &store, a.rank, g.members_size(), g.number(), uo));
    comm_ = std::move(ucx);
  }
  shard_comm_ = std::make_unique<CommunicatorShardComm>(comm_.get());
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_comm_ = comm_.get();
    for (const auto& m : g.members()) running_members_.push_back(MemberProcessKey(m));
  }

  trainer::ShardPlan plan;
  for (const auto& r : g.plan().ranges()) plan.ranges.push_back({r.offset(), r.count()});
  if (!teacher_ && HasTeacher(job_)) {
    RETORT_ASSIGN_OR_RETURN(teacher_, BuildModel(job_.teacher(), job_.seed()));
  }
  if (!student_) {
    RETORT_ASSIGN_OR_RETURN(student_, BuildModel(job_.student(), job_.seed() + 1));
  }
  RETORT_ASSIGN_OR_RETURN(
      kd_step_, trainer::KdStep::Create(std::move(teacher_), std::move(student_), shard_comm_.get(),
                                        plan, MakeKdStepOptions(job_, total_steps_)));
  RETORT_RETURN_IF_ERROR(RestoreState(a));
  RETORT_RETURN_IF_ERROR(loader_->Seek(position_, a.rank, g.members_size()));
  active_generation_ = g.number();
  LOG_INFO("trainer")
      << "generation " << g.number() << ": rank " << a.rank << " of " << g.members_size() << " on "
      << comm_->name() << " (ready in "
      << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()
      << " ms), step " << global_step_ << "/" << total_steps_;
  return Status::Ok();
}

Status TrainingSession::RunSteps(const Assignment& a) {
  failure_phase_ = FailurePhase::kCommunication;
  float flags[kFlagCount];
  auto last_log = Clock::now();
  while (global_step_ < total_steps_) {
    auto step_start = Clock::now();
    bool leaving_here;
    {
      std::lock_guard<std::mutex> lock(mu_);
      leaving_here = leaving_;
      flags[kNewerGeneration] =
          latest_ && latest_->generation.number() > active_generation_ ? 1.f : 0.f;
      flags[kLeaving] = leaving_ ? 1.f : 0.f;
      flags[kPaused] = paused_ ? 1.f : 0.f;
    }
    RETORT_RETURN_IF_ERROR(Await(comm_->AllReduce(
        {flags, kFlagCount, collectives::DataType::kFloat32}, collectives::ReduceOp::kSum)));
    if (flags[kNewerGeneration] > 0 || flags[kLeaving] > 0) {
      RETORT_RETURN_IF_ERROR(SaveState());
      LOG_INFO("trainer") << "stopping generation " << active_generation_ << " at step "
                          << global_step_
                          << (leaving_here ? " (this member leaves)" : " (membership changes)");
      return Status::Ok();
    }
    if (flags[kPaused] > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    failure_phase_ = FailurePhase::kData;
    RETORT_ASSIGN_OR_RETURN(trainer::Batch batch, loader_->Next(Deadline::AfterMs(kBatchWaitMs)));
    failure_phase_ = FailurePhase::kStep;
    RETORT_ASSIGN_OR_RETURN(trainer::StepResult r,
                            kd_step_->Step(batch, loader_->stats().last_wait_seconds));
    failure_phase_ = FailurePhase::kCommunication;
    position_ = loader_->position();
    ++global_step_;
    if (global_step_ % replicate_every_steps_ == 0 || global_step_ == total_steps_)
      RETORT_RETURN_IF_ERROR(CaptureReplica());
    WriteCheckpointIfDue(a);
    double seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
    double sps = seconds > 0 ? static_cast<double>(job_.global_batch()) / seconds : 0;
    v1::StepMetrics metrics;
    metrics.set_loss(r.loss);
    metrics.set_samples_per_second(sps);
    metrics.set_step_seconds(seconds);
    metrics.set_learning_rate(r.lr);
    metrics.set_data_wait_fraction(seconds > 0 ? r.timing.data_wait / seconds : 0);
    if (agent_) agent_->ReportProgress(global_step_, position_.epoch, metrics);
    if (a.rank == 0) {
      WriteMetrics(r, sps);
      if (Clock::now() - last_log > std::chrono::seconds(10) || global_step_ == total_steps_) {
        last_log = Clock::now();
        LOG_INFO("trainer") << "step " << global_step_ << "/" << total_steps_ << " loss " << r.loss
                            << " lr " << r.lr << " " << static_cast<int>(sps) << " samples/s"
                            << (r.skipped ? " (skipped)" : "");
      }
    }
  }
  return Finish(a);
}

void TrainingSession::WriteMetrics(const trainer::StepResult& r, double samples_per_second) {
  if (!metrics_.is_open()) metrics_.open(output_dir_ + "/metrics.jsonl", std::ios::app);
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  nlohmann::json j{{"step", global_step_},
                   {"time_unix_ms", now_ms},
                   {"epoch", position_.epoch},
                   {"generation", active_generation_},
                   {"world_size", comm_->size()},
                   {"loss", r.loss},
                   {"grad_norm", r.grad_norm},
                   {"lr", r.lr},
                   {"skipped", r.skipped},
                   {"samples_per_second", samples_per_second},
                   {"timing", nlohmann::json::parse(trainer::StepTimingJson(r.timing))}};
  metrics_ << j.dump() << '\n';
  metrics_.flush();
}

Status TrainingSession::Finish(const Assignment& a) {
  // A checkpoint at the last step commits only if every rank acks it before any leaves: the
  // all-reduce below orders every rank's ack before every rank's leave.
  if (!shard_writer_.Drain(Deadline::AfterMs(options_.comm_timeout_ms)))
    LOG_WARN("trainer") << "the last checkpoint's shard is still being written";
  // Top-1 on the test split: each rank evaluates a contiguous slice; counts are all-reduced.
  const int64_t n = test_set_->size();
  const int world = comm_->size(), rank = comm_->rank();
  const int64_t begin = n * rank / world, end = n * (rank + 1) / world;
  std::vector<trainer::Batch> batches;
  failure_phase_ = FailurePhase::kData;  // a corrupt test sample fails every try
  if (job_.evaluate()) {
    RETORT_ASSIGN_OR_RETURN(batches, ReadEvalBatches(*test_set_, begin, end));
  }
  failure_phase_ = FailurePhase::kCommunication;
  auto t0 = Clock::now();
  float counts[3] = {0, 0, job_.evaluate() ? static_cast<float>(end - begin) : 0.f};
  counts[0] = static_cast<float>(trainer::EvaluateTop1(kd_step_->student(), batches).correct);
  if (HasTeacher(job_))
    counts[1] = static_cast<float>(trainer::EvaluateTop1(kd_step_->teacher(), batches).correct);
  RETORT_RETURN_IF_ERROR(Await(
      comm_->AllReduce({counts, 3, collectives::DataType::kFloat32}, collectives::ReduceOp::kSum)));
  // "Not evaluated" (evaluate: false, or an empty test split) is not a top-1 of 0: result.json
  // then says "evaluated": false and carries no top-1 fields.
  const bool evaluated = job_.evaluate() && counts[2] > 0;
  const double student_top1 = counts[0] / std::max(1.0f, counts[2]),
               teacher_top1 = counts[1] / std::max(1.0f, counts[2]);
  done_ = true;
  if (a.rank != 0) return Status::Ok();
  std::string weights = output_dir_ + "/student.safetensors";
  RETORT_RETURN_IF_ERROR(trainer::ExportModelSafetensors(kd_step_->student(), weights));
  nlohmann::json result{{"job", job_.name()},         {"steps", global_step_},
                        {"evaluated", evaluated},     {"student", kd_step_->student().Describe()},
                        {"student_weights", weights}, {"metrics", output_dir_ + "/metrics.jsonl"}};
  if (evaluated) {
    result["test_samples"] = static_cast<int64_t>(counts[2]);
    result["student_top1"] = student_top1;
    result["eval_seconds"] = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  if (HasTeacher(job_)) {
    result["teacher"] = kd_step_->teacher().Describe();
    if (evaluated) result["teacher_top1"] = teacher_top1;
  }
  RETORT_RETURN_IF_ERROR(WriteFileAtomically(output_dir_ + "/result.json", result.dump(2) + "\n"));
  LOG_INFO("trainer") << "RESULT " << (evaluated ? "" : "not evaluated ") << result.dump();
  return Status::Ok();
}

}  // namespace retort::worker
