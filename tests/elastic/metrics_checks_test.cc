// Unit tests of the elasticity scenarios' metrics checks and metrics.jsonl reader.
#include "elastic/metrics_checks.h"

#include <gtest/gtest.h>

#include <fstream>

#include "testing/subprocess.h"

namespace retort::elastic_testing {
namespace {

std::vector<MetricLine> Lines(std::initializer_list<std::pair<int64_t, int>> steps_and_worlds) {
  std::vector<MetricLine> out;
  for (auto [step, world] : steps_and_worlds) {
    MetricLine l;
    l.step = step;
    l.world_size = world;
    l.loss = 1.0 + static_cast<double>(step);
    out.push_back(l);
  }
  return out;
}

TEST(MetricsChecksTest, MissingStepsListsGaps) {
  EXPECT_EQ(MissingSteps(Lines({{1, 2}, {2, 2}, {3, 2}}), 3), "");
  EXPECT_EQ(MissingSteps(Lines({{1, 2}, {4, 2}}), 5), "2, 3, 5");
}

TEST(MetricsChecksTest, RedoneStepsOnlyCountsStepsBelowTheLastOneBeforeTheEvent) {
  auto lines = Lines({{1, 3}, {2, 3}, {3, 3}, {4, 3}, {4, 2}, {5, 2}});
  EXPECT_EQ(RedoneSteps(lines, 4, 4), "") << "the step in flight at the event may be redone";
  auto redo = Lines({{1, 3}, {2, 3}, {3, 3}, {4, 3}, {2, 2}, {3, 2}});
  EXPECT_EQ(RedoneSteps(redo, 4, 4), "2 (generation 0), 3 (generation 0)");
}

TEST(MetricsChecksTest, RepeatedStepsListsEachStepOnSeveralLinesWithItsGenerations) {
  auto lines = Lines({{1, 3}, {2, 3}, {3, 3}, {3, 2}, {4, 2}});
  lines[0].generation = lines[1].generation = lines[2].generation = 5;
  lines[3].generation = lines[4].generation = 6;
  const auto repeated = RepeatedSteps(lines);
  ASSERT_EQ(repeated.size(), 1u);
  EXPECT_EQ(repeated.at(3), (std::vector<uint64_t>{5, 6}));
  EXPECT_TRUE(RepeatedSteps(Lines({{1, 2}, {2, 2}})).empty());
}

TEST(MetricsChecksTest, CompareToReferenceFlagsLinesBeyondTolerance) {
  auto lines = Lines({{1, 2}, {2, 2}, {3, 2}});
  std::vector<double> ref = {2.0, 3.0, 4.0};
  auto same = CompareToReference(lines, ref, 1e-3);
  EXPECT_EQ(same.violations, 0);
  EXPECT_EQ(same.worst_relative, 0.0);
  lines[1].loss = 3.01;
  auto off = CompareToReference(lines, ref, 1e-3);
  EXPECT_EQ(off.violations, 1);
  EXPECT_EQ(off.worst_step, 2);
  EXPECT_NEAR(off.worst_relative, 0.01 / 3.0, 1e-12);
  EXPECT_NE(off.problems.find("step 2"), std::string::npos);
  auto outside = CompareToReference(Lines({{4, 2}}), ref, 1e-3);
  EXPECT_EQ(outside.violations, 1);
}

TEST(MetricsChecksTest, WorldSizeSequenceCollapsesRuns) {
  EXPECT_EQ(SequenceText(WorldSizeSequence(Lines({{1, 3}, {2, 3}, {3, 2}, {4, 2}, {5, 3}}))),
            "3 -> 2 -> 3");
}

TEST(MetricsChecksTest, ReadMetricsIgnoresAnUnterminatedLastLineAndReportsGarbage) {
  std::string path = testing::MakeTempDir("retort_metrics") + "/metrics.jsonl";
  std::ofstream(path)
      << R"({"step":1,"time_unix_ms":5,"epoch":0,"generation":2,"world_size":3,"loss":1.5})"
      << "\nnot json\n"
      << R"({"step":2,"time_unix_ms":6,)";
  MetricsFile m = ReadMetrics(path);
  ASSERT_EQ(m.lines.size(), 1u);
  EXPECT_EQ(m.lines[0].step, 1);
  EXPECT_EQ(m.lines[0].generation, 2u);
  EXPECT_EQ(m.lines[0].world_size, 3);
  EXPECT_DOUBLE_EQ(m.lines[0].loss, 1.5);
  ASSERT_EQ(m.malformed.size(), 1u);
  EXPECT_EQ(m.malformed[0], "not json");
}

}  // namespace
}  // namespace retort::elastic_testing
