// End to end: the same job run by 1, 2 and 3 worker processes (coordinator + workers on
// 127.0.0.1 through retort-run) follows the same loss curve, up to floating-point
// reassociation: world-size invariance of sampling, loss weighting and ZeRO-1 updates.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/file_util.h"
#include "testing/subprocess.h"

namespace retort {
namespace {

using std::chrono::milliseconds;

constexpr int kSteps = 50;

// `extra`: more spec lines (keys not set above; a `dataset:` or `distillation:` replaces the
// default one);
// `steps`: the job's length.
std::vector<double> RunAndReadLosses(const std::string& dir, int workers,
                                     const std::string& extra = "", int steps = kSteps) {
  std::ofstream(dir + "/job.yaml")
      << "name: invariance\n"
         "teacher: {preset: fm-teacher-p7}\n"
         "student: {preset: fm-student-p7}\n"
      << (extra.find("dataset:") == std::string::npos
              ? "dataset: {kind: fashion-mnist, augment: true}\n"
              : "")
      << "global_batch: " << (extra.empty() ? 60 : 58)
      << "\n"
         "steps: "
      << steps
      << "\n"
         "optimizer: {lr: 0.002, warmup_steps: 5, clip_grad_norm: 1.0}\n"
      << (extra.find("distillation:") == std::string::npos
              ? "distillation: {temperature: 2.0, alpha: 0.5}\n"
              : "")
      << "threads_per_worker: 1\n"
         "evaluate: false\n"
      << extra;
  // One output directory per run: retort-run resumes (or reports) a run found in its directory.
  static int runs = 0;
  std::string out = dir + "/run" + std::to_string(++runs) + "-w" + std::to_string(workers);
  std::string log;
  int rc =
      testing::RunCommand({testing::BinaryPath("tools/retort-run"), "--job=" + dir + "/job.yaml",
                           "--workers=" + std::to_string(workers), "--output-dir=" + out},
                          &log, milliseconds(240000));
  EXPECT_EQ(rc, 0) << log;
  std::vector<double> losses;
  std::ifstream metrics(out + "/metrics.jsonl");
  std::string line;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["world_size"].get<int>(), workers);
    losses.push_back(j["loss"].get<double>());
  }
  return losses;
}

TEST(WorldSizeInvarianceTest, OneTwoAndThreeWorkersFollowTheSameLossCurve) {
  std::string dir = testing::MakeTempDir("retort_e2e");
  auto one = RunAndReadLosses(dir, 1);
  ASSERT_EQ(one.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(one.back(), one.front()) << "training must reduce the loss";
  for (int workers : {2, 3}) {
    auto many = RunAndReadLosses(dir, workers);
    ASSERT_EQ(many.size(), one.size()) << workers << " workers";
    double worst = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      double rel = std::abs(many[i] - one[i]) / std::max(1e-12, std::abs(one[i]));
      worst = std::max(worst, rel);
      EXPECT_LE(rel, 1e-4) << workers << " workers, step " << i + 1 << ": " << many[i] << " vs "
                           << one[i];
    }
    std::cout << "[ measured ] " << workers << " workers vs 1: worst relative loss difference over "
              << kSteps << " steps = " << worst << "\n";
  }
}

// Mixup and CutMix mix fixed pairs of the global batch, never cut between ranks, and colour
// jitter and random erasing are drawn from each sample's seed: the curve does not depend on
// the world size either. A global batch of 58 (29 pairs) splits 10/10/9 pairs over 3 workers.
TEST(WorldSizeInvarianceTest, WithMixupAndCutMixOneAndThreeWorkersFollowTheSameLossCurve) {
  constexpr int kMixSteps = 30;
  const std::string mixing =
      "mixing: {mixup_alpha: 0.8, cutmix_alpha: 1.0, switch_prob: 0.5, label_smoothing: 0.1}\n"
      "dataset: {kind: fashion-mnist, augment: true, augmentation: {random_erase_prob: 0.25, "
      "color_jitter: 0.4}}\n";
  std::string dir = testing::MakeTempDir("retort_e2e_mix");
  auto one = RunAndReadLosses(dir, 1, mixing, kMixSteps);
  ASSERT_EQ(one.size(), static_cast<size_t>(kMixSteps));
  auto three = RunAndReadLosses(dir, 3, mixing, kMixSteps);
  ASSERT_EQ(three.size(), one.size());
  // Mixing changes the curve (the job is not silently unmixed).
  auto plain = RunAndReadLosses(dir, 1, "mixing: {label_smoothing: 0.1}\n", kMixSteps);
  ASSERT_EQ(plain.size(), one.size());
  double worst = 0, differs = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    const double rel = std::abs(three[i] - one[i]) / std::max(1e-12, std::abs(one[i]));
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-4) << "step " << i + 1 << ": " << three[i] << " vs " << one[i];
    differs = std::max(differs, std::abs(plain[i] - one[i]) / std::abs(one[i]));
  }
  EXPECT_GT(differs, 1e-2) << "the mixed and the unmixed jobs follow the same curve";
  std::cout << "[ measured ] mixing on, 3 workers vs 1: worst relative loss difference over "
            << kMixSteps << " steps = " << worst << "\n";
}

// DeiT's hard distillation and DKD are per-sample terms too: the curve does not depend on the
// world size, and each differs from Hinton's KL.
TEST(WorldSizeInvarianceTest, HardAndDecoupledDistillationFollowTheSameCurveOnOneAndTwoWorkers) {
  constexpr int kLossSteps = 20;
  std::string dir = testing::MakeTempDir("retort_e2e_losses");
  const auto kl = RunAndReadLosses(dir, 1, "mixing: {label_smoothing: 0}\n", kLossSteps);
  ASSERT_EQ(kl.size(), static_cast<size_t>(kLossSteps));
  for (const std::string loss : {"hard", "dkd"}) {
    const std::string extra = "distillation: {temperature: 2.0, alpha: 0.5, loss: " + loss + "}\n";
    auto one = RunAndReadLosses(dir, 1, extra, kLossSteps);
    auto two = RunAndReadLosses(dir, 2, extra, kLossSteps);
    ASSERT_EQ(one.size(), kl.size()) << loss;
    ASSERT_EQ(two.size(), kl.size()) << loss;
    double worst = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      const double rel = std::abs(two[i] - one[i]) / std::max(1e-12, std::abs(one[i]));
      worst = std::max(worst, rel);
      EXPECT_LE(rel, 1e-4) << loss << ", step " << i + 1;
    }
    EXPECT_GT(std::abs(one.front() - kl.front()), 1e-3) << loss << " is Hinton's KL again";
    std::cout << "[ measured ] loss " << loss << ", 2 workers vs 1: worst relative loss difference"
              << " over " << kLossSteps << " steps = " << worst << "\n";
  }
}

}  // namespace
}  // namespace retort
