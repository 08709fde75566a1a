// retortctl's observability commands without a coordinator: top's rows and text from a status
// reply, trace merge on rank files (one process track per rank), step windows.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/args.h"
#include "tools/ctl_top.h"
#include "tools/trace_merge.h"

namespace retort::tools {
namespace {

v1::StatusResponse TwoWorkers() {
  v1::StatusResponse s;
  s.set_job_name("demo");
  s.set_state(v1::JOB_STATE_RUNNING);
  s.set_generation(3);
  s.set_step(42);
  s.set_total_steps(100);
  for (int r = 0; r < 2; ++r) {
    auto* m = s.add_members();
    m->set_member_id("w1-" + std::to_string(r + 1));
    m->set_rank(r);
    m->set_node("node0");
    m->set_local_rank(r);
    m->set_generation(3);
    m->set_step(r == 0 ? 42 : 40);
    auto* x = m->mutable_metrics();
    x->set_samples_per_second(500);
    x->set_step_seconds(0.1);
    x->set_data_wait_seconds(r == 0 ? 0.01 : 0.05);
    x->set_student_forward_seconds(0.02);
    x->set_backward_seconds(0.04);
    x->set_comm_exposed_seconds(r == 0 ? 0.02 : 0.0);
    x->set_optimizer_seconds(0.01);
  }
  return s;
}

TEST(Top, RowsHaveLagAndPhaseShares) {
  const auto rows = TopRows(TwoWorkers());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].lag_steps, 0);
  EXPECT_EQ(rows[1].lag_steps, 2);
  EXPECT_EQ(rows[1].generation, 3u);
  double sum = 0;
  for (double p : rows[0].phase_share) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_NEAR(rows[1].phase_share[0], 0.05 / 0.12, 1e-9);  // data wait
  const std::string text = FormatTop(TwoWorkers(), rows);
  EXPECT_NE(text.find("generation 3, step 42/100, 2 worker(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("node0/1"), std::string::npos) << text;
  const auto j = TopJson(TwoWorkers(), rows);
  EXPECT_EQ(j["workers"][1]["lag_steps"], 2);
  EXPECT_DOUBLE_EQ(j["workers"][1]["data_wait_seconds"].get<double>(), 0.05);
}

nlohmann::json RankTrace(int rank) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", "rank"}}}});
  events.push_back({{"name", "backward"},
                    {"ph", "X"},
                    {"pid", rank},
                    {"tid", 1},
                    {"ts", 1000 + rank},
                    {"dur", 10}});
  return {{"traceEvents", events}, {"otherData", {{"rank", rank}}}};
}

TEST(TraceMerge, OneTrackPerRankAndClashingRanksMoved) {
  auto merged = MergeTraceDocuments({RankTrace(0), RankTrace(1), RankTrace(1)});
  ASSERT_TRUE(merged.ok()) << merged.status();
  std::set<int64_t> pids;
  int names = 0;
  for (const auto& e : (*merged)["traceEvents"]) {
    pids.insert(e["pid"].get<int64_t>());
    names += e["name"] == "process_name";
  }
  EXPECT_EQ(pids, (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(names, 3);
  EXPECT_FALSE(MergeTraceDocuments({nlohmann::json::object()}).ok());
}

TEST(TraceMerge, FindsOneWindowOrAsksForOne) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("trace-merge-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* f : {"trace-5-9-n-0.json", "trace-5-9-n-1.json", "trace-merged-5-9.json"})
    std::ofstream(dir / f) << "{}";
  auto one = FindTraceFiles(dir.string(), "");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->size(), 2u);
  std::ofstream(dir / "trace-20-30-n-0.json") << "{}";
  auto two = FindTraceFiles(dir.string(), "");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("5:9 20:30"), std::string::npos) << two.status();
  auto picked = FindTraceFiles(dir.string(), "20:30");
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ(picked->size(), 1u);
  std::filesystem::remove_all(dir);
}

TEST(StepWindow, ParsesAndNamesBadValues) {
  auto w = ParseStepWindow("--steps", "100:120");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->first, 100);
  EXPECT_EQ(w->second, 120);
  EXPECT_EQ(ParseStepWindow("--steps", "7")->second, 7);
  for (const char* bad : {"", "0:3", "5:4", "a:b", "3:"}) {
    auto r = ParseStepWindow("--steps", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

}  // namespace
}  // namespace retort::tools
