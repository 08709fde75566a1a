// Helpers shared by the trainer tests: tiny models, synthetic batches, N-rank runs.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "trainer/data/batch.h"
#include "trainer/flat_parameters.h"
#include "trainer/kd_step.h"
#include "trainer/models/vit.h"
#include "trainer/testing/thread_shard_comm.h"

namespace retort::trainer::test {

// A small ViT with 4x4 patches and 10 classes (default: 8x8 single-channel images, 2 heads).
inline VitConfig TinyVit(int64_t dim, int64_t depth, int64_t image_size = 8,
                         int64_t in_channels = 1, int64_t heads = 2) {
  VitConfig c;
  c.name = "tiny";
  c.image_size = image_size;
  c.in_channels = in_channels;
  c.patch_size = 4;
  c.dim = dim;
  c.depth = depth;
  c.heads = heads;
  c.num_classes = 10;
  return c;
}

inline std::unique_ptr<Model> MustMake(StatusOr<std::unique_ptr<Model>> m) {
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(m).value();
}

// A deterministic synthetic global batch: images [n, C, H, W], labels [n].
inline Batch SyntheticBatch(int64_t n, int64_t channels, int64_t size, int64_t classes,
                            uint64_t seed, int64_t first_index = 0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Batch b;
  b.images = torch::randn({n, channels, size, size}, gen);
  b.labels = torch::randint(classes, {n}, gen, torch::kLong);
  for (int64_t i = 0; i < n; ++i) {
    b.sample_indices.push_back(first_index + i);
    b.augmentation_seeds.push_back(0);
  }
  b.weight = 1.0;
  return b;
}

// Rank r's slice of `global` given per-rank sizes (weights n_r / N).
inline Batch Slice(const Batch& global, const std::vector<int64_t>& sizes, int rank) {
  int64_t begin = 0;
  for (int r = 0; r < rank; ++r) begin += sizes[r];
  const int64_t n = sizes[rank];
  Batch b;
  b.images = global.images.narrow(0, begin, n).contiguous();
  b.labels = global.labels.narrow(0, begin, n).contiguous();
  b.sample_indices.assign(global.sample_indices.begin() + begin,
                          global.sample_indices.begin() + begin + n);
  b.augmentation_seeds.assign(global.augmentation_seeds.begin() + begin,
                              global.augmentation_seeds.begin() + begin + n);
  b.epoch = global.epoch;
  b.step = global.step;
  b.weight = static_cast<double>(n) / static_cast<double>(global.images.size(0));
  return b;
}

// Runs fn(rank) on world_size threads and joins them.
inline void RunRanks(int world_size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// ||a - b|| / ||b||
inline double RelativeDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

}  // namespace retort::trainer::test
