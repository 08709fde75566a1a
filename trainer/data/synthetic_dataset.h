// A deterministic synthetic dataset for tests and benchmarks: sample i's pixels and label are a
// pure function of (seed, i) (SplitMix64), values uniform in [-1, 1), labels uniform in
// [0, num_classes). A non-zero augmentation seed mirrors the sample horizontally when the seed's
// top bit is set, so augmentation is visible and reproducible. Thread-safe (immutable).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "trainer/data/dataset.h"

namespace retort::trainer::data {

struct SyntheticOptions {
  int64_t size = 1024;
  SampleShape shape{3, 32, 32};
  int num_classes = 10;
  uint64_t seed = 0;
};

class SyntheticDataset final : public Dataset {
 public:
  // InvalidArgument for a non-positive size, shape dimension or class count.
  static StatusOr<SyntheticDataset> Create(const SyntheticOptions& options);

  int64_t size() const override { return options_.size; }
  SampleShape shape() const override { return options_.shape; }
  int num_classes() const override { return options_.num_classes; }
  Status Get(int64_t index, uint64_t augmentation_seed, float* out, int64_t* label) const override;
  std::string SampleName(int64_t index) const override;

 private:
  explicit SyntheticDataset(const SyntheticOptions& options) : options_(options) {}
  SyntheticOptions options_;
};

}  // namespace retort::trainer::data
