#include "trainer/kd_loss.h"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "trainer/data/batch.h"
#include "trainer/evaluation.h"
#include "trainer/models/model.h"

namespace retort::trainer {

Status ValidateKdLossOptions(const KdLossOptions& options) {
  if (!(options.alpha >= 0.0 && options.alpha <= 1.0))
    return InvalidArgumentError("KD loss: alpha must be in [0, 1], got " +
                                std::to_string(options.alpha));
  if (!(options.temperature > 0.0) || !std::isfinite(options.temperature))
    return InvalidArgumentError("KD loss: temperature must be > 0, got " +
                                std::to_string(options.temperature));
  if (!(options.dkd_alpha >= 0.0 && std::isfinite(options.dkd_alpha) && options.dkd_beta >= 0.0 &&
        std::isfinite(options.dkd_beta)))
    return InvalidArgumentError("KD loss: dkd_alpha and dkd_beta must be finite and >= 0");
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

// KL(p || q) summed over classes, averaged over rows, from log-probabilities.
torch::Tensor KlBatchMean(const torch::Tensor& log_p, const torch::Tensor& log_q) {
  const double n = static_cast<double>(std::max<int64_t>(log_p.size(0), 1));
  return (log_p.exp() * (log_p - log_q)).sum() / n;
}

torch::Tensor Dkd(const torch::Tensor& s, const torch::Tensor& teacher, const torch::Tensor& labels,
                  const KdLossOptions& o) {
  const double t = o.temperature;
  auto target = torch::zeros_like(s, torch::kBool).scatter_(1, labels.unsqueeze(1), true);
  // TCKD: the binary split (target class, all others) of each distribution.
  auto binary = [&](const torch::Tensor& logits) {
    auto p = torch::softmax(logits / t, -1);
    auto p_target = (p * target).sum(1, /*keepdim=*/true);
    return torch::cat({p_target, 1 - p_target}, 1).clamp_min(1e-12).log();
  };
  auto tckd = KlBatchMean(binary(teacher), binary(s));
  // NCKD: the distributions over the non-target classes (the target masked out by -1000, as
  // mdistiller does, which leaves exp(-1000) = 0 in float32).
  auto masked = [&](const torch::Tensor& logits) {
    return torch::log_softmax(logits / t - 1000.0 * target.to(logits.dtype()), -1);
  };
  auto nckd = KlBatchMean(masked(teacher), masked(s));
  return (o.dkd_alpha * tckd + o.dkd_beta * nckd) * (t * t);
}

}  // namespace

KdLossParts KdLoss(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                   const torch::Tensor& labels, const KdLossOptions& options,
                   const torch::Tensor& partner_labels, const torch::Tensor& own_weight) {
  const double t = options.temperature;
  auto s = student_logits.to(torch::kFloat);
  auto teacher = teacher_logits.to(torch::kFloat).detach();
  auto ce = CrossEntropy(s, labels, options.label_smoothing, partner_labels, own_weight);
  KdLossParts parts;
  parts.ce = ce.detach();
  if (options.alpha == 0) {
    parts.total = ce;
    parts.kl = torch::zeros({}, ce.options());
    return parts;
  }
  torch::Tensor distill;
  switch (options.kind) {
    case DistillationLoss::kKl:
      distill =
          (t * t) * KlBatchMean(torch::log_softmax(teacher / t, -1), torch::log_softmax(s / t, -1));
      break;
    case DistillationLoss::kHard:
      distill = torch::nll_loss(torch::log_softmax(s, -1), teacher.argmax(-1));
      break;
    case DistillationLoss::kDkd:
      distill = Dkd(s, teacher, labels, options);
      break;
  }
  parts.total = options.alpha * distill + (1.0 - options.alpha) * ce;
  parts.kl = distill.detach();
  return parts;
}

int64_t CountTop1Correct(const torch::Tensor& logits, const torch::Tensor& labels) {
  return logits.argmax(-1).eq(labels.to(logits.device())).sum().item<int64_t>();
}

Top1Result EvaluateTop1(Model& model, const std::vector<Batch>& batches) {
  const TopKCounts counts = CountTopKCorrect(model, batches, 1);
  return Top1Result{counts.top1, counts.total};
}

}  // namespace retort::trainer
