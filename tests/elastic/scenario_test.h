// Base fixture of the elasticity scenarios (tests/elastic/*_test.cc): skips without the
// Fashion-MNIST files, loads the uninterrupted reference curve, and offers the checks every
// scenario ends with (the job completes, no completed step is lost, the loss curve matches).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "elastic/elastic_cluster.h"
#include "elastic/metrics_checks.h"

namespace retort::elastic_testing {

using std::chrono::milliseconds;

class ElasticScenarioTest : public ::testing::Test {
 protected:
  // Bounds of every wait. The job (120 steps) takes ~10-30 s on a 2-core machine; the bounds are a
  // few times that, so a loaded machine does not fail the test while a hang still ends it.
  static constexpr milliseconds kStartup{60000};
  static constexpr milliseconds kEvent{45000};
  static constexpr milliseconds kCompletion{150000};
  // A job whose metrics gain no line for this long (while its processes run) is hung.
  static constexpr milliseconds kStall{25000};

  void SetUp() override {
    if (!FashionMnistAvailable())
      GTEST_SKIP() << "Fashion-MNIST not found in " << kFashionMnistDir << " (scripts/setup)";
  }

  // Keeps the logs of a failed scenario for inspection; removes them otherwise.
  void TearDown() override {
    if (HasFailure()) {
      for (const auto& d : dirs_) std::cout << "[ logs     ] " << d << "\n";
      return;
    }
    std::error_code ec;
    for (const auto& d : dirs_) std::filesystem::remove_all(d, ec);
  }

  void LoadReference(const JobOptions& job) {
    std::string error;
    reference_ = ReferenceLosses(job, &error);
    ASSERT_FALSE(reference_.empty()) << error;
    ASSERT_LT(reference_.back(), reference_.front()) << "the reference run must reduce the loss";
  }

  std::unique_ptr<ElasticCluster> StartCluster(const JobOptions& job, int workers,
                                               ClusterOptions options = {}) {
    auto c = std::make_unique<ElasticCluster>(job, options);
    dirs_.push_back(c->dir());
    std::string error;
    EXPECT_TRUE(c->StartCoordinator(milliseconds(15000), &error)) << error;
    for (int i = 0; i < workers; ++i) c->StartWorker(i);
    return c;
  }

  // Waits until `members` workers hold ranks in one generation (the status lands in *st).
  ::testing::AssertionResult WaitAllRanked(ElasticCluster& c, size_t members, milliseconds timeout,
                                           StatusView* st = nullptr) {
    StatusView seen;
    if (c.WaitForStatus(
            [&](const StatusView& s) { return s.members.size() == members && s.AllRanked(); },
            timeout, &seen)) {
      if (st) *st = seen;
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "never " << members << " ranked members: " << seen.raw << "\n"
           << c.Logs();
  }

  // After a graceful removal from 3 workers: the world went 3 -> 2, nothing was lost or run
  // twice, and the loss curve is the uninterrupted one.
  void ExpectRemovedWithoutLoss(ElasticCluster& c, const JobOptions& job, size_t lines_before,
                                int64_t step_before, const std::string& what) {
    MetricsFile m = c.Metrics();
    EXPECT_THAT(SequenceText(WorldSizeSequence(m.lines)), ::testing::EndsWith("3 -> 2"));
    ExpectNoLostSteps(m, job, lines_before, step_before);
    EXPECT_EQ(m.lines.size(), static_cast<size_t>(job.steps)) << "some step was run twice";
    ExpectSameTrajectory(m.lines, what + " at step ~" + std::to_string(step_before));
  }

  // The loss of every metrics line (including lines of redone steps) against the reference.
  void ExpectSameTrajectory(const std::vector<MetricLine>& lines, const std::string& what) {
    CurveComparison c = CompareToReference(lines, reference_, kLossRelTolerance);
    std::cout << "[ measured ] " << what << ": worst relative loss difference vs the "
              << "uninterrupted run = " << c.worst_relative << " (step " << c.worst_step << ", "
              << lines.size() << " lines)\n";
    EXPECT_EQ(c.violations, 0) << what << ": " << c.violations
                               << " line(s) off the reference curve by more than "
                               << kLossRelTolerance << " relative: " << c.problems;
  }

  // Every process exits, all with status 0 (the job completed and every worker left).
  void ExpectCompletedCleanly(ElasticCluster& c, const std::vector<int>& skip_workers = {}) {
    std::string why;
    ASSERT_TRUE(c.WaitAllExited(kCompletion, kStall, &why)) << why << "\n" << c.Logs();
    for (int i = 0; i < c.worker_count(); ++i) {
      if (std::find(skip_workers.begin(), skip_workers.end(), i) != skip_workers.end()) continue;
      EXPECT_EQ(c.worker(i).Wait(milliseconds(0)).value_or(-1), 0)
          << "worker " << i << " exit status\n"
          << c.Logs();
    }
    EXPECT_EQ(c.coordinator().Wait(milliseconds(0)).value_or(-1), 0) << "coordinator exit status";
  }

  // Steps 1..N all present, well-formed lines, nothing completed before the event run again.
  void ExpectNoLostSteps(const MetricsFile& m, const JobOptions& job, size_t first_after_event,
                         int64_t last_step_before_event) {
    EXPECT_TRUE(m.malformed.empty()) << "malformed metrics lines: " << m.malformed.front();
    std::string missing = MissingSteps(m.lines, job.steps);
    EXPECT_EQ(missing, "") << "steps never completed";
    std::string redone = RedoneSteps(m.lines, first_after_event, last_step_before_event);
    EXPECT_EQ(redone, "") << "steps completed before the event (up to step "
                          << last_step_before_event << ") were run again after it";
  }

  std::vector<double> reference_;
  std::vector<std::string> dirs_;
};

}  // namespace retort::elastic_testing
