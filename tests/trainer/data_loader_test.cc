#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "trainer/data/loader.h"
#include "trainer/data/random.h"
#include "trainer/data/synthetic_dataset.h"

namespace retort::trainer::data {
namespace {

std::shared_ptr<const Dataset> Synthetic(int64_t size, SampleShape shape = {3, 8, 8},
                                         uint64_t seed = 1) {
  SyntheticOptions options;
  options.size = size;
  options.shape = shape;
  options.seed = seed;
  auto ds = SyntheticDataset::Create(options);
  EXPECT_TRUE(ds.ok()) << ds.status();
  return std::make_shared<SyntheticDataset>(std::move(*ds));
}

// Wraps a dataset: fails some indices with DataLoss, and/or sleeps in every Get.
class FaultyDataset final : public Dataset {
 public:
  FaultyDataset(std::shared_ptr<const Dataset> inner, std::set<int64_t> failing,
                std::chrono::milliseconds delay = std::chrono::milliseconds(0))
      : inner_(std::move(inner)), failing_(std::move(failing)), delay_(delay) {}
  int64_t size() const override { return inner_->size(); }
  SampleShape shape() const override { return inner_->shape(); }
  int num_classes() const override { return inner_->num_classes(); }
  Status Get(int64_t index, uint64_t seed, float* out, int64_t* label) const override {
    ++calls_;
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (failing_.count(index)) return DataLossError(SampleName(index) + ": corrupt test sample");
    return inner_->Get(index, seed, out, label);
  }
  std::string SampleName(int64_t index) const override {
    return "faulty/" + std::to_string(index) + ".jpg";
  }
  int64_t calls() const { return calls_.load(); }

 private:
  std::shared_ptr<const Dataset> inner_;
  std::set<int64_t> failing_;
  std::chrono::milliseconds delay_;
  mutable std::atomic<int64_t> calls_{0};
};

std::unique_ptr<Loader> MakeLoader(std::shared_ptr<const Dataset> ds, LoaderOptions options) {
  auto loader = Loader::Create(std::move(ds), options);
  EXPECT_TRUE(loader.ok()) << loader.status();
  return loader.ok() ? std::move(*loader) : nullptr;
}

LoaderOptions Options(int64_t batch, int threads = 3, int depth = 2) {
  LoaderOptions options;
  options.global_batch = batch;
  options.seed = 17;
  options.num_threads = threads;
  options.prefetch_depth = depth;
  return options;
}

TEST(DataLoader, BatchesMatchTheSamplerAndTheDataset) {
  auto ds = Synthetic(50);
  auto loader = MakeLoader(ds, Options(12));
  ASSERT_NE(loader, nullptr);
  ASSERT_TRUE(loader->Seek(SamplerState{1, 2}, 1, 3).ok());
  std::vector<float> expected(3 * 8 * 8);
  for (int i = 0; i < 3; ++i) {
    const SamplerState at = loader->position();
    auto batch = loader->Next(Deadline::AfterMs(10000));
    ASSERT_TRUE(batch.ok()) << batch.status();
    auto slice = loader->sampler().Slice(at.epoch, at.step, 1, 3);
    ASSERT_TRUE(slice.ok());
    EXPECT_EQ(batch->epoch, at.epoch);
    EXPECT_EQ(batch->step, at.step);
    EXPECT_EQ(batch->sample_indices, slice->indices);
    EXPECT_DOUBLE_EQ(batch->weight, 4.0 / 12.0);
    ASSERT_EQ(batch->images.sizes(), (torch::IntArrayRef{4, 3, 8, 8}));
    ASSERT_EQ(batch->labels.scalar_type(), torch::kInt64);
    for (size_t k = 0; k < slice->indices.size(); ++k) {
      const int64_t index = slice->indices[k];
      const uint64_t seed = AugmentationSeed(17, at.epoch, index);
      EXPECT_EQ(batch->augmentation_seeds[k], seed);
      int64_t label = -1;
      ASSERT_TRUE(ds->Get(index, seed, expected.data(), &label).ok());
      EXPECT_EQ(batch->labels[static_cast<int64_t>(k)].item<int64_t>(), label);
      const float* got = batch->images.data_ptr<float>() + k * expected.size();
      EXPECT_TRUE(std::equal(expected.begin(), expected.end(), got)) << "sample " << index;
    }
  }
  // Position rolls over the epoch boundary (4 steps per epoch of 50 / 12).
  EXPECT_EQ(loader->position(), (SamplerState{2, 1}));
  EXPECT_EQ(loader->stats().batches, 3);
}

TEST(DataLoader, AugmentOffGivesZeroSeeds) {
  LoaderOptions options = Options(4);
  options.augment = false;
  auto loader = MakeLoader(Synthetic(8), options);
  ASSERT_TRUE(loader->Seek(SamplerState{0, 0}, 0, 1).ok());
  auto batch = loader->Next(Deadline::AfterMs(10000));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->augmentation_seeds, std::vector<uint64_t>(4, 0));
}

// Ranks change world size at step boundaries (each rank with its own loader, as in a job);
// the samples seen over the epoch are exactly the epoch's steps*B first permutation entries,
// and a sample's pixels do not depend on which world size decoded it.
TEST(DataLoader, WorldSizeChangesMidEpochSkipAndRepeatNothing) {
  auto ds = Synthetic(70);
  const std::vector<int> world_at_step = {2, 2, 5, 1, 3, 3, 4, 1, 2};  // 70 / 7 = 10 steps
  const LoaderOptions options = Options(7, 2, 2);
  std::map<int64_t, std::vector<float>> pixels_by_sample;
  std::vector<int64_t> seen;
  std::vector<std::unique_ptr<Loader>> ranks;
  int current_world = 0;
  for (int64_t step = 0; step < static_cast<int64_t>(world_at_step.size()); ++step) {
    const int world = world_at_step[static_cast<size_t>(step)];
    if (world != current_world) {
      // New generation: surviving loaders re-plan, new ranks get loaders.
      while (static_cast<int>(ranks.size()) < world) ranks.push_back(MakeLoader(ds, options));
      ranks.resize(static_cast<size_t>(world));
      for (int r = 0; r < world; ++r)
        ASSERT_TRUE(ranks[static_cast<size_t>(r)]->Seek(SamplerState{0, step}, r, world).ok());
      current_world = world;
    }
    double weight_sum = 0;
    for (int r = 0; r < world; ++r) {
      auto batch = ranks[static_cast<size_t>(r)]->Next(Deadline::AfterMs(10000));
      ASSERT_TRUE(batch.ok()) << batch.status();
      EXPECT_EQ(batch->step, step);
      weight_sum += batch->weight;
      const int64_t numel = 3 * 8 * 8;
      for (size_t k = 0; k < batch->sample_indices.size(); ++k) {
        const int64_t index = batch->sample_indices[k];
        seen.push_back(index);
        const float* p = batch->images.data_ptr<float>() + static_cast<int64_t>(k) * numel;
        pixels_by_sample[index] = std::vector<float>(p, p + numel);
      }
    }
    EXPECT_NEAR(weight_sum, 1.0, 1e-12);
  }
  const auto perm = ranks[0]->sampler().Permutation(0);
  std::vector<int64_t> expected(perm->begin(),
                                perm->begin() + 7 * static_cast<int64_t>(world_at_step.size()));
  std::sort(expected.begin(), expected.end());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, expected);

  // The same samples decoded by a single-rank loader are bit-identical.
  auto single = MakeLoader(ds, options);
  ASSERT_TRUE(single->Seek(SamplerState{0, 0}, 0, 1).ok());
  for (size_t step = 0; step < world_at_step.size(); ++step) {
    auto batch = single->Next(Deadline::AfterMs(10000));
    ASSERT_TRUE(batch.ok());
    for (size_t k = 0; k < batch->sample_indices.size(); ++k) {
      const float* p = batch->images.data_ptr<float>() + static_cast<int64_t>(k) * 192;
      EXPECT_EQ(std::vector<float>(p, p + 192), pixels_by_sample[batch->sample_indices[k]]);
    }
  }
}

TEST(DataLoader, SharesApplyFromTheirStepUntilTheNextSeek) {
  auto ds = Synthetic(60);
  const LoaderOptions options = Options(10, 2, 2);
  std::vector<std::unique_ptr<Loader>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(MakeLoader(ds, options));
    ASSERT_TRUE(ranks.back()->Seek(SamplerState{0, 0}, r, 2).ok());
  }
  // Steps 0 and 1 are planned (prefetch depth 2): shares from step 1 come too late.
  EXPECT_EQ(ranks[0]->SetShares(1, {7, 3}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ranks[0]->SetShares(2, {7, 2}).code(), StatusCode::kInvalidArgument);
  for (auto& loader : ranks) ASSERT_TRUE(loader->SetShares(2, {7, 3}).ok());
  std::vector<int64_t> seen;
  for (int64_t step = 0; step < 4; ++step) {
    for (int r = 0; r < 2; ++r) {
      auto batch = ranks[static_cast<size_t>(r)]->Next(Deadline::AfterMs(10000));
      ASSERT_TRUE(batch.ok()) << batch.status();
      const int64_t want = step < 2 ? 5 : (r == 0 ? 7 : 3);
      EXPECT_EQ(static_cast<int64_t>(batch->sample_indices.size()), want) << step << " " << r;
      EXPECT_DOUBLE_EQ(batch->weight, static_cast<double>(want) / 10.0);
      seen.insert(seen.end(), batch->sample_indices.begin(), batch->sample_indices.end());
    }
  }
  const auto perm = ranks[0]->sampler().Permutation(0);
  EXPECT_EQ(seen, std::vector<int64_t>(perm->begin(), perm->begin() + 40))
      << "every position of the four steps once, in order";
  // A Seek (a new generation) is even again.
  ASSERT_TRUE(ranks[0]->Seek(SamplerState{0, 4}, 0, 2).ok());
  auto batch = ranks[0]->Next(Deadline::AfterMs(10000));
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->sample_indices.size(), 5u);
}

TEST(DataLoader, RankBeyondTheBatchGetsAnEmptySlice) {
  auto loader = MakeLoader(Synthetic(10), Options(2));
  ASSERT_TRUE(loader->Seek(SamplerState{0, 0}, 2, 3).ok());
  auto batch = loader->Next(Deadline::AfterMs(10000));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->images.size(0), 0);
  EXPECT_EQ(batch->weight, 0.0);
}

TEST(DataLoader, DecodeErrorSurfacesOnNextNamingTheSample) {
  auto base = Synthetic(40);
  SamplerConfig config{40, 8, 17, true};
  auto sampler = Sampler::Create(config);
  ASSERT_TRUE(sampler.ok());
  const int64_t bad = (*sampler).Slice(0, 1, 0, 1)->indices[3];  // a sample of step 1
  auto ds = std::make_shared<FaultyDataset>(base, std::set<int64_t>{bad});
  auto loader = MakeLoader(ds, Options(8));
  ASSERT_TRUE(loader->Seek(SamplerState{0, 0}, 0, 1).ok());
  ASSERT_TRUE(loader->Next(Deadline::AfterMs(10000)).ok());
  auto failed = loader->Next(Deadline::AfterMs(10000));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(failed.status().message().find("faulty/" + std::to_string(bad) + ".jpg"),
            std::string::npos)
      << failed.status();
  EXPECT_NE(failed.status().message().find("step 1"), std::string::npos) << failed.status();
  // The failed step is consumed; the loader goes on with the next one.
  EXPECT_EQ(loader->position(), (SamplerState{0, 2}));
  auto next = loader->Next(Deadline::AfterMs(10000));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->step, 2);
}

class ThrowingDataset final : public Dataset {
 public:
  int64_t size() const override { return 8; }
  SampleShape shape() const override { return SampleShape{1, 2, 2}; }
  int num_classes() const override { return 2; }
  Status Get(int64_t, uint64_t, float*, int64_t*) const override {
    throw std::runtime_error("boom");
  }
  std::string SampleName(int64_t index) const override {
    return "throwing/" + std::to_string(index);
  }
};

TEST(DataLoader, ExceptionInADecodeThreadBecomesAnErrorOnNext) {
  auto loader = MakeLoader(std::make_shared<ThrowingDataset>(), Options(4));
  ASSERT_TRUE(loader->Seek(SamplerState{0, 0}, 0, 1).ok());
  auto batch = loader->Next(Deadline::AfterMs(10000));
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), StatusCode::kInternal);
  EXPECT_NE(batch.status().message().find("throwing/"), std::string::npos) << batch.status();
  EXPECT_NE(batch.status().message().find("boom"), std::string::npos) << batch.status();
}

TEST(DataLoader, SkipCorruptReplacesWithTheNextValidIndex) {
  auto base = Synthetic(20);
  auto ds = std::make_shared<FaultyDataset>(base, std::set<int64_t>{5, 6, 19});
  LoaderOptions options = Options(20);
  options.skip_corrupt = true;
  auto loader = MakeLoader(ds, options);
  ASSERT_TRUE(loader->Seek(SamplerState{0, 0}, 0, 1).ok());
  auto batch = loader->Next(Deadline::AfterMs(10000));
  ASSERT_TRUE(batch.ok()) << batch.status();
  std::multiset<int64_t> used(batch->sample_indices.begin(), batch->sample_indices.end());
  EXPECT_EQ(used.count(5) + used.count(6) + used.count(19), 0u);
  EXPECT_EQ(used.count(7), 3u);  // itself, and for 5 and 6
  EXPECT_EQ(used.count(0), 2u);  // itself, and for 19 (wraps around)
  EXPECT_EQ(loader->stats().replaced_samples, 3);
  EXPECT_EQ(loader->stats().corrupt_samples, 3);
  // The replacement's augmentation seed is that of the index actually used.
  for (size_t k = 0; k < batch->sample_indices.size(); ++k) {
    EXPECT_EQ(batch->augmentation_seeds[k], AugmentationSeed(17, 0, batch->sample_indices[k]));
  }
}

TEST(DataLoader, SkipCorruptGivesUpAfterMaxReplacements) {
  std::set<int64_t> all_bad;
  for (int64_t i = 0; i < 30; ++i) all_bad.insert(i);
  auto ds = std::make_shared<FaultyDataset>(Synthetic(30), all_bad);
  LoaderOptions options = Options(4);
  options.skip_corrupt = true;
  options.max_replacements = 3;
  auto loader = MakeLoader(ds, options);
  ASSERT_TRUE(loader->Seek(SamplerState{0, 0}, 0, 1).ok());
  auto batch = loader->Next(Deadline::AfterMs(10000));
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(batch.status().message().find("no readable replacement"), std::string::npos)
      << batch.status();
}

TEST(DataLoader, NextHonoursItsDeadlineAndMeasuresTheWait) {
  auto ds = std::make_shared<FaultyDataset>(Synthetic(16), std::set<int64_t>{},
                                            std::chrono::milliseconds(100));
  auto loader = MakeLoader(ds, Options(4, /*threads=*/1, /*depth=*/1));
  ASSERT_TRUE(loader->Seek(SamplerState{0, 0}, 0, 1).ok());
  const auto start = std::chrono::steady_clock::now();
  auto early = loader->Next(Deadline::AfterMs(50));
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(elapsed, 0.35);
  EXPECT_EQ(loader->position(), (SamplerState{0, 0}));  // still next
  auto batch = loader->Next(Deadline::AfterMs(10000));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->step, 0);
  // 4 samples x 100 ms on one thread: the second call waited for most of the rest.
  EXPECT_GT(loader->stats().last_wait_seconds, 0.2);
  EXPECT_GT(loader->stats().total_wait_seconds, 0.35);
}

TEST(DataLoader, PrefetchesAheadAndDestructorJoinsPromptly) {
  auto ds = std::make_shared<FaultyDataset>(Synthetic(400), std::set<int64_t>{},
                                            std::chrono::milliseconds(20));
  auto loader = MakeLoader(ds, Options(8, /*threads=*/4, /*depth=*/3));
  ASSERT_TRUE(loader->Seek(SamplerState{0, 0}, 0, 1).ok());
  // Without any Next(), the decode threads fill the prefetch window: 3 batches of 8.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ds->calls() < 24 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ds->calls(), 24);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ds->calls(), 24);  // and not more: the queue is bounded
  ASSERT_TRUE(loader->Next(Deadline::AfterMs(10000)).ok());
  const auto start = std::chrono::steady_clock::now();
  loader.reset();  // work for the new window is in flight
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(elapsed, 1.0);
}

TEST(DataLoader, PinMemoryNeedsCudaAndPinsWhenAvailable) {
  LoaderOptions options = Options(4);
  options.pin_memory = true;
  auto loader = Loader::Create(Synthetic(8), options);
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(loader.status().code(), StatusCode::kFailedPrecondition) << loader.status();
    return;
  }
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE((*loader)->Seek(SamplerState{0, 0}, 0, 1).ok());
  auto batch = (*loader)->Next(Deadline::AfterMs(10000));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE(batch->images.is_pinned());
  EXPECT_TRUE(batch->labels.is_pinned());
}

TEST(DataLoader, RejectsMisuse) {
  auto ds = Synthetic(10);
  EXPECT_FALSE(Loader::Create(nullptr, Options(2)).ok());
  EXPECT_FALSE(Loader::Create(ds, Options(0)).ok());
  EXPECT_FALSE(Loader::Create(ds, Options(2, 0)).ok());
  EXPECT_FALSE(Loader::Create(ds, Options(2, 1, 0)).ok());
  auto loader = MakeLoader(ds, Options(2));
  EXPECT_EQ(loader->Next(Deadline::AfterMs(100)).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(loader->Seek(SamplerState{0, 5}, 0, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(loader->Seek(SamplerState{0, 0}, 1, 1).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace retort::trainer::data
