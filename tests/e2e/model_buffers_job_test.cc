// End to end, a bring-your-own convolutional model with BatchNorm and dropout (a TorchScript
// file made by scripts/make_trainer_fixtures.py): trained by 2 workers under retort-run, its
// exported safetensors give PyTorch's logits when PyTorch loads them into the same module, and
// used as the teacher of a KD job it scores exactly the top-1 it had at the end of training
// (its running statistics travel with the weights).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "testing/subprocess.h"
#include "tests/trainer/python_fixture.h"
#include "trainer/data/fashion_mnist.h"
#include "trainer/models/model.h"
#include "trainer/safetensors.h"
#include "worker/job_setup.h"

namespace retort {
namespace {

using std::chrono::milliseconds;

nlohmann::json RunJob(const std::string& dir, const std::string& name, const std::string& spec) {
  const std::string job = dir + "/" + name + ".yaml";
  std::ofstream(job) << "name: " << name << "\n" << spec;
  const std::string out = dir + "/" + name;
  std::string log;
  const int rc = testing::RunCommand({testing::BinaryPath("tools/retort-run"), "--job=" + job,
                                      "--workers=2", "--output-dir=" + out},
                                     &log, milliseconds(300000));
  EXPECT_EQ(rc, 0) << log;
  auto text = ReadFileToString(out + "/result.json");
  EXPECT_TRUE(text.ok()) << text.status() << "\n" << log;
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

TEST(ModelBuffersJobTest, TrainedBatchNormStudentReloadsAsTheSameTeacher) {
  const std::string fixture = trainer::test::SharedFixture("batchnorm-fm");
  ASSERT_FALSE(fixture.empty()) << "cannot build the fixtures with " RETORT_PYTHON
                                   " (does it have torch? run scripts/setup)";
  const std::string dir = testing::MakeTempDir("retort_buffers_e2e");
  const std::string cnn = fixture + "/cnn.pt";

  const nlohmann::json trained = RunJob(dir, "train",
                                        "student: {torchscript_path: " + cnn +
                                            "}\n"
                                            "dataset: {kind: fashion-mnist, augment: false}\n"
                                            "global_batch: 64\n"
                                            "steps: 150\n"
                                            "optimizer: {lr: 0.003, warmup_steps: 10}\n"
                                            "threads_per_worker: 1\n"
                                            "evaluate: true\n");
  ASSERT_TRUE(trained.contains("student_top1")) << trained.dump();
  const double student_top1 = trained["student_top1"].get<double>();
  EXPECT_GT(student_top1, 0.6) << "150 steps should train the CNN well past chance";
  const std::string weights = trained["student_weights"].get<std::string>();

  // PyTorch loads the export strictly into the same module and gives the same eval logits.
  auto test_set = trainer::data::FashionMnistDataset::Load({.train = false});
  ASSERT_TRUE(test_set.ok()) << test_set.status();
  auto batches = worker::ReadEvalBatches(**test_set, 0, 64);
  ASSERT_TRUE(batches.ok()) << batches.status();
  const torch::Tensor images = (*batches)[0].images;
  ASSERT_TRUE(trainer::WriteSafetensors(dir + "/images.safetensors", {{"images", images}}).ok());
  ASSERT_EQ(trainer::test::RunFixtureScript("torchscript-forward " + cnn + " " + weights + " " +
                                            dir + "/images.safetensors " + dir +
                                            "/pytorch_logits.safetensors 2>/dev/null"),
            0);
  auto expected = trainer::ReadSafetensors(dir + "/pytorch_logits.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status();
  auto model = trainer::LoadTorchScriptModel(cnn);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(trainer::LoadModelSafetensors(**model, weights).ok());
  (*model)->SetTraining(false);
  torch::Tensor ours;
  {
    torch::NoGradGuard no_grad;
    ours = (*model)->Forward(images);
  }
  const double max_diff = (ours - (*expected)[0].second).abs().max().item<double>();
  EXPECT_LE(max_diff, 1e-5) << "retort vs PyTorch logits on the exported weights";
  for (const auto& [name, t] : (*model)->NamedBuffers())
    if (name == "bn1.num_batches_tracked")
      EXPECT_EQ(t.item<int64_t>(), 150) << "BatchNorm counted every training step once";

  // The export as the teacher of a distillation job: same top-1 on the same test split.
  const nlohmann::json distilled =
      RunJob(dir, "distil",
             "teacher: {torchscript_path: " + cnn + ", weights_path: " + weights +
                 "}\n"
                 "student: {torchscript_path: " +
                 cnn +
                 "}\n"
                 "dataset: {kind: fashion-mnist, augment: false}\n"
                 "global_batch: 64\n"
                 "steps: 10\n"
                 "optimizer: {lr: 0.003, warmup_steps: 2}\n"
                 "distillation: {temperature: 2.0, alpha: 0.5}\n"
                 "threads_per_worker: 1\n"
                 "evaluate: true\n");
  ASSERT_TRUE(distilled.contains("teacher_top1")) << distilled.dump();
  EXPECT_NEAR(distilled["teacher_top1"].get<double>(), student_top1, 0.005)
      << "the teacher must score what the student scored when it was exported";
  std::cout << "[ measured ] student top-1 after training " << student_top1
            << ", same weights as teacher " << distilled["teacher_top1"].get<double>()
            << ", max |retort - PyTorch| logit " << max_diff << "\n";
}

}  // namespace
}  // namespace retort
