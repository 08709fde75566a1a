#include "trainer/kd_step.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>

#include "common/logging.h"
#include "trainer/data/batch.h"
#include "trainer/flat_parameters.h"
#include "trainer/grad_reducer.h"
#include "trainer/models/model.h"
#include "trainer/teacher_logit_cache.h"

namespace retort::trainer {
namespace {

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// bf16 autocast for CUDA within a scope. The autocast API changed in LibTorch 2.4
// (device-type arguments); both spellings are kept behind the version macros.
class CudaBf16Autocast {
 public:
  explicit CudaBf16Autocast(bool enable) : enable_(enable) {
    if (!enable_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    prev_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
    prev_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
#else
    prev_enabled_ = at::autocast::is_enabled();
    prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
#endif
    at::autocast::increment_nesting();
  }
  ~CudaBf16Autocast() {
    if (!enable_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(at::kCUDA, prev_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, prev_dtype_);
#else
    at::autocast::set_enabled(prev_enabled_);
    at::autocast::set_autocast_gpu_dtype(prev_dtype_);
#endif
  }

 private:
  bool enable_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kBFloat16;
};

}  // namespace

int64_t FlatParameterCount(Model& model) {
  int64_t n = 0;
  for (auto& [name, p] : model.NamedParameters()) n += p.numel();
  return n;
}

KdStep::~KdStep() = default;

StatusOr<std::unique_ptr<KdStep>> KdStep::Create(std::unique_ptr<Model> teacher,
                                                 std::unique_ptr<Model> student, ShardComm* comm,
                                                 ShardPlan plan, KdStepOptions options) {
  if (!teacher || !student || !comm)
    return InvalidArgumentError("KdStep needs a teacher, a student and a ShardComm");
  RETORT_RETURN_IF_ERROR(ValidateKdLossOptions(options.loss));
  RETORT_RETURN_IF_ERROR(ValidateAdamWOptions(options.optimizer));
  if (options.comm_timeout_ms <= 0)
    return InvalidArgumentError("KdStep: comm_timeout_ms must be > 0");
  std::unique_ptr<KdStep> step(new KdStep());
  step->teacher_ = std::move(teacher);
  step->student_ = std::move(student);
  step->comm_ = comm;
  step->options_ = options;
  step->teacher_->SetTraining(false);
  for (auto& [name, p] : step->teacher_->NamedParameters()) p.requires_grad_(false);
  step->student_->SetTraining(true);
  RETORT_ASSIGN_OR_RETURN(step->flat_, FlatParameters::Create(*step->student_));
  RETORT_RETURN_IF_ERROR(ValidateShardPlan(plan, step->flat_->numel(), comm->world_size()));
  step->plan_ = plan;
  RETORT_ASSIGN_OR_RETURN(
      step->reducer_, GradReducer::Create(step->flat_.get(), comm, plan, options.bucket_elements));
  step->optimizer_ = std::make_unique<ShardedAdamW>(options.optimizer, step->flat_->params(),
                                                    plan.ranges[comm->rank()]);
  step->scalars_ = torch::zeros({2}, step->flat_->params().options());
  return step;
}

Status KdStep::ValidateBatch(const Batch& b) const {
  if (!b.images.defined() || b.images.dim() != 4 || b.images.scalar_type() != torch::kFloat)
    return InvalidArgumentError("batch " + std::to_string(b.step) +
                                ": images must be float32 [n, C, H, W]");
  const int64_t n = b.images.size(0);
  if (!b.labels.defined() || b.labels.dim() != 1 || b.labels.size(0) != n ||
      b.labels.scalar_type() != torch::kLong)
    return InvalidArgumentError("batch " + std::to_string(b.step) + ": labels must be int64 [" +
                                std::to_string(n) + "]");
  if (!(b.weight >= 0.0 && b.weight <= 1.0))
    return InvalidArgumentError("batch " + std::to_string(b.step) + ": weight " +
                                std::to_string(b.weight) + " is outside [0, 1]");
  if (n > 0 && b.weight == 0.0)
    return InvalidArgumentError("batch " + std::to_string(b.step) +
                                ": weight is 0 for a non-empty slice");
  return Status::Ok();
}

torch::Tensor KdStep::TeacherLogits(const Batch& batch, const torch::Tensor& images, bool* cached) {
  *cached = false;
  TeacherLogitCache* cache = options_.cache;
  if (cache) {
    if (auto hit = cache->Lookup(batch, options_.loss.temperature)) {
      *cached = true;
      return hit->to(images.device());
    }
  }
  torch::Tensor logits;
  {
    torch::InferenceMode inference;
    CudaBf16Autocast autocast(images.is_cuda() && options_.teacher_bf16_on_cuda);
    logits = teacher_->Forward(images);
  }
  // Leave inference mode with a normal tensor so the loss may save it for backward.
  logits = logits.to(torch::kFloat).clone();
  if (cache) {
    Status inserted = cache->Insert(batch, logits);
    if (!inserted.ok()) LOG_WARN("trainer") << "teacher cache insert: " << inserted;
  }
  return logits;
}

StatusOr<StepResult> KdStep::Step(const Batch& batch, double data_wait_seconds) {
  RETORT_RETURN_IF_ERROR(ValidateBatch(batch));
  const auto step_start = Clock::now();
  const Deadline deadline = Deadline::AfterMs(options_.comm_timeout_ms);
  StepResult result;
  StepTiming& timing = result.timing;
  timing.step = ++calls_;
  timing.data_wait = data_wait_seconds;
  const int64_t n = batch.images.size(0);
  const torch::Device device = flat_->params().device();

  flat_->ZeroGrads();
  reducer_->BeginBackward();
  double weighted_loss = 0;
  if (n > 0) {
    auto images = batch.images.to(device, /*non_blocking=*/true);
    auto labels = batch.labels.to(device, /*non_blocking=*/true);
    auto t0 = Clock::now();
    bool cached = false;
    torch::Tensor teacher_logits = TeacherLogits(batch, images, &cached);
    timing.teacher_cached = cached;
    timing.teacher_forward = cached ? 0.0 : SecondsSince(t0);

    t0 = Clock::now();
    auto student_logits = student_->Forward(images);
    if (teacher_logits.sizes() != student_logits.sizes())
      return InvalidArgumentError("teacher logits " + c10::str(teacher_logits.sizes()) +
                                  " and student logits " + c10::str(student_logits.sizes()) +
                                  " differ in shape");
    KdLossParts parts = KdLoss(student_logits, teacher_logits, labels, options_.loss);
    auto loss = parts.total * batch.weight;
    timing.student_forward = SecondsSince(t0);

    t0 = Clock::now();
    loss.backward();
    timing.backward = SecondsSince(t0);
    weighted_loss = loss.item<double>();
  }

  double exposed = 0;
  RETORT_RETURN_IF_ERROR(reducer_->Finish(deadline, &exposed));
  timing.comm_exposed += exposed;

  auto t0 = Clock::now();
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor& grad = reducer_->reduced();
    scalars_[0] = grad.numel() > 0 ? grad.square().sum() : torch::zeros({}, grad.options());
    scalars_[1] = weighted_loss;
  }
  double local_opt = SecondsSince(t0);
  t0 = Clock::now();
  RETORT_RETURN_IF_ERROR(comm_->AllReduce(scalars_.data_ptr<float>(), 2)
                             ->Wait(deadline)
                             .WithContext("gradient-norm all-reduce"));
  timing.comm_exposed += SecondsSince(t0);
  auto sums = scalars_.to(torch::kCPU);
  const double sq = sums[0].item<double>();
  result.loss = sums[1].item<double>();
  result.grad_norm = std::sqrt(sq);

  if (!std::isfinite(result.grad_norm)) {
    result.skipped = true;
    timing.skipped = true;
    ++skipped_steps_;
  } else {
    t0 = Clock::now();
    const double max_norm = options_.optimizer.max_grad_norm;
    const double clip = max_norm > 0 ? std::min(1.0, max_norm / (result.grad_norm + 1e-6)) : 1.0;
    result.lr = LearningRateAt(options_.optimizer, optimizer_->step() + 1);
    optimizer_->Update(reducer_->reduced(), clip);
    local_opt += SecondsSince(t0);
    t0 = Clock::now();
    RETORT_RETURN_IF_ERROR(AllGatherParameters(deadline));
    timing.comm_exposed += SecondsSince(t0);
  }
  timing.optimizer = local_opt;
  result.step = optimizer_->step();
  timing.total = data_wait_seconds + SecondsSince(step_start);
  return result;
}

Status KdStep::AllGatherParameters(Deadline deadline) {
  std::vector<int64_t> counts;
  for (const ShardRange& r : plan_.ranges) counts.push_back(r.count);
  float* base = flat_->params().data_ptr<float>();
  const ShardRange& mine = plan_.ranges[comm_->rank()];
  return comm_->AllGatherV(base + mine.offset, base, std::move(counts))
      ->Wait(deadline)
      .WithContext("parameter all-gather");
}

}  // namespace retort::trainer
