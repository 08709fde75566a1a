// Knowledge-distillation loss and top-1 evaluation.
//
//   loss = alpha * D(s, t) + (1 - alpha) * CE(s, y)
//
// with the distillation term D chosen by KdLossOptions::kind:
// - kKl (Hinton et al. 2015): T^2 * KL(softmax(t/T) || softmax(s/T)).
// - kHard (DeiT's hard distillation, Touvron et al. 2021): CE(s, argmax t).
// - kDkd (decoupled KD, Zhao et al. 2022): dkd_alpha * TCKD + dkd_beta * NCKD, both times T^2:
//   TCKD is the KL of the binary (target class, the rest) split of softmax(./T), NCKD the KL of
//   the softmax over the non-target classes alone (as mdistiller's dkd_loss; the target class
//   of a mixed sample is its own label).
// All are per-sample terms averaged over the slice, so the weighted sum over ranks is the
// global-batch mean at any world size. With alpha 0 (supervised training) D is not computed.
//
// CE's target y is the label's one-hot vector, smoothed by label_smoothing (eps: 1 - eps on the
// label, eps / C spread over all classes, as torch's and timm's), and for a mixed sample
// (trainer/data/batch_mixing.h) the blend w * y(label) + (1 - w) * y(partner label).
//
// KL is summed over classes and averaged over the samples of the slice ("batchmean"), CE is
// averaged over the slice; the step multiplies the result by Batch::weight so that the sum over
// ranks is the global-batch mean. Computed in float32 whatever the logits' dtype.
#pragma once

#include <torch/types.h>

#include <vector>

#include "common/status.h"

namespace retort::trainer {

class Model;
struct Batch;

enum class DistillationLoss { kKl, kHard, kDkd };

struct KdLossOptions {
  double alpha = 0.5;            // weight of the distillation term, in [0, 1]
  double temperature = 4.0;      // T > 0 (not used by kHard)
  double label_smoothing = 0.0;  // eps of CE's targets, in [0, 1)
  DistillationLoss kind = DistillationLoss::kKl;
  double dkd_alpha = 1.0;  // kDkd: weight of the target-class term, >= 0
  double dkd_beta = 8.0;   // kDkd: weight of the non-target-class term, >= 0
};
Status ValidateKdLossOptions(const KdLossOptions& options);

struct KdLossParts {
  torch::Tensor total;  // scalar, differentiable w.r.t. student_logits
  torch::Tensor kl;     // scalar, detached: the distillation term D (0 when alpha is 0)
  torch::Tensor ce;     // scalar, detached
};

// student_logits [n, C] (requires grad), teacher_logits [n, C] (no grad), labels int64 [n].
// Mixed samples: partner_labels int64 [n] and own_weight float32 [n] on the logits' device
// (both undefined: no mixing).
KdLossParts KdLoss(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                   const torch::Tensor& labels, const KdLossOptions& options,
                   const torch::Tensor& partner_labels = {}, const torch::Tensor& own_weight = {});

// Number of rows whose arg-max equals the label.
int64_t CountTop1Correct(const torch::Tensor& logits, const torch::Tensor& labels);

struct Top1Result {
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
};
// Evaluates `model` in eval mode over `batches` without autograd; the model is left in the
// mode it was in (a teacher stays in eval mode, a student goes back to train mode).
Top1Result EvaluateTop1(Model& model, const std::vector<Batch>& batches);

}  // namespace retort::trainer
