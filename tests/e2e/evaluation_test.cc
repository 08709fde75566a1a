// End to end: evaluation during training (the spec's `evaluation`) through retort-run. Every
// due step writes a line to evaluations.jsonl with the test split shared among the workers,
// export_best keeps the best weights, and evaluating changes nothing in the loss curve.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "testing/subprocess.h"

namespace retort {
namespace {

using std::chrono::milliseconds;

constexpr int kSteps = 30;

struct JobRun {
  std::vector<double> losses;
  std::vector<nlohmann::json> evaluations;
  std::string out;
};

JobRun RunJob(const std::string& dir, const std::string& name, int workers,
              const std::string& evaluation) {
  const std::string spec = dir + "/" + name + ".yaml";
  std::ofstream(spec) << "name: evaluation\n"
                         "teacher: {preset: fm-teacher-p7}\n"
                         "student: {preset: fm-student-p7}\n"
                         "dataset: {kind: fashion-mnist, augment: true}\n"
                         "global_batch: 64\n"
                         "steps: "
                      << kSteps
                      << "\n"
                         "optimizer: {lr: 0.002, warmup_steps: 5}\n"
                         "threads_per_worker: 1\n"
                         "evaluate: false\n"
                      << evaluation;
  JobRun run;
  run.out = dir + "/" + name;
  std::string log;
  const int rc =
      testing::RunCommand({testing::BinaryPath("tools/retort-run"), "--job=" + spec,
                           "--workers=" + std::to_string(workers), "--output-dir=" + run.out},
                          &log, milliseconds(240000));
  EXPECT_EQ(rc, 0) << log;
  std::ifstream metrics(run.out + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);)
    run.losses.push_back(nlohmann::json::parse(line).at("loss").get<double>());
  std::ifstream evaluations(run.out + "/evaluations.jsonl");
  for (std::string line; std::getline(evaluations, line);)
    run.evaluations.push_back(nlohmann::json::parse(line));
  return run;
}

TEST(EvaluationDuringTrainingTest, EveryDueStepIsEvaluatedOnTheSharedSplitAndTheCurveIsUntouched) {
  const std::string dir = testing::MakeTempDir("retort_e2e_eval");
  const std::string evaluation =
      "evaluation: {every_steps: 10, max_samples: 2000, export_best: true}\n";
  JobRun two = RunJob(dir, "two", 2, evaluation);
  ASSERT_EQ(two.evaluations.size(), 3u);
  double best = -1;
  for (size_t i = 0; i < two.evaluations.size(); ++i) {
    const auto& e = two.evaluations[i];
    EXPECT_EQ(e.at("step").get<int64_t>(), 10 * static_cast<int64_t>(i + 1));
    EXPECT_EQ(e.at("samples").get<int64_t>(), 2000);
    EXPECT_EQ(e.at("world_size").get<int>(), 2);
    const double top1 = e.at("top1").get<double>(), top5 = e.at("top5").get<double>();
    EXPECT_GE(top5, top1);
    EXPECT_LE(top5, 1.0);
    best = std::max(best, top1);
  }
  // Ten classes: chance is 0.1; 30 KD steps take the student past twice that.
  EXPECT_GT(two.evaluations.back().at("top1").get<double>(), 0.2);
  // The best weights and their record.
  EXPECT_TRUE(std::filesystem::exists(two.out + "/best/student.safetensors"));
  auto record = ReadFileToString(two.out + "/best/evaluation.json");
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(*record).at("top1").get<double>(), best);

  // Evaluating does not change training: the same job without it has the same losses, bit for
  // bit; and one worker evaluating the whole split agrees with two evaluating halves.
  JobRun plain = RunJob(dir, "plain", 2, "");
  EXPECT_TRUE(plain.evaluations.empty());
  EXPECT_EQ(plain.losses, two.losses);
  JobRun one = RunJob(dir, "one", 1, evaluation);
  ASSERT_EQ(one.evaluations.size(), two.evaluations.size());
  for (size_t i = 0; i < one.evaluations.size(); ++i)
    EXPECT_NEAR(one.evaluations[i].at("top1").get<double>(),
                two.evaluations[i].at("top1").get<double>(), 2.0 / 2000)
        << "evaluation " << i;
}

}  // namespace
}  // namespace retort
