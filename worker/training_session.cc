#include "worker/training_session.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/backoff_policies.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "trainer/cpu_runtime.h"
#include "trainer/data/batch.h"
#include "trainer/device.h"
#include "trainer/flat_parameters.h"
#include "trainer/kd_loss.h"
#include "trainer/model_buffers.h"
#include "trainer/model_flops.h"
#include "trainer/models/model.h"
#include "trainer/safetensors.h"
#include "trainer/sharded_adamw.h"
#include "worker/coordinator_bootstrap_store.h"
#include "worker/data_plane.h"
#include "worker/exported_teacher.h"
#include "worker/job_result.h"
#include "worker/job_setup.h"
#include "worker/worker_device.h"

namespace retort::worker {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kBatchWaitMs = 120000;
// See Train(): how long a worker whose generation failed waits for the next one.
constexpr const BackoffPolicy& kStuckGeneration = backoff_policies::kStuckGenerationRejoin;

// Layout of nodes for the hierarchical communicator: usable when every node holds the same
// number (> 1) of ranks and there is more than one node.
// Each rank's index in g.nodes (ranks node-major; a rank no group names counts as its own node).
std::vector<int> NodeOfRank(const v1::Generation& g) {
  std::vector<int> node_of_rank(g.members_size());
  for (int r = 0; r < g.members_size(); ++r) node_of_rank[r] = g.nodes_size() + r;
  for (int n = 0; n < g.nodes_size(); ++n)
    for (int r : g.nodes(n).ranks())
      if (r >= 0 && r < g.members_size()) node_of_rank[r] = n;
  return node_of_rank;
}

}  // namespace

TrainingSession::TrainingSession(TrainingOptions options, CoordinatorClient* client)
    : options_(std::move(options)), client_(client) {}

TrainingSession::~TrainingSession() {
  mailbox_.Leave();
  if (thread_.joinable()) thread_.join();
}

Status TrainingSession::result() const { return mailbox_.result(); }

StatusOr<int64_t> TrainingSession::OnJoined(const v1::JoinResponse& response) {
  if (mailbox_.started()) return parameter_count_;  // a re-join after a coordinator restart
  RETORT_RETURN_IF_ERROR(Setup(response.job()));
  mailbox_.MarkStarted();
  thread_ = std::thread([this] { TrainingThread(); });
  return parameter_count_;
}

void TrainingSession::OnGeneration(const v1::Generation& generation, const std::string& member_id,
                                   int rank) {
  mailbox_.PostGeneration(generation, member_id, rank);
}

void TrainingSession::OnDirectives(const v1::Directives& directives) {
  mailbox_.PostDirectives(directives);
}

void TrainingSession::OnLeaving(const std::string& /*reason*/, Deadline deadline) {
  mailbox_.LeaveAndWaitForTraining(deadline);
}

Status TrainingSession::Setup(const v1::JobSpec& job) {
  job_ = job;
  // This (the agent's) thread loads and checks the teacher on the device: select it first.
  RETORT_RETURN_IF_ERROR(trainer::SelectThreadDevice(
      CudaIndex(options_.device), options_.device_selector, "worker setup on " + options_.device));
  checkpointer_ = std::make_unique<Checkpointer>(client_, job.checkpoint().every_steps(),
                                                 job.seed(), options_.pause_points);
  int threads = options_.threads > 0 ? options_.threads : std::max(1, job.threads_per_worker());
  trainer::ConfigureCpuRuntime(threads);
  if (HasTeacher(job) && job.teacher().exported_path().empty()) {
    RETORT_ASSIGN_OR_RETURN(teacher_, BuildModel(job.teacher(), job.seed()));
  }
  RETORT_ASSIGN_OR_RETURN(student_, BuildModel(job.student(), job.seed() + 1));
  parameter_count_ = trainer::FlatParameterCount(*student_);
  model_flops_per_sample_ = ModelFlopsPerSample(job);
  if (const int cuda = CudaIndex(options_.device); cuda >= 0)
    device_peak_flops_ = trainer::PeakBf16FlopsForDevice(trainer::CudaDeviceName(cuda));
  RETORT_ASSIGN_OR_RETURN(train_set_, OpenDataset(job, /*train=*/true));
  RETORT_ASSIGN_OR_RETURN(test_set_, OpenDataset(job, /*train=*/false));
  // An exported teacher is checked against this worker's device and the dataset, then loaded.
  if (!job.teacher().exported_path().empty()) {
    RETORT_ASSIGN_OR_RETURN(teacher_, LoadExportedTeacher(job, options_.device, *test_set_));
  }
  if (teacher_) RETORT_RETURN_IF_ERROR(CheckTeacherBeatsChance(job, *teacher_, *test_set_));
  RETORT_ASSIGN_OR_RETURN(const int decode_device, ResolveDecodeDevice(job, options_.device));
  if (decode_device >= 0)
    LOG_INFO("trainer") << "JPEGs decode on cuda:" << decode_device << " (nvJPEG)";
  trainer::data::LoaderOptions loader_options =
      MakeLoaderOptions(job, true, options_.device, decode_device);
  loader_options.device_selector = options_.device_selector;
  RETORT_ASSIGN_OR_RETURN(loader_, trainer::data::Loader::Create(train_set_, loader_options));
  mixing_ = MakeMixingOptions(job);
  RETORT_RETURN_IF_ERROR(trainer::data::ValidateMixingOptions(mixing_));
  jitter_ = MakeColorJitterOptions(job);
  RETORT_RETURN_IF_ERROR(trainer::data::ValidateColorJitterOptions(jitter_));
  erasing_ = MakeRandomErasingOptions(job);
  RETORT_RETURN_IF_ERROR(trainer::data::ValidateRandomErasingOptions(erasing_));
  total_steps_ = TotalSteps(job, loader_->sampler().steps_per_epoch());
  replicate_every_steps_ = std::max<int64_t>(1, job.checkpoint().replicate_every_steps());
  output_dir_ = job.output_dir().empty() ? options_.default_output_dir : job.output_dir();
  RETORT_RETURN_IF_ERROR(MakeDirectories(output_dir_));
  step_log_ = std::make_unique<StepLog>(output_dir_, options_.node, options_.local_rank);
  tracer_ =
      std::make_unique<TraceRecorder>(output_dir_ + "/traces", options_.node, options_.local_rank);
  if (options_.trace_last_step > 0)
    tracer_->SetWindow(options_.trace_first_step, options_.trace_last_step);
  LOG_INFO("trainer") << "job '" << job.name() << "': "
                      << (teacher_ ? teacher_->Describe() + " -> " : std::string("supervised "))
                      << student_->Describe() << " (" << parameter_count_ << " parameters), "
                      << train_set_->size() << " training samples, " << total_steps_ << " steps of "
                      << job.global_batch() << ", " << threads << " thread(s) on "
                      << options_.device;
  return Status::Ok();
}

void TrainingSession::TrainingThread() {
  // Every allocation, kernel and pinned buffer of the steps below is on this thread.
  Status s = trainer::SelectThreadDevice(CudaIndex(options_.device), options_.device_selector,
                                         "training thread on " + options_.device);
  if (s.ok()) s = Train();
  if (tracer_) tracer_->Flush();  // a window the job ended inside
  if (!s.ok()) LOG_ERROR("trainer") << "training stopped: " << s;
  if (checkpointer_ && !checkpointer_->Drain(Deadline::AfterMs(options_.comm_timeout_ms)))
    LOG_WARN("trainer") << "a checkpoint shard is still being written after "
                        << options_.comm_timeout_ms << " ms; leaving without its ack";
  mailbox_.FinishTraining(s);
  mailbox_.ClearRunning();
  kd_step_.reset();
  shard_comm_.reset();
  comm_.reset();
  if (!agent_) return;
  if (s.ok() && done_)
    agent_->CompleteJob();
  else
    agent_->RequestStop(s.ok() ? "left" : "training failed: " + s.message());
}

Status TrainingSession::Train() {
  // After a failed generation, how long to wait for the coordinator's next one before forcing
  // a membership change (when nobody died, nobody else would).
  // Doubles with every forced re-join in a row (transient failures back off), back to
  // its first wait once a generation completes a step (kStuckGeneration).
  std::optional<Deadline> stuck_deadline;
  int stuck_rejoins = 0;  // forced re-joins in a row
  int64_t stuck_ms = kStuckGeneration.Nth(1).count();
  GenerationStartFailures start_failures;
  while (!done_) {
    bool timed_out = false;
    auto a = mailbox_.WaitForAssignment(active_generation_, parameter_count_, stuck_deadline,
                                        &timed_out);
    if (timed_out) {
      LOG_WARN("trainer") << "no new generation " << stuck_ms << " ms after generation "
                          << active_generation_ << " failed; leaving and re-joining to force one";
      RejoinToRecover();
      stuck_ms = kStuckGeneration.Nth(++stuck_rejoins + 1).count();
      stuck_deadline = Deadline::AfterMs(stuck_ms);
      continue;
    }
    if (!a) return Status::Ok();  // leaving before (or between) generations
    stuck_deadline.reset();
    Status s = StartGeneration(*a);
    if (s.code() == StatusCode::kDataLoss) return s;  // no usable checkpoint: never from step 0
    if (start_failures.Failed(s)) {
      LOG_ERROR("trainer") << "generation " << a->generation.number()
                           << " not started, with the same error as the "
                           << start_failures.in_a_row() - 1
                           << " starts before it; failing the job: " << s;
      if (agent_) agent_->FailJob(MakeJobFailure(FailurePhase::kSetup, s, global_step_));
      return s;
    }
    if (!s.ok()) {
      // A newer generation superseded this one while bootstrapping, or a peer vanished: wait
      // for the coordinator's next generation.
      LOG_WARN("trainer") << "generation " << a->generation.number() << " not started: " << s;
      ReportFailedPeers(*a, s);
      active_generation_ = a->generation.number();
      stuck_deadline = Deadline::AfterMs(stuck_ms);
      continue;
    }
    start_failures.Started();
    const int64_t first_step = global_step_;
    s = RunSteps(*a);
    if (global_step_ > first_step) {
      stuck_rejoins = 0;
      stuck_ms = kStuckGeneration.Nth(1).count();
    }
    if (!s.ok() && FailJobIfRecurring(*a, s)) return s;
    if (!s.ok()) {
      LOG_WARN("trainer") << "generation " << a->generation.number() << " interrupted: " << s;
      ReportFailedPeers(*a, s);
      stuck_deadline = Deadline::AfterMs(stuck_ms);
      continue;
    }
    if (mailbox_.leaving() && !done_) return Status::Ok();
  }
  return Status::Ok();
}

bool TrainingSession::Superseded(uint64_t generation) const {
  return mailbox_.Superseded(generation);
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
  const std::optional<Assignment> latest = mailbox_.latest();
  if (!latest) return;
  const std::string member_id = latest->member_id;
  const uint64_t generation = latest->generation.number();
  // Leaving changes membership, so the coordinator forms a new generation; the agent's next
  // heartbeat finds this member gone and joins again under a new id (with its state intact).
  v1::LeaveRequest leave;
  leave.set_member_id(member_id);
  leave.set_reason("generation " + std::to_string(generation) +
                   " failed and no newer one formed; re-joining");
  Status s = client_->Leave(leave);
  if (!s.ok()) LOG_WARN("trainer") << "leave to re-join failed: " << s;
}

Status TrainingSession::AttachStep(trainer::ShardPlan plan) {
  if (kd_step_) return kd_step_->Reconfigure(shard_comm_.get(), std::move(plan));
  // The first generation: the models built in Setup() move into the step for good.
  trainer::KdStepOptions step_options = MakeKdStepOptions(job_, total_steps_);
  step_options.device = torch::Device(options_.device);
  step_options.device_selector = options_.device_selector;
  RETORT_ASSIGN_OR_RETURN(
      kd_step_, trainer::KdStep::Create(std::move(teacher_), std::move(student_), shard_comm_.get(),
                                        std::move(plan), step_options));
  initial_params_ = kd_step_->flat().params().clone();
  initial_buffers_ = trainer::PackModelBuffers(kd_step_->student());
  return Status::Ok();
}

Status TrainingSession::StartGeneration(const Assignment& a) {
  const v1::Generation& g = a.generation;
  // Members of the last generation this process started (0: none).
  const size_t previous_world = mailbox_.ClearRunning();
  // The step (models, flat buffer) survives the switch; only its communicator is replaced.
  if (kd_step_) kd_step_->DetachComm();
  shard_comm_.reset();
  comm_.reset();

  CoordinatorBootstrapStore store(client_, a.member_id, g.number());
  DataPlaneOptions dp;
  dp.device = options_.device;
  dp.emulate_device = options_.emulate_device_data_plane;
  dp.ucx.default_timeout = std::chrono::milliseconds(options_.comm_timeout_ms);
  dp.ucx.bootstrap_timeout = std::chrono::milliseconds(options_.comm_timeout_ms);
  dp.ucx.cancelled = [this, number = g.number()] { return Superseded(number); };
  dp.ucx.ucx.net_devices = options_.data_plane_devices;
  dp.ucx.ucx.cma_policy = options_.cma_policy;
  auto t0 = Clock::now();
  RETORT_ASSIGN_OR_RETURN(DataPlane plane, CreateDataPlane(&store, g, a.rank, dp));
  comm_ = std::move(plane.comm);
  device_events_ = std::move(plane.events);
  shard_comm_ = std::make_unique<CommunicatorShardComm>(comm_.get(), tracer_.get(),
                                                        plane.trainer_memory, device_events_.get());
  std::vector<std::string> processes;
  for (const auto& m : g.members()) processes.push_back(MemberProcessKey(m));
  mailbox_.SetRunning(g.number(), std::move(processes),
                      [comm = comm_.get()](const std::string& why) { comm->Abort(why); });

  // A switch after members left or died: the old generation stopped, the new communicator is
  // up and no state has moved yet.
  if (options_.pause_points && static_cast<size_t>(g.members_size()) < previous_world &&
      options_.pause_points->Reach(
          kPauseGenerationSwitch,
          "generation " + std::to_string(g.number()) + ", rank " + std::to_string(a.rank),
          [this, number = g.number()] { return Superseded(number); }) &&
      Superseded(g.number()))
    return AbortedError("generation " + std::to_string(g.number()) +
                        " was superseded before its state moved");

  trainer::ShardPlan plan;
  for (const auto& r : g.plan().ranges()) plan.ranges.push_back({r.offset(), r.count()});
  replica_distance_ = ReplicaDistance(NodeOfRank(g));
  RETORT_RETURN_IF_ERROR(AttachStep(std::move(plan)));
  RETORT_RETURN_IF_ERROR(RestoreState(a));
  RETORT_RETURN_IF_ERROR(loader_->Seek(position_, a.rank, g.members_size()));
  active_generation_ = g.number();
  const int64_t started_us = UnixMicros();
  tracer_->OnGenerationStarted(g.number(), a.rank, g.members_size(), started_us);
  if (options_.step_observer)
    options_.step_observer->OnGenerationStarted(g.number(), a.rank, g.members_size(), started_us);
  LOG_INFO("trainer")
      << "generation " << g.number() << ": rank " << a.rank << " of " << g.members_size() << " on "
      << comm_->name() << " (ready in "
      << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()
      << " ms), step " << global_step_ << "/" << total_steps_ << ", replicas " << replica_distance_
      << " rank(s) along the ring";
  return Status::Ok();
}

Status TrainingSession::RunSteps(const Assignment& a) {
  failure_phase_ = FailurePhase::kCommunication;
  // Rebalancing starts even in every generation (the loader's Seek did so too).
  const auto& straggler = job_.elastic().straggler();
  rebalancer_.reset();
  last_step_samples_ = last_step_compute_seconds_ = 0;
  if (straggler.rebalance() && comm_->size() > 1) {
    RebalanceOptions o;
    o.global_batch = job_.global_batch();
    o.unit = loader_->sampler().config().split_unit;
    o.threshold = straggler.threshold();
    o.window_steps = straggler.window_steps();
    o.min_share = straggler.min_share();
    rebalancer_ = std::make_unique<BatchRebalancer>(o, comm_->size());
  }
  StepBoundaryExchange exchange(a.rank, comm_->size(), rebalancer_ != nullptr);
  auto last_log = Clock::now();
  while (global_step_ < total_steps_) {
    auto step_start = Clock::now();
    const StepBoundaryFlags boundary = mailbox_.AtStepBoundary(active_generation_);
    const bool leaving_here = boundary.leaving;
    const int64_t trace_first = boundary.trace_first_step, trace_last = boundary.trace_last_step;
    exchange.Clear();
    exchange.SetFlags(boundary.newer_generation, boundary.leaving, boundary.paused);
    if (rebalancer_) WriteRebalancing(exchange, a.rank);
    RETORT_RETURN_IF_ERROR(
        Await(comm_->AllReduce({exchange.data(), exchange.size(), collectives::DataType::kFloat32},
                               collectives::ReduceOp::kSum)));
    if (exchange.newer_generation() || exchange.leaving()) {
      RETORT_RETURN_IF_ERROR(SaveState());
      LOG_INFO("trainer") << "stopping generation " << active_generation_ << " at step "
                          << global_step_
                          << (leaving_here ? " (this member leaves)" : " (membership changes)");
      return Status::Ok();
    }
    if (rebalancer_) RETORT_RETURN_IF_ERROR(ApplyRebalancing(exchange, a.rank));
    if (exchange.paused()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    if (trace_last > 0) tracer_->SetWindow(trace_first, trace_last);
    tracer_->BeginStep(global_step_ + 1);
    const int64_t data_start_us = UnixMicros();
    failure_phase_ = FailurePhase::kData;
    RETORT_ASSIGN_OR_RETURN(trainer::Batch batch, loader_->Next(Deadline::AfterMs(kBatchWaitMs)));
    // Per-sample colour jitter and erasing first, then mixing of the pairs (timm's order: they
    // are part of the sample's transform, before and after its normalisation; mixing is of
    // the collated batch).
    if (jitter_.strength > 0) RETORT_RETURN_IF_ERROR(trainer::data::JitterBatch(jitter_, &batch));
    if (erasing_.probability > 0)
      RETORT_RETURN_IF_ERROR(trainer::data::EraseBatch(erasing_, &batch));
    if (trainer::data::MixingEnabled(mixing_))
      RETORT_RETURN_IF_ERROR(
          trainer::data::MixBatch(mixing_, loader_->sampler().BatchSize(batch.step), &batch));
    failure_phase_ = FailurePhase::kStep;
    const int64_t local_batch = static_cast<int64_t>(batch.sample_indices.size());
    RETORT_ASSIGN_OR_RETURN(trainer::StepResult r,
                            kd_step_->Step(batch, loader_->stats().last_wait_seconds));
    // This rank's own compute (its waits for data and for the others excluded): what straggler
    // rebalancing follows.
    const double compute_s =
        r.timing.teacher_forward + r.timing.student_forward + r.timing.backward;
    last_step_samples_ = static_cast<double>(local_batch);
    last_step_compute_seconds_ = compute_s;
    failure_phase_ = FailurePhase::kCommunication;
    position_ = loader_->position();
    ++global_step_;
    if (global_step_ % replicate_every_steps_ == 0 || global_step_ == total_steps_)
      RETORT_RETURN_IF_ERROR(CaptureReplica());
    const auto checkpoint_start = Clock::now();
    // Only a step at which a checkpoint was due has a checkpoint phase (0 otherwise, not the
    // check's microsecond).
    const bool checkpointed = checkpointer_->WriteIfDue(
        mailbox_.pending_checkpoint(),
        CheckpointSource{&a, kd_step_.get(), CurrentMeta(), comm_->rank(), comm_->size()});
    const double checkpoint_s =
        checkpointed ? std::chrono::duration<double>(Clock::now() - checkpoint_start).count() : 0;
    double seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
    double sps = seconds > 0 ? static_cast<double>(job_.global_batch()) / seconds : 0;
    v1::StepMetrics metrics;
    metrics.set_loss(r.loss);
    metrics.set_samples_per_second(sps);
    metrics.set_step_seconds(seconds);
    metrics.set_learning_rate(r.lr);
    metrics.set_data_wait_fraction(seconds > 0 ? r.timing.data_wait / seconds : 0);
    metrics.set_data_wait_seconds(r.timing.data_wait);
    metrics.set_teacher_forward_seconds(r.timing.teacher_forward);
    metrics.set_student_forward_seconds(r.timing.student_forward);
    metrics.set_backward_seconds(r.timing.backward);
    metrics.set_comm_exposed_seconds(r.timing.comm_exposed);
    metrics.set_optimizer_seconds(r.timing.optimizer);
    metrics.set_checkpoint_seconds(checkpoint_s);
    metrics.set_local_batch(local_batch);
    metrics.set_compute_samples_per_second(
        compute_s > 0 ? static_cast<double>(local_batch) / compute_s : 0);
    StepRecord record;
    record.step = global_step_;
    record.epoch = position_.epoch;
    record.generation = active_generation_;
    record.rank = a.rank;
    record.world_size = comm_->size();
    record.loss = r.loss;
    record.learning_rate = r.lr;
    record.grad_norm = r.grad_norm;
    record.skipped = r.skipped;
    record.global_batch = job_.global_batch();
    record.samples_per_second = sps;
    record.step_seconds = seconds;
    record.local_batch = local_batch;
    record.compute_samples_per_second = metrics.compute_samples_per_second();
    if (model_flops_per_sample_ > 0 && device_peak_flops_ > 0)
      record.model_flops_utilization =
          model_flops_per_sample_ * sps / (comm_->size() * device_peak_flops_);
    record.timing = r.timing;
    record.checkpoint_seconds = checkpoint_s;
    record.data_start_unix_us = data_start_us;
    record.end_unix_us = UnixMicros();
    ObserveStep(record);
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
    RETORT_RETURN_IF_ERROR(EvaluateIfDue(a));
  }
  return Finish(a);
}

void TrainingSession::ObserveStep(const StepRecord& record) {
  step_log_->OnStep(record);
  tracer_->OnStep(record);
  if (options_.step_observer) options_.step_observer->OnStep(record);
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
  if (!checkpointer_->Drain(Deadline::AfterMs(options_.comm_timeout_ms)))
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
  const bool evaluated = job_.evaluate() && counts[2] > 0;
  done_ = true;
  if (a.rank != 0) return Status::Ok();
  JobResult result;
  result.job = job_.name();
  result.steps = global_step_;
  result.student = kd_step_->student().Describe();
  result.student_weights = output_dir_ + "/student.safetensors";
  result.metrics = output_dir_ + "/metrics.jsonl";
  if (HasTeacher(job_)) result.teacher = kd_step_->teacher().Describe();
  if (evaluated)
    result.evaluation = JobResult::Evaluation{
        static_cast<int64_t>(counts[2]), counts[0] / counts[2], counts[1] / counts[2],
        std::chrono::duration<double>(Clock::now() - t0).count()};
  RETORT_RETURN_IF_ERROR(
      trainer::ExportModelSafetensors(kd_step_->student(), result.student_weights));
  RETORT_RETURN_IF_ERROR(WriteJobResult(output_dir_ + "/result.json", result));
  LOG_INFO("trainer") << "RESULT " << (evaluated ? "" : "not evaluated ")
                      << JobResultJson(result).dump();
  return Status::Ok();
}

}  // namespace retort::worker
