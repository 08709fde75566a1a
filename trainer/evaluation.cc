#include "trainer/evaluation.h"

#include <torch/torch.h>

#include <algorithm>

#include "trainer/data/batch.h"
#include "trainer/kd_loss.h"
#include "trainer/models/model.h"

namespace retort::trainer {

TopKCounts CountTopKCorrect(Model& model, const std::vector<Batch>& batches, int64_t k) {
  torch::InferenceMode guard;
  const bool was_training = model.IsTraining();
  model.SetTraining(false);
  const auto params = model.NamedParameters();
  const torch::TensorOptions input =
      params.empty() ? torch::TensorOptions() : params.front().second.options();
  TopKCounts counts;
  for (const Batch& b : batches) {
    const int64_t n = b.images.size(0);
    if (n == 0) continue;
    auto logits = model.Forward(b.images.to(input.device(), input.dtype())).to(torch::kFloat);
    auto labels = b.labels.to(logits.device()).unsqueeze(1);
    const int64_t top = std::max<int64_t>(1, std::min<int64_t>(k, logits.size(1)));
    auto best = std::get<1>(logits.topk(top, /*dim=*/1));
    counts.top1 += CountTop1Correct(logits, b.labels);
    counts.top_k += best.eq(labels).any(1).sum().item<int64_t>();
    counts.total += n;
  }
  model.SetTraining(was_training);
  return counts;
}

}  // namespace retort::trainer
