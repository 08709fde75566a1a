// result.json: what a completed job reports, and "not evaluated" is never a top-1 of 0.
#include "worker/job_result.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "testing/subprocess.h"

namespace retort::worker {
namespace {

JobResult Base() {
  JobResult r;
  r.job = "fm";
  r.steps = 120;
  r.student = "vit:fm-student";
  r.student_weights = "/out/student.safetensors";
  r.metrics = "/out/metrics.jsonl";
  return r;
}

TEST(JobResultTest, NotEvaluatedCarriesNoTopOneFields) {
  JobResult r = Base();
  r.teacher = "vit:fm-teacher";
  const nlohmann::json j = JobResultJson(r);
  EXPECT_EQ(j["evaluated"], false);
  EXPECT_EQ(j["teacher"], "vit:fm-teacher");
  for (const char* absent : {"student_top1", "teacher_top1", "test_samples", "eval_seconds"})
    EXPECT_FALSE(j.contains(absent)) << absent << " in " << j.dump();
}

TEST(JobResultTest, EvaluatedSupervisedJobHasNoTeacherFields) {
  JobResult r = Base();
  r.evaluation = JobResult::Evaluation{10000, 0.8125, 0.5, 1.5};
  const nlohmann::json j = JobResultJson(r);
  EXPECT_EQ(j["evaluated"], true);
  EXPECT_EQ(j["test_samples"], 10000);
  EXPECT_DOUBLE_EQ(j["student_top1"].get<double>(), 0.8125);
  EXPECT_FALSE(j.contains("teacher"));
  EXPECT_FALSE(j.contains("teacher_top1"));
  r.teacher = "vit:fm-teacher";
  EXPECT_DOUBLE_EQ(JobResultJson(r)["teacher_top1"].get<double>(), 0.5);
}

TEST(JobResultTest, WriteJobResultWritesTheJsonAndNamesAnUnwritablePath) {
  const std::string dir = testing::MakeTempDir("retort_job_result");
  const std::string path = dir + "/result.json";
  ASSERT_TRUE(WriteJobResult(path, Base()).ok());
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["job"], "fm");
  EXPECT_EQ(j["steps"], 120);
  const Status bad = WriteJobResult(dir + "/missing/dir/result.json", Base());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("missing/dir"), std::string::npos) << bad;
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace retort::worker
