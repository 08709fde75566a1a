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

std::vector<double> RunAndReadLosses(const std::string& dir, int workers) {
  std::ofstream(dir + "/job.yaml")
      << "name: invariance\n"
         "teacher: {preset: fm-teacher-p7}\n"
         "student: {preset: fm-student-p7}\n"
         "dataset: {kind: fashion-mnist, augment: true}\n"
         "global_batch: 60\n"
         "steps: "
      << kSteps
      << "\n"
         "optimizer: {lr: 0.002, warmup_steps: 5, clip_grad_norm: 1.0}\n"
         "distillation: {temperature: 2.0, alpha: 0.5}\n"
         "threads_per_worker: 1\n"
         "evaluate: false\n";
  std::string out = dir + "/w" + std::to_string(workers);
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

}  // namespace
}  // namespace retort
