#include "trainer/kd_loss.h"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "trainer/data/batch.h"
#include "trainer/models/model.h"

namespace retort::trainer {

Status ValidateKdLossOptions(const KdLossOptions& options) {
  if (!(options.alpha >= 0.0 && options.alpha <= 1.0))
    return InvalidArgumentError("KD loss: alpha must be in [0, 1], got " +
                                std::to_string(options.alpha));
  if (!(options.temperature > 0.0) || !std::isfinite(options.temperature))
    return InvalidArgumentError("KD loss: temperature must be > 0, got " +
                                std::to_string(options.temperature));
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing < 1.0))
    return InvalidArgumentError("KD loss: label_smoothing must be in [0, 1), got " +
                                std::to_string(options.label_smoothing));
  return Status::Ok();
}

namespace {

// Mean over the rows of -sum_c target[c] log_softmax(s)[c] with the targets of kd_loss.h: the
// smoothed one-hot label, blended with the partner's for mixed rows. Without smoothing and
// mixing this is nll_loss (the unsmoothed path stays bit-identical to before).
torch::Tensor CrossEntropy(const torch::Tensor& s, const torch::Tensor& labels, double smoothing,
                           const torch::Tensor& partner_labels, const torch::Tensor& own_weight) {
  auto log_q = torch::log_softmax(s, -1);
  if (!own_weight.defined() && smoothing == 0) return torch::nll_loss(log_q, labels);
  const int64_t classes = s.size(-1);
  auto one_hot = [&](const torch::Tensor& y) {
    auto t = torch::full_like(log_q, smoothing / static_cast<double>(classes));
    return t.scatter_(1, y.unsqueeze(1), 1.0 - smoothing + smoothing / classes);
  };
  torch::Tensor target = one_hot(labels);
  if (own_weight.defined()) {
    auto w = own_weight.to(log_q.dtype()).unsqueeze(1);
    target = w * target + (1 - w) * one_hot(partner_labels);
  }
  const double n = static_cast<double>(std::max<int64_t>(s.size(0), 1));
  return -(target * log_q).sum() / n;
}

}  // namespace

KdLossParts KdLoss(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                   const torch::Tensor& labels, const KdLossOptions& options,
                   const torch::Tensor& partner_labels, const torch::Tensor& own_weight) {
  const double t = options.temperature;
  auto s = student_logits.to(torch::kFloat);
  auto teacher = teacher_logits.to(torch::kFloat).detach();
  auto log_q = torch::log_softmax(s / t, -1);
  auto log_p = torch::log_softmax(teacher / t, -1);
  // KL(p || q) = sum p (log p - log q), batchmean.
  const double n = static_cast<double>(std::max<int64_t>(s.size(0), 1));
  auto kl = (log_p.exp() * (log_p - log_q)).sum() / n;
  auto ce = CrossEntropy(s, labels, options.label_smoothing, partner_labels, own_weight);
  KdLossParts parts;
  parts.total = options.alpha * t * t * kl + (1.0 - options.alpha) * ce;
  parts.kl = kl.detach();
  parts.ce = ce.detach();
  return parts;
}

int64_t CountTop1Correct(const torch::Tensor& logits, const torch::Tensor& labels) {
  return logits.argmax(-1).eq(labels.to(logits.device())).sum().item<int64_t>();
}

Top1Result EvaluateTop1(Model& model, const std::vector<Batch>& batches) {
  torch::InferenceMode guard;
  const bool was_training = model.IsTraining();
  model.SetTraining(false);
  // Host batches go to the model's device (and dtype: a frozen bf16 teacher on CUDA).
  const auto params = model.NamedParameters();
  const torch::TensorOptions input =
      params.empty() ? torch::TensorOptions() : params.front().second.options();
  Top1Result result;
  for (const Batch& b : batches) {
    if (b.images.size(0) == 0) continue;
    auto logits = model.Forward(b.images.to(input.device(), input.dtype()));
    result.correct += CountTop1Correct(logits, b.labels);
    result.total += b.images.size(0);
  }
  model.SetTraining(was_training);
  return result;
}

}  // namespace retort::trainer
