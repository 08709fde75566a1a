// Base fixture of the elasticity scenarios (tests/elastic/*_test.cc): skips without the
// Fashion-MNIST files, loads the uninterrupted reference curve, offers the opening most
// scenarios share (StartTrainingTogether) and the checks every scenario ends with (the job
// completes, no completed step is lost, the loss curve matches).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "elastic/elastic_cluster.h"
#include "elastic/metrics_checks.h"

namespace retort::elastic_testing {

using std::chrono::milliseconds;

// A member of a generation and the index of its worker process (ElasticCluster::worker).
struct RankedWorker {
  MemberView member;
  int index = -1;
};

inline std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

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

  // Keeps the logs of a failed scenario for inspection (of every scenario with
  // RETORT_KEEP_TEST_LOGS=1 in the environment); removes them otherwise.
  void TearDown() override {
    const char* keep = std::getenv("RETORT_KEEP_TEST_LOGS");
    if (HasFailure() || (keep != nullptr && std::string(keep) == "1")) {
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

  // The opening most scenarios share: loads `job`'s reference curve, starts a cluster of
  // `workers`, and waits until they completed step `step` together (a generation of all of
  // them) and all hold ranks. The cluster lands in *c, its status in *st. Fatal failures stay
  // in this function: call it under ASSERT_NO_FATAL_FAILURE.
  void StartTrainingTogether(const JobOptions& job, int workers, int64_t step,
                             std::unique_ptr<ElasticCluster>* c, StatusView* st,
                             const ClusterOptions& options = {}) {
    LoadReference(job);
    if (HasFatalFailure()) return;
    *c = StartCluster(job, workers, options);
    ASSERT_TRUE((*c)->WaitForWorld(workers, step, kStartup)) << (*c)->Logs();
    ASSERT_TRUE(WaitAllRanked(**c, workers, kEvent, st));
  }

  // The member holding `rank` in `st` and its worker process.
  static RankedWorker WorkerAtRank(const ElasticCluster& c, const StatusView& st, int rank) {
    const MemberView* m = st.ByRank(rank);
    if (m == nullptr) {
      ADD_FAILURE() << "no member holds rank " << rank << ": " << st.raw;
      return {};
    }
    return RankedWorker{*m, c.WorkerIndexForLocalRank(m->local_rank)};
  }

  // Flips `count` bytes of `path` from offset `at` (bit-inverts them): a corrupt copy.
  static void FlipBytes(const std::string& path, std::streamoff at, size_t count) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << path;
    std::string bytes(count, '\0');
    f.seekg(at);
    f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    for (char& ch : bytes) ch = static_cast<char>(~ch);
    f.seekp(at);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(f.good()) << "cannot corrupt " << path;
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
  void ExpectRemovedWithoutLoss(ElasticCluster& c, const JobOptions& job, const MetricsMark& before,
                                const std::string& what) {
    MetricsFile m = c.Metrics();
    EXPECT_THAT(SequenceText(WorldSizeSequence(m.lines)), ::testing::EndsWith("3 -> 2"));
    ExpectNoLostSteps(m, job, before);
    ExpectEachStepOnce(m, job);
    ExpectSameTrajectory(m.lines, what + " at step ~" + std::to_string(before.step));
  }

  // As many lines as steps: with no step missing, none was run twice.
  static void ExpectEachStepOnce(const MetricsFile& m, const JobOptions& job) {
    EXPECT_EQ(m.lines.size(), static_cast<size_t>(job.steps)) << "some step was run twice";
  }

  // Prints the recovery time after a kill at `kill_ms` (testing::UnixMs): from the kill to the
  // first step completed in a generation after `generation` (the one the kill ended), with
  // `what` naming the event. Prints nothing when no such step is in `m`.
  static void PrintRecoveryTime(const MetricsFile& m, uint64_t generation, int64_t kill_ms,
                                const std::string& what) {
    for (const auto& l : m.lines) {
      if (l.generation <= generation) continue;
      std::cout << "[ measured ] " << what << " after step " << l.step - 1
                << " -> next new completed step " << l.step << ": "
                << (l.time_unix_ms - kill_ms) / 1000.0 << " s\n";
      return;
    }
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
  // `before`: where metrics.jsonl stood at the event (ElasticCluster::Mark()).
  void ExpectNoLostSteps(const MetricsFile& m, const JobOptions& job, const MetricsMark& before) {
    EXPECT_TRUE(m.malformed.empty()) << "malformed metrics lines: " << m.malformed.front();
    std::string missing = MissingSteps(m.lines, job.steps);
    EXPECT_EQ(missing, "") << "steps never completed";
    std::string redone = RedoneSteps(m.lines, before.lines, before.step);
    EXPECT_EQ(redone, "") << "steps completed before the event (up to step " << before.step
                          << ") were run again after it";
  }
  // The same, with the mark's two fields taken apart (the launcher tests keep them so).
  void ExpectNoLostSteps(const MetricsFile& m, const JobOptions& job, size_t lines_before,
                         int64_t step_before) {
    ExpectNoLostSteps(m, job, MetricsMark{lines_before, step_before});
  }

  std::vector<double> reference_;
  std::vector<std::string> dirs_;
};

}  // namespace retort::elastic_testing
