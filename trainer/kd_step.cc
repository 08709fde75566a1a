#include "trainer/kd_step.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>

#include "common/logging.h"
#include "trainer/data/batch.h"
#include "trainer/device.h"
#include "trainer/flat_parameters.h"
#include "trainer/frozen_teacher.h"
#include "trainer/grad_reducer.h"
#include "trainer/host_staging.h"
#include "trainer/model_buffers.h"
#include "trainer/models/model.h"
#include "trainer/teacher_logit_cache.h"
#include "trainer/weight_decay.h"

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
  if (!student || !comm) return InvalidArgumentError("KdStep needs a student and a ShardComm");
  if (!teacher && options.loss.alpha != 0.0)
    return InvalidArgumentError("KdStep without a teacher (supervised training) needs alpha = 0");
  if (!teacher) options.cache = nullptr;
  RETORT_RETURN_IF_ERROR(ValidateKdLossOptions(options.loss));
  RETORT_RETURN_IF_ERROR(ValidateAdamWOptions(options.optimizer));
  if (options.comm_timeout_ms <= 0)
    return InvalidArgumentError("KdStep: comm_timeout_ms must be > 0");
  if (options.local_parallelism < 1)
    return InvalidArgumentError("KdStep: local_parallelism must be >= 1, got " +
                                std::to_string(options.local_parallelism));
  // The device first: a CUDA device given by index is this thread's current one from here on
  // (a bare "cuda" means the current one, which is left as it is).
  if (options.device.is_cuda() && options.device.has_index()) {
    RETORT_RETURN_IF_ERROR(SelectThreadDevice(options.device.index(), options.device_selector,
                                              "KdStep: device " + options.device.str()));
  }
  if (options.device.is_cuda() && !torch::cuda::is_available())
    return FailedPreconditionError("KdStep: device " + options.device.str() +
                                   " was asked for but no CUDA device is visible");
  if (options.device.is_cuda() && !options.teacher_bf16_on_cuda && !options.student_bf16_on_cuda) {
    // fp32 on a GPU means IEEE fp32 matrix products (process-wide): TF32, which an image or a
    // library may have turned on, would put each step about 1e-3 off the same step on a CPU.
    at::globalContext().setFloat32MatmulPrecision("highest");
    at::globalContext().setAllowTF32CuDNN(false);
  }
  std::unique_ptr<KdStep> step(new KdStep());
  step->teacher_ = std::move(teacher);
  step->student_ = std::move(student);
  step->comm_ = comm;
  step->options_ = options;
  try {
    step->student_->To(options.device);
    if (step->teacher_) {
      step->teacher_->To(options.device);
      PrepareFrozenTeacher(*step->teacher_,
                           options.device.is_cuda() && options.teacher_bf16_on_cuda);
    }
  } catch (const c10::Error& e) {
    return ResourceExhaustedError("KdStep: moving the models to " + options.device.str() +
                                  " failed: " + e.what_without_backtrace());
  }
  step->student_->SetTraining(true);
  step->student_has_buffers_ = ModelBufferWords(*step->student_) > 0;
  // The flat parameters and gradients, the reducer's buffer and the optimizer's moments: about
  // four times the student's parameters more on the device.
  try {
    RETORT_ASSIGN_OR_RETURN(step->flat_, FlatParameters::Create(*step->student_));
    RETORT_RETURN_IF_ERROR(ValidateShardPlan(plan, step->flat_->numel(), comm->world_size()));
    step->plan_ = plan;
    RETORT_ASSIGN_OR_RETURN(
        step->reducer_, GradReducer::Create(step->flat_.get(), comm, plan, options.bucket_elements,
                                            step->StagesThroughHost()));
    step->optimizer_ = step->MakeOptimizer(plan.ranges[comm->rank()]);
    step->scalars_ = torch::zeros({2}, step->flat_->params().options());
  } catch (const c10::Error& e) {
    return ResourceExhaustedError(
        "KdStep: the student's flat parameters, gradients and optimizer state (" +
        std::to_string(FlatParameterCount(*step->student_)) + " parameters) do not fit on " +
        options.device.str() + ": " + e.what_without_backtrace());
  }
  return step;
}

bool KdStep::StagesThroughHost() const {
  return NeedsHostStaging(flat_->params(), *comm_, options_.stage_collectives_through_host);
}

std::unique_ptr<ShardedAdamW> KdStep::MakeOptimizer(ShardRange range) const {
  std::vector<ShardRange> decayed = options_.optimizer.decay_all_parameters
                                        ? std::vector<ShardRange>{range}
                                        : DecayedSpans(flat_->slots(), range);
  return std::make_unique<ShardedAdamW>(options_.optimizer, flat_->params(), range,
                                        std::move(decayed), options_.optimizer_kernel);
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
  if (b.mix_own_weight.defined() != b.mix_partner_labels.defined() ||
      (b.mix_own_weight.defined() &&
       (b.mix_own_weight.dim() != 1 || b.mix_own_weight.size(0) != n ||
        b.mix_own_weight.scalar_type() != torch::kFloat || b.mix_partner_labels.dim() != 1 ||
        b.mix_partner_labels.size(0) != n || b.mix_partner_labels.scalar_type() != torch::kLong)))
    return InvalidArgumentError("batch " + std::to_string(b.step) +
                                ": mix_partner_labels (int64) and mix_own_weight (float32) must "
                                "both be [" +
                                std::to_string(n) + "] or both be unset");
  if (!(b.weight >= 0.0 && b.weight <= 1.0))
    return InvalidArgumentError("batch " + std::to_string(b.step) + ": weight " +
                                std::to_string(b.weight) + " is outside [0, 1]");
  if (n > 0 && b.weight == 0.0)
    return InvalidArgumentError("batch " + std::to_string(b.step) +
                                ": weight is 0 for a non-empty slice");
  return Status::Ok();
}

torch::Tensor KdStep::TeacherForward(const torch::Tensor& images) {
  return FrozenTeacherForward(*teacher_, images, images.is_cuda() && options_.teacher_bf16_on_cuda);
}

KdStep::PartResult KdStep::RunPart(const torch::Tensor& images, const SliceTargets& targets,
                                   const torch::Tensor& cached_logits, int64_t begin, int64_t end,
                                   double slice_weight) {
  PartResult out;
  const int64_t n = images.size(0);
  auto part_images = images.narrow(0, begin, end - begin);
  auto t0 = Clock::now();
  if (cached_logits.defined()) {
    out.teacher_logits = cached_logits.narrow(0, begin, end - begin);
  } else if (teacher_) {
    out.teacher_logits = TeacherForward(part_images);
    out.teacher = SecondsSince(t0);
  }
  t0 = Clock::now();
  torch::Tensor loss;
  {
    CudaBf16Autocast autocast(images.is_cuda() && options_.student_bf16_on_cuda);
    auto student_logits = student_->Forward(part_images);
    if (!out.teacher_logits.defined()) {
      // Supervised training (no teacher): with alpha = 0 the KD loss is the cross-entropy; the
      // student's own detached logits stand in for the unused teacher term.
      out.teacher_logits = student_logits.detach().to(torch::kFloat);
    }
    TORCH_CHECK(out.teacher_logits.sizes() == student_logits.sizes(), "teacher logits ",
                out.teacher_logits.sizes(), " and student logits ", student_logits.sizes(),
                " differ in shape");
    auto rows = [&](const torch::Tensor& t) {
      return t.defined() ? t.narrow(0, begin, end - begin) : torch::Tensor();
    };
    KdLossParts parts =
        KdLoss(student_logits.to(torch::kFloat), out.teacher_logits, rows(targets.labels),
               options_.loss, rows(targets.partner_labels), rows(targets.own_weight));
    loss = parts.total * (slice_weight * static_cast<double>(end - begin) / n);
  }
  out.student = SecondsSince(t0);
  t0 = Clock::now();
  loss.backward();
  out.backward = SecondsSince(t0);
  out.loss = loss.detach();
  return out;
}

StatusOr<StepResult> KdStep::Step(const Batch& batch, double data_wait_seconds) {
  if (!comm_)
    return FailedPreconditionError("KdStep: no communicator (DetachComm without Reconfigure)");
  RETORT_RETURN_IF_ERROR(ValidateBatch(batch));
  const auto step_start = Clock::now();
  const Deadline deadline = Deadline::AfterMs(options_.comm_timeout_ms);
  StepResult result;
  StepTiming& timing = result.timing;
  timing.step = ++calls_;
  timing.data_wait = data_wait_seconds;
  const int64_t n = batch.images.size(0);
  const torch::Device device = flat_->params().device();

  // Concurrent parts would update a student's buffers (BatchNorm statistics) from several
  // threads at once, each with a part's statistics: models with buffers run one pass.
  const int parts = device.is_cpu() && n > 0 && !student_has_buffers_
                        ? static_cast<int>(std::min<int64_t>(options_.local_parallelism, n))
                        : 1;
  waits_.Reset();
  flat_->ZeroGrads();
  reducer_->BeginBackward(parts);
  torch::Tensor weighted_loss;  // scalar on the device; undefined for an empty slice
  if (n > 0) {
    std::vector<PartResult> results(parts);
    torch::Tensor cached;
    try {
      auto images = batch.images.to(device, /*non_blocking=*/true);
      SliceTargets targets;
      targets.labels = batch.labels.to(device, /*non_blocking=*/true);
      const bool mixed = batch.mix_own_weight.defined();
      if (mixed) {
        targets.partner_labels = batch.mix_partner_labels.to(device, /*non_blocking=*/true);
        targets.own_weight = batch.mix_own_weight.to(device, /*non_blocking=*/true);
      }
      // The cache is keyed by (sample, view): a mixed image is neither, so mixed batches
      // neither read nor fill it.
      if (options_.cache && !mixed) {
        if (auto hit = options_.cache->Lookup(batch, options_.loss.temperature))
          cached = hit->to(device);
      }
      timing.teacher_cached = cached.defined();
      if (parts == 1) {
        results[0] = RunPart(images, targets, cached, 0, n, batch.weight);
      } else {
        // One part per intra-op thread; inside at::parallel_for, ATen and its BLAS run each
        // part single-threaded.
        at::parallel_for(0, parts, 1, [&](int64_t first, int64_t last) {
          for (int64_t p = first; p < last; ++p)
            results[p] =
                RunPart(images, targets, cached, n * p / parts, n * (p + 1) / parts, batch.weight);
        });
      }
    } catch (const c10::OutOfMemoryError& e) {
      return ResourceExhaustedError("step " + std::to_string(batch.step) + ": out of memory on " +
                                    device.str() + " with a slice of " + std::to_string(n) +
                                    " samples (lower global_batch or use " +
                                    "more workers): " + e.what_without_backtrace());
    } catch (const c10::Error& e) {
      return InvalidArgumentError("step " + std::to_string(batch.step) + ": " +
                                  e.what_without_backtrace());
    } catch (const std::exception& e) {
      return InternalError("step " + std::to_string(batch.step) + ": " + e.what());
    }
    for (const PartResult& r : results)
      weighted_loss = weighted_loss.defined() ? weighted_loss + r.loss : r.loss;
    timing.teacher_forward = results[0].teacher;
    timing.student_forward = results[0].student;
    timing.backward = results[0].backward;
    if (options_.cache && !cached.defined() && !batch.mix_own_weight.defined()) {
      std::vector<torch::Tensor> logits;
      for (const PartResult& r : results) logits.push_back(r.teacher_logits);
      Status inserted = options_.cache->Insert(batch, torch::cat(logits, 0));
      if (!inserted.ok()) LOG_WARN("trainer") << "teacher cache insert: " << inserted;
    }
  }

  // From here the step runs kernels whose failures may surface later, at a staging copy or the
  // host read below: on a GPU such an error is the device's (the CUDA context may be unusable),
  // not the batch's.
  try {
    double exposed = 0;
    RETORT_RETURN_IF_ERROR(reducer_->Finish(deadline, &exposed, &waits_));
    timing.comm_exposed += exposed;
    if (student_has_buffers_) {
      // Every rank leaves the step (and enters the next forward) with rank 0's buffers.
      auto t_buffers = Clock::now();
      RETORT_RETURN_IF_ERROR(BroadcastModelBuffers(*student_, *comm_, deadline));
      timing.comm_exposed += SecondsSince(t_buffers);
    }

    auto t0 = Clock::now();
    {
      torch::NoGradGuard no_grad;
      const torch::Tensor& grad = reducer_->reduced();
      scalars_[0] = grad.numel() > 0 ? grad.square().sum() : torch::zeros({}, grad.options());
      if (weighted_loss.defined())
        scalars_[1] = weighted_loss;
      else
        scalars_[1] = 0.0;
    }
    double local_opt = SecondsSince(t0);
    t0 = Clock::now();
    RETORT_RETURN_IF_ERROR(AllReduceScalars(deadline));
    timing.comm_exposed += SecondsSince(t0);

    // Clipping and skipping are decided where the scalars live (no host sync before the update):
    // a non-finite norm makes the optimizer a no-op on every rank, and the parameters gathered
    // below are then the unchanged ones.
    t0 = Clock::now();
    const UpdateScalars update =
        ClipAndSkipScalars(scalars_.narrow(0, 0, 1), options_.optimizer.max_grad_norm);
    const double lr = LearningRateAt(options_.optimizer, optimizer_->step() + 1);
    optimizer_->Update(reducer_->reduced(), update);
    local_opt += SecondsSince(t0);
    t0 = Clock::now();
    RETORT_RETURN_IF_ERROR(GatherParameters(deadline));
    timing.comm_exposed += SecondsSince(t0);

    // The step's one host read: the global squared norm and loss.
    t0 = Clock::now();
    const auto sums = scalars_.to(torch::kCPU);
    // The device finished every collective the stream was ordered after: their statuses.
    RETORT_RETURN_IF_ERROR(waits_.Confirm(deadline));
    result.host_waits = waits_.host_waits();
    result.stream_waits = waits_.stream_waits();
    const float* host = sums.data_ptr<float>();
    result.loss = host[1];
    result.grad_norm = std::sqrt(static_cast<double>(host[0]));
    if (!std::isfinite(result.grad_norm)) {
      optimizer_->ForgetSkippedUpdate();
      result.skipped = true;
      timing.skipped = true;
      ++skipped_steps_;
    } else {
      result.lr = lr;
    }
    local_opt += SecondsSince(t0);
    timing.optimizer = local_opt;
    result.step = optimizer_->step();
    timing.total = data_wait_seconds + SecondsSince(step_start);
    return result;
  } catch (const c10::OutOfMemoryError& e) {
    return ResourceExhaustedError("step " + std::to_string(batch.step) + ": out of memory on " +
                                  device.str() +
                                  " after the backward pass: " + e.what_without_backtrace());
  } catch (const c10::Error& e) {
    if (device.is_cuda())
      return InternalError("step " + std::to_string(batch.step) + ": device error on " +
                           device.str() + ": " + e.what_without_backtrace());
    return InvalidArgumentError("step " + std::to_string(batch.step) + ": " +
                                e.what_without_backtrace());
  }
}

Status KdStep::AllReduceScalars(Deadline deadline) {
  if (comm_->world_size() == 1) return Status::Ok();
  if (!StagesThroughHost())
    return waits_.Order(comm_->AllReduce(scalars_.data_ptr<float>(), 2), deadline,
                        "gradient-norm all-reduce");
  auto host = scalars_.to(torch::kCPU).contiguous();
  RETORT_RETURN_IF_ERROR(waits_.HostWait(*comm_->AllReduce(host.data_ptr<float>(), 2), deadline,
                                         "gradient-norm all-reduce"));
  scalars_.copy_(host);
  return Status::Ok();
}

Status KdStep::Reconfigure(ShardComm* comm, ShardPlan plan) {
  if (!comm) return InvalidArgumentError("KdStep::Reconfigure needs a ShardComm");
  RETORT_RETURN_IF_ERROR(ValidateShardPlan(plan, flat_->numel(), comm->world_size()));
  // Destroying the old reducer first disarms its hooks.
  reducer_.reset();
  comm_ = comm;
  RETORT_ASSIGN_OR_RETURN(
      reducer_,
      GradReducer::Create(flat_.get(), comm, plan, options_.bucket_elements, StagesThroughHost()));
  optimizer_ = MakeOptimizer(plan.ranges[comm->rank()]);
  plan_ = std::move(plan);
  return Status::Ok();
}

void KdStep::DetachComm() {
  reducer_.reset();  // first: disarms the hooks that hold the communicator
  comm_ = nullptr;
}

Status KdStep::AllGatherParameters(Deadline deadline) {
  if (!comm_)
    return FailedPreconditionError("KdStep: no communicator (DetachComm without Reconfigure)");
  // Outside a step: done (on the host) when this returns.
  waits_.Reset();
  RETORT_RETURN_IF_ERROR(GatherParameters(deadline));
  return waits_.Confirm(deadline);
}

Status KdStep::GatherParameters(Deadline deadline) {
  if (comm_->world_size() == 1) return Status::Ok();
  std::vector<int64_t> counts;
  for (const ShardRange& r : plan_.ranges) counts.push_back(r.count);
  const ShardRange& mine = plan_.ranges[comm_->rank()];
  if (!StagesThroughHost()) {
    float* base = flat_->params().data_ptr<float>();
    return waits_.Order(comm_->AllGatherV(base + mine.offset, base, std::move(counts)), deadline,
                        "parameter all-gather");
  }
  torch::NoGradGuard no_grad;
  if (!host_params_.defined()) host_params_ = HostStagingBuffer(flat_->numel(), flat_->params());
  host_params_.narrow(0, mine.offset, mine.count)
      .copy_(flat_->params().narrow(0, mine.offset, mine.count));
  float* base = host_params_.data_ptr<float>();
  RETORT_RETURN_IF_ERROR(
      waits_.HostWait(*comm_->AllGatherV(base + mine.offset, base, std::move(counts)), deadline,
                      "parameter all-gather"));
  flat_->params().copy_(host_params_);
  return Status::Ok();
}

}  // namespace retort::trainer
