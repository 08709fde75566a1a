#include "trainer/data/synthetic_dataset.h"

#include <algorithm>

#include "trainer/data/random.h"

namespace retort::trainer::data {

StatusOr<SyntheticDataset> SyntheticDataset::Create(const SyntheticOptions& options) {
  if (options.size <= 0) return InvalidArgumentError("synthetic dataset: size must be > 0");
  if (options.shape.channels <= 0 || options.shape.height <= 0 || options.shape.width <= 0) {
    return InvalidArgumentError("synthetic dataset: shape dimensions must be > 0");
  }
  if (options.num_classes <= 0)
    return InvalidArgumentError("synthetic dataset: num_classes must be > 0");
  return SyntheticDataset(options);
}

Status SyntheticDataset::Get(int64_t index, uint64_t augmentation_seed, float* out,
                             int64_t* label) const {
  if (index < 0 || index >= options_.size) {
    return OutOfRangeError(SampleName(index) + ": index out of range [0, " +
                           std::to_string(options_.size) + ")");
  }
  SplitMix64 rng(MixSeed(options_.seed, static_cast<uint64_t>(index)));
  *label = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(options_.num_classes)));
  const int64_t n = options_.shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(static_cast<int64_t>(rng.Next() >> 40) - (int64_t{1} << 23)) *
             (1.0f / static_cast<float>(1 << 23));
  }
  if (augmentation_seed != 0 && (augmentation_seed >> 63) != 0) {
    const int w = options_.shape.width;
    const int64_t rows = int64_t{options_.shape.channels} * options_.shape.height;
    for (int64_t r = 0; r < rows; ++r) std::reverse(out + r * w, out + (r + 1) * w);
  }
  return Status::Ok();
}

std::string SyntheticDataset::SampleName(int64_t index) const {
  return "synthetic[" + std::to_string(index) + "]";
}

}  // namespace retort::trainer::data
