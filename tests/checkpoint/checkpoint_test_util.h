// Test helpers: aligned sharding plans (as the coordinator's planner makes them), deterministic
// optimizer state with awkward bit patterns, and writing a whole checkpoint of a plan.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/shard_file.h"
#include "checkpoint/shard_reader.h"
#include "testing/subprocess.h"

namespace retort::checkpoint::testing_util {

// Contiguous ranges starting at multiples of `alignment` (the last may be short or empty).
inline v1::ShardingPlan MakePlan(int64_t total, int world, int64_t alignment) {
  v1::ShardingPlan plan;
  plan.set_total_elements(total);
  plan.set_alignment(alignment);
  const int64_t units = (total + alignment - 1) / alignment;
  for (int r = 0; r < world; ++r) {
    int64_t begin = std::min(total, units * r / world * alignment);
    int64_t end = std::min(total, units * (r + 1) / world * alignment);
    auto* range = plan.add_ranges();
    range->set_rank(r);
    range->set_offset(begin);
    range->set_count(end - begin);
  }
  return plan;
}

// The full (unsharded) state of a model with `total` elements.
struct FullState {
  std::vector<float> params, exp_avg, exp_avg_sq;
};

// Random floats plus NaNs with payloads, -0, denormals and infinities, so that only a bit-exact
// copy compares equal.
inline FullState MakeState(int64_t total, uint32_t seed) {
  std::mt19937 rng(seed);
  auto fill = [&](std::vector<float>* v) {
    v->resize(static_cast<size_t>(total));
    for (auto& x : *v) {
      uint32_t bits = rng();
      std::memcpy(&x, &bits, 4);
    }
    const uint32_t specials[] = {0x80000000u, 0x00000001u, 0x7f800000u, 0xff800000u, 0x7fc00123u};
    for (size_t i = 0; i < v->size() && i < 5; ++i)
      std::memcpy(&(*v)[i * 7 % v->size()], &specials[i], 4);
  };
  FullState s;
  fill(&s.params);
  fill(&s.exp_avg);
  fill(&s.exp_avg_sq);
  return s;
}

inline ShardHeader BaseHeader(int64_t total) {
  ShardHeader h;
  h.generation = 7;
  h.seed = 1234;
  h.global_step = 300;
  h.optimizer_step = 299;
  h.epoch = 2;
  h.step_in_epoch = 17;
  h.total_elements = total;
  return h;
}

// Writes every rank's shard of `plan` into `dir` and returns the manifest a coordinator would
// commit for it.
inline v1::CheckpointManifest WriteCheckpoint(const std::string& dir, const FullState& state,
                                              const v1::ShardingPlan& plan,
                                              const WriteOptions& options = WriteOptions()) {
  v1::CheckpointManifest m;
  m.set_checkpoint_id(5);
  m.set_step(300);
  m.set_epoch(2);
  m.set_generation(7);
  m.set_world_size(plan.ranges_size());
  *m.mutable_plan() = plan;
  for (const auto& r : plan.ranges()) {
    ShardView v;
    v.header = BaseHeader(plan.total_elements());
    v.header.rank = r.rank();
    v.header.world_size = plan.ranges_size();
    v.header.range_offset = r.offset();
    v.header.range_count = r.count();
    v.params = state.params.data() + r.offset();
    v.exp_avg = state.exp_avg.data() + r.offset();
    v.exp_avg_sq = state.exp_avg_sq.data() + r.offset();
    auto ack = WriteShard(dir, v, options);
    EXPECT_TRUE(ack.ok()) << ack.status();
    if (ack.ok()) *m.add_files() = *ack;
  }
  return m;
}

// Bit-exact comparison of a read range with the full state.
inline ::testing::AssertionResult SameBits(const RangeState& got, const FullState& want,
                                           int64_t offset, int64_t count) {
  const std::vector<float>* g[3] = {&got.params, &got.exp_avg, &got.exp_avg_sq};
  const std::vector<float>* w[3] = {&want.params, &want.exp_avg, &want.exp_avg_sq};
  const char* names[3] = {"params", "exp_avg", "exp_avg_sq"};
  for (int a = 0; a < 3; ++a) {
    if (static_cast<int64_t>(g[a]->size()) != count)
      return ::testing::AssertionFailure() << names[a] << " has " << g[a]->size() << " elements";
    if (count > 0 && std::memcmp(g[a]->data(), w[a]->data() + offset, 4 * count) != 0)
      return ::testing::AssertionFailure()
             << names[a] << " differs in [" << offset << ", +" << count << ")";
  }
  return ::testing::AssertionSuccess();
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = retort::testing::MakeTempDir("retort_ckpt"); }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::string root_;
};

}  // namespace retort::checkpoint::testing_util
