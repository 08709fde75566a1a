#include "trainer/teacher_logit_cache.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>

#include "trainer/data/batch.h"

namespace retort::trainer {

StatusOr<std::unique_ptr<TeacherLogitCache>> TeacherLogitCache::Create(int64_t num_classes,
                                                                       int64_t top_k,
                                                                       double temperature,
                                                                       int64_t max_entries) {
  if (num_classes <= 0) return InvalidArgumentError("teacher cache: num_classes must be > 0");
  if (top_k <= 0 || top_k > num_classes)
    return InvalidArgumentError("teacher cache: top_k must be in [1, " +
                                std::to_string(num_classes) + "], got " + std::to_string(top_k));
  if (!(temperature > 0)) return InvalidArgumentError("teacher cache: temperature must be > 0");
  if (max_entries < 0) return InvalidArgumentError("teacher cache: max_entries must be >= 0");
  return std::unique_ptr<TeacherLogitCache>(
      new TeacherLogitCache(num_classes, top_k, temperature, max_entries));
}

std::optional<torch::Tensor> TeacherLogitCache::Lookup(const Batch& batch, double temperature) {
  const int64_t n = static_cast<int64_t>(batch.sample_indices.size());
  MutexLock lock(mu_);
  if (temperature != temperature_ || n == 0 ||
      batch.augmentation_seeds.size() != batch.sample_indices.size() ||
      (batch.images.defined() && batch.images.size(0) != n)) {
    ++counts_.misses;
    return std::nullopt;
  }
  std::vector<const Entry*> found;
  found.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    auto it = entries_.find({batch.sample_indices[i], batch.augmentation_seeds[i]});
    if (it == entries_.end()) {
      ++counts_.misses;
      return std::nullopt;
    }
    found.push_back(&it->second);
  }
  ++counts_.hits;
  auto out = torch::empty({n, num_classes_}, torch::kFloat);
  float* o = out.data_ptr<float>();
  const float t = static_cast<float>(temperature_);
  const int64_t rest = num_classes_ - top_k_;
  for (int64_t i = 0; i < n; ++i) {
    const Entry& e = *found[i];
    float* row = o + i * num_classes_;
    double top_mass = 0;
    for (float lp : e.log_probs) top_mass += std::exp(static_cast<double>(lp));
    float fill = -std::numeric_limits<float>::infinity();
    if (rest > 0) {
      const double residual = std::max(1.0 - top_mass, 1e-30);
      fill = static_cast<float>(std::log(residual / static_cast<double>(rest)));
    }
    for (int64_t c = 0; c < num_classes_; ++c) row[c] = t * fill;
    for (int64_t j = 0; j < top_k_; ++j) row[e.classes[j]] = t * e.log_probs[j];
  }
  return out;
}

Status TeacherLogitCache::Insert(const Batch& batch, const torch::Tensor& teacher_logits) {
  const int64_t n = static_cast<int64_t>(batch.sample_indices.size());
  if (batch.augmentation_seeds.size() != batch.sample_indices.size())
    return InvalidArgumentError(
        "teacher cache: batch has " + std::to_string(n) + " sample indices but " +
        std::to_string(batch.augmentation_seeds.size()) + " augmentation seeds");
  if (teacher_logits.dim() != 2 || teacher_logits.size(0) != n ||
      teacher_logits.size(1) != num_classes_)
    return InvalidArgumentError("teacher cache: teacher logits have shape " +
                                c10::str(teacher_logits.sizes()) + ", expected [" +
                                std::to_string(n) + ", " + std::to_string(num_classes_) + "]");
  torch::NoGradGuard no_grad;
  auto log_p = torch::log_softmax(teacher_logits.to(torch::kCPU, torch::kFloat) / temperature_, -1);
  auto [values, classes] = log_p.topk(top_k_, -1, /*largest=*/true, /*sorted=*/true);
  values = values.contiguous();
  classes = classes.to(torch::kInt).contiguous();
  MutexLock lock(mu_);
  for (int64_t i = 0; i < n; ++i) {
    Key key{batch.sample_indices[i], batch.augmentation_seeds[i]};
    if (entries_.count(key)) continue;
    if (static_cast<int64_t>(entries_.size()) >= max_entries_) {
      ++counts_.dropped;
      continue;
    }
    Entry e;
    e.log_probs.assign(values.data_ptr<float>() + i * top_k_,
                       values.data_ptr<float>() + (i + 1) * top_k_);
    e.classes.assign(classes.data_ptr<int32_t>() + i * top_k_,
                     classes.data_ptr<int32_t>() + (i + 1) * top_k_);
    entries_.emplace(key, std::move(e));
  }
  return Status::Ok();
}

int64_t TeacherLogitCache::size() const {
  MutexLock lock(mu_);
  return static_cast<int64_t>(entries_.size());
}
TeacherLogitCache::Counts TeacherLogitCache::counts() const {
  MutexLock lock(mu_);
  return counts_;
}

}  // namespace retort::trainer
