#include "trainer/step_profiler.h"

#include <gtest/gtest.h>

#include <sstream>

namespace retort::trainer {
namespace {

StepTiming Timing(int64_t step, double data, double teacher, double comm) {
  StepTiming t;
  t.step = step;
  t.data_wait = data;
  t.teacher_forward = teacher;
  t.student_forward = 0.02;
  t.backward = 0.04;
  t.comm_exposed = comm;
  t.optimizer = 0.005;
  t.total = data + teacher + 0.02 + 0.04 + comm + 0.005;
  return t;
}

TEST(StepProfilerTest, WritesOneJsonLinePerStep) {
  std::ostringstream out;
  StepProfiler profiler({}, &out);
  profiler.Record(Timing(1, 0.01, 0.1, 0.0));
  profiler.Record(Timing(2, 0.01, 0.1, 0.0));
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_NE(text.find("{\"step\":1,\"data_wait_s\":0.01,\"teacher_forward_s\":0.1,"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"skipped\":false}"), std::string::npos);
}

TEST(StepProfilerTest, ComputeBoundNamesTheLargestPhase) {
  StepProfiler profiler;
  for (int i = 0; i < 20; ++i) profiler.Record(Timing(i, 0.001, 0.3, 0.001));
  ProfileSummary s = profiler.Summarize();
  EXPECT_EQ(s.bottleneck, "compute:teacher_forward");
  EXPECT_TRUE(s.outlier_steps.empty());
  EXPECT_NE(s.ToJson().find("\"bottleneck\":\"compute:teacher_forward\""), std::string::npos);
}

TEST(StepProfilerTest, DataLoaderBoundAboveTwentyPercent) {
  StepProfiler profiler;
  for (int i = 0; i < 10; ++i) profiler.Record(Timing(i, 0.05, 0.1, 0.0));  // 23% data wait
  EXPECT_EQ(profiler.Summarize().bottleneck, "data_loader");
  StepProfiler below;
  for (int i = 0; i < 10; ++i) below.Record(Timing(i, 0.03, 0.1, 0.0));  // 15% data wait
  EXPECT_NE(below.Summarize().bottleneck, "data_loader");
}

TEST(StepProfilerTest, CommunicationBoundAndOutliers) {
  StepProfiler profiler;
  for (int i = 0; i < 30; ++i) profiler.Record(Timing(i, 0.0, 0.1 + 0.001 * (i % 3), 0.1));
  profiler.Record(Timing(30, 0.0, 2.0, 0.1));  // a 2 s teacher forward among ~0.27 s steps
  ProfileSummary s = profiler.Summarize();
  EXPECT_EQ(s.bottleneck, "communication");
  ASSERT_EQ(s.outlier_steps.size(), 1u);
  EXPECT_EQ(s.outlier_steps[0], 30);
  bool named = false;
  for (const auto& f : s.findings) named |= f.find("step-time outliers") != std::string::npos;
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace retort::trainer
