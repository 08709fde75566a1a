#include "trainer/sharded_adamw.h"

#include <ATen/Parallel.h>
#include <ATen/ops/_fused_adamw.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

namespace retort::trainer {

Status ValidateAdamWOptions(const AdamWOptions& o) {
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    return InvalidArgumentError("AdamW: lr must be > 0, got " + std::to_string(o.lr));
  if (!(o.beta1 >= 0 && o.beta1 < 1))
    return InvalidArgumentError("AdamW: beta1 must be in [0, 1), got " + std::to_string(o.beta1));
  if (!(o.beta2 >= 0 && o.beta2 < 1))
    return InvalidArgumentError("AdamW: beta2 must be in [0, 1), got " + std::to_string(o.beta2));
  if (!(o.eps > 0)) return InvalidArgumentError("AdamW: eps must be > 0");
  if (!(o.weight_decay >= 0)) return InvalidArgumentError("AdamW: weight_decay must be >= 0");
  if (o.warmup_steps < 0) return InvalidArgumentError("AdamW: warmup_steps must be >= 0");
  if (o.total_steps < 0) return InvalidArgumentError("AdamW: total_steps must be >= 0");
  if (o.total_steps > 0 && o.total_steps < o.warmup_steps)
    return InvalidArgumentError("AdamW: total_steps (" + std::to_string(o.total_steps) +
                                ") is shorter than warmup_steps (" +
                                std::to_string(o.warmup_steps) + ")");
  if (!(o.min_lr >= 0 && o.min_lr <= o.lr))
    return InvalidArgumentError("AdamW: min_lr must be in [0, lr]");
  return Status::Ok();
}

double LearningRateAt(const AdamWOptions& o, int64_t step) {
  if (o.warmup_steps > 0 && step <= o.warmup_steps)
    return o.lr * static_cast<double>(step) / static_cast<double>(o.warmup_steps);
  if (o.total_steps <= 0) return o.lr;
  if (step >= o.total_steps) return o.min_lr;
  const double progress = static_cast<double>(step - o.warmup_steps) /
                          static_cast<double>(std::max<int64_t>(1, o.total_steps - o.warmup_steps));
  return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + std::cos(M_PI * progress));
}

UpdateScalars ClipAndSkipScalars(const torch::Tensor& squared_norm, double max_grad_norm) {
  torch::NoGradGuard no_grad;
  const auto norm = squared_norm.sqrt();
  UpdateScalars s;
  s.found_inf = torch::isfinite(norm).logical_not().to(torch::kFloat);
  s.grad_divisor =
      max_grad_norm > 0 ? ((norm + 1e-6) / max_grad_norm).clamp_min(1.0) : torch::ones_like(norm);
  return s;
}

namespace {

// Tiles [0, range.count) with the decayed spans and the gaps between them.
std::vector<AdamWSegment> Segments(ShardRange range, const std::vector<ShardRange>& decayed) {
  std::vector<AdamWSegment> out;
  int64_t at = 0;
  for (const ShardRange& span : decayed) {
    const int64_t begin = span.offset - range.offset, end = span.end() - range.offset;
    if (begin > at) out.push_back({at, begin, false});
    if (end > begin) out.push_back({begin, end, true});
    at = end;
  }
  if (at < range.count) out.push_back({at, range.count, false});
  return out;
}

bool SpansInside(ShardRange range, const std::vector<ShardRange>& spans) {
  int64_t at = range.offset;
  for (const ShardRange& s : spans) {
    if (s.count < 0 || s.offset < at || s.end() > range.end()) return false;
    at = s.end();
  }
  return true;
}

}  // namespace

ShardedAdamW::ShardedAdamW(AdamWOptions options, torch::Tensor flat_params, ShardRange range,
                           std::vector<ShardRange> decayed, AdamWKernel kernel)
    : options_(options),
      params_(flat_params.narrow(0, range.offset, range.count)),
      range_(range),
      decayed_(std::move(decayed)),
      exp_avg_(torch::zeros({range.count}, flat_params.options())),
      exp_avg_sq_(torch::zeros({range.count}, flat_params.options())) {
  TORCH_CHECK(SpansInside(range_, decayed_),
              "ShardedAdamW: decayed spans must be ordered, disjoint and inside the range");
  if (kernel == AdamWKernel::kAuto)
    kernel = flat_params.is_cpu() ? AdamWKernel::kLoop : AdamWKernel::kFused;
  TORCH_CHECK(kernel != AdamWKernel::kLoop || flat_params.is_cpu(),
              "ShardedAdamW: the loop kernel runs on the CPU only, the buffer is on ",
              flat_params.device().str());
  kernel_ = kernel;
  step_tensor_ = torch::zeros({1}, flat_params.options());
  segments_ = Segments(range_, decayed_);
  if (kernel_ == AdamWKernel::kFused) {
    for (const bool decays : {true, false}) {
      FusedGroup group;
      group.decays = decays;
      for (const AdamWSegment& seg : segments_) {
        if (seg.decays != decays) continue;
        const int64_t n = seg.end - seg.begin;
        group.segments.push_back(seg);
        group.params.push_back(params_.narrow(0, seg.begin, n));
        group.exp_avgs.push_back(exp_avg_.narrow(0, seg.begin, n));
        group.exp_avg_sqs.push_back(exp_avg_sq_.narrow(0, seg.begin, n));
        group.steps.push_back(step_tensor_);
      }
      if (!group.segments.empty()) fused_groups_.push_back(std::move(group));
    }
  }
}

ShardedAdamW::ShardedAdamW(AdamWOptions options, torch::Tensor flat_params, ShardRange range)
    : ShardedAdamW(options, std::move(flat_params), range, std::vector<ShardRange>{range}) {}

void ShardedAdamW::Update(const torch::Tensor& grad, double grad_scale) {
  torch::NoGradGuard no_grad;
  UpdateScalars scalars;
  scalars.grad_divisor = torch::full({1}, 1.0 / grad_scale, params_.options());
  scalars.found_inf = torch::zeros({1}, params_.options());
  Update(grad, scalars);
}

void ShardedAdamW::ForgetSkippedUpdate() {
  if (step_ > 0) --step_;
}

void ShardedAdamW::Update(const torch::Tensor& grad, const UpdateScalars& scalars) {
  ++step_;
  if (range_.count == 0) return;
  torch::NoGradGuard no_grad;
  const double lr = LearningRateAt(options_, step_);
  if (kernel_ == AdamWKernel::kFused) {
    FusedUpdate(grad, lr, scalars);
    return;
  }
  // CPU: the scalars are host memory already; reading them costs nothing.
  if (scalars.found_inf.item<float>() != 0.0f) return;
  const float grad_scale = static_cast<float>(1.0 / scalars.grad_divisor.item<double>());
  const double bias1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const float bias2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, static_cast<double>(step_))));
  const float step_size = static_cast<float>(lr / bias1);
  const float decay = static_cast<float>(1.0 - lr * options_.weight_decay);
  for (const AdamWSegment& seg : segments_)
    LoopUpdate(grad, grad_scale, seg.begin, seg.end, seg.decays ? decay : 1.0f, step_size,
               bias2_sqrt);
}

void ShardedAdamW::LoopUpdate(const torch::Tensor& grad, float grad_scale, int64_t begin,
                              int64_t end, float decay, float step_size, float bias2_sqrt) const {
  // One fused pass (what torch.optim.AdamW does in ~6 kernels per tensor).
  float* p = params_.data_ptr<float>();
  float* m = exp_avg_.data_ptr<float>();
  float* v = exp_avg_sq_.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  at::parallel_for(begin, end, 16384, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const float gi = g[i] * grad_scale;
      const float mi = b1 * m[i] + (1.0f - b1) * gi;
      const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) / bias2_sqrt + eps);
    }
  });
}

void ShardedAdamW::FusedUpdate(const torch::Tensor& grad, double lr, const UpdateScalars& scalars) {
  // The kernel reads the step from a device tensor (bias correction); set it without a sync.
  step_tensor_.fill_(static_cast<double>(step_));
  for (const FusedGroup& group : fused_groups_) {
    std::vector<torch::Tensor> grads;
    grads.reserve(group.segments.size());
    for (const AdamWSegment& seg : group.segments)
      grads.push_back(grad.narrow(0, seg.begin, seg.end - seg.begin));
    at::_fused_adamw_(group.params, grads, group.exp_avgs, group.exp_avg_sqs,
                      /*max_exp_avg_sqs=*/{}, group.steps, lr, options_.beta1, options_.beta2,
                      group.decays ? options_.weight_decay : 0.0, options_.eps, /*amsgrad=*/false,
                      /*maximize=*/false, scalars.grad_divisor, scalars.found_inf);
  }
}

StatusOr<OptimizerShardState> ShardedAdamW::Export(ShardRange sub) const {
  if (sub.offset < range_.offset || sub.end() > range_.end() || sub.count < 0)
    return OutOfRangeError("optimizer export: range [" + std::to_string(sub.offset) + ", " +
                           std::to_string(sub.end()) + ") is not inside this rank's range [" +
                           std::to_string(range_.offset) + ", " + std::to_string(range_.end()) +
                           ")");
  const int64_t local = sub.offset - range_.offset;
  OptimizerShardState state;
  state.range = sub;
  state.step = step_;
  state.params = params_.narrow(0, local, sub.count).to(torch::kCPU).clone();
  state.exp_avg = exp_avg_.narrow(0, local, sub.count).to(torch::kCPU).clone();
  state.exp_avg_sq = exp_avg_sq_.narrow(0, local, sub.count).to(torch::kCPU).clone();
  return state;
}

Status ShardedAdamW::Import(const OptimizerShardState& piece) {
  const ShardRange& sub = piece.range;
  if (sub.offset < range_.offset || sub.end() > range_.end() || sub.count < 0)
    return OutOfRangeError("optimizer import: range [" + std::to_string(sub.offset) + ", " +
                           std::to_string(sub.end()) + ") is not inside this rank's range [" +
                           std::to_string(range_.offset) + ", " + std::to_string(range_.end()) +
                           ")");
  for (const auto* t : {&piece.params, &piece.exp_avg, &piece.exp_avg_sq}) {
    if (!t->defined() || t->dim() != 1 || t->numel() != sub.count ||
        t->scalar_type() != torch::kFloat)
      return InvalidArgumentError("optimizer import: params/exp_avg/exp_avg_sq must be float32 [" +
                                  std::to_string(sub.count) + "]");
  }
  if (piece.step < 0) return InvalidArgumentError("optimizer import: negative step");
  if (imported_ && piece.step != step_)
    return InvalidArgumentError("optimizer import: piece has step " + std::to_string(piece.step) +
                                " but earlier pieces had step " + std::to_string(step_));
  const int64_t local = sub.offset - range_.offset;
  torch::NoGradGuard no_grad;
  params_.narrow(0, local, sub.count).copy_(piece.params);
  exp_avg_.narrow(0, local, sub.count).copy_(piece.exp_avg);
  exp_avg_sq_.narrow(0, local, sub.count).copy_(piece.exp_avg_sq);
  step_ = piece.step;
  imported_ = true;
  return Status::Ok();
}

}  // namespace retort::trainer
