// Knowledge-distillation loss and top-1 evaluation.
//
//   loss = alpha * T^2 * KL(softmax(t/T) || softmax(s/T)) + (1 - alpha) * CE(s, y)
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

struct KdLossOptions {
  double alpha = 0.5;            // weight of the distillation term, in [0, 1]
  double temperature = 4.0;      // T > 0
  double label_smoothing = 0.0;  // eps of CE's targets, in [0, 1)
};
Status ValidateKdLossOptions(const KdLossOptions& options);

struct KdLossParts {
  torch::Tensor total;  // scalar, differentiable w.r.t. student_logits
  torch::Tensor kl;     // scalar, detached
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
