// TorchScript teacher and student from scripts/make_trainer_fixtures.py.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "tests/trainer/python_fixture.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/safetensors.h"

namespace retort::trainer {
namespace {

class TorchScriptModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::PythonTorchAvailable())
      FAIL() << RETORT_PYTHON
          " has no torch: cannot build TorchScript fixtures (run scripts/setup)";
    dir_ = test::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    ASSERT_EQ(test::RunFixtureScript("torchscript " + dir_), 0);
    auto io = ReadSafetensors(dir_ + "/io.safetensors");
    ASSERT_TRUE(io.ok()) << io.status();
    for (auto& [name, t] : *io) io_[name] = t;
  }
  void TearDown() override { test::RemoveDir(dir_); }
  std::string dir_;
  std::map<std::string, torch::Tensor> io_;
};

TEST_F(TorchScriptModelTest, ForwardMatchesPyTorchAndParametersKeepTheirNames) {
  auto student = BuildModel({.torchscript_path = dir_ + "/student.pt"}, 0);
  auto teacher = BuildModel({.torchscript_path = dir_ + "/teacher.pt"}, 0);
  ASSERT_TRUE(student.ok()) << student.status();
  ASSERT_TRUE(teacher.ok()) << teacher.status();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(
      torch::allclose((*student)->Forward(io_["images"]), io_["student_logits"], 1e-5, 1e-6));
  EXPECT_TRUE(
      torch::allclose((*teacher)->Forward(io_["images"]), io_["teacher_logits"], 1e-5, 1e-6));
  std::vector<std::string> names;
  for (auto& [name, p] : (*student)->NamedParameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv.weight", "conv.bias", "fc.weight", "fc.bias"}));
  auto missing = LoadTorchScriptModel(dir_ + "/nope.pt");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("nope.pt"), std::string::npos);
}

TEST_F(TorchScriptModelTest, StudentTrainsThroughTheFlatBufferOnTwoRanks) {
  at::set_num_threads(1);
  auto group = std::make_shared<testing::ThreadShardGroup>(2);
  std::vector<std::unique_ptr<testing::ThreadShardComm>> comms;
  std::vector<std::unique_ptr<KdStep>> steps;
  for (int r = 0; r < 2; ++r) {
    comms.push_back(std::make_unique<testing::ThreadShardComm>(group, r));
    auto student = test::MustMake(LoadTorchScriptModel(dir_ + "/student.pt"));
    auto teacher = test::MustMake(LoadTorchScriptModel(dir_ + "/teacher.pt"));
    KdStepOptions o;
    o.optimizer.lr = 1e-2;
    o.bucket_elements = 200;
    const int64_t n = FlatParameterCount(*student);
    auto step = KdStep::Create(std::move(teacher), std::move(student), comms.back().get(),
                               MakeEvenShardPlan(n, 2), o);
    ASSERT_TRUE(step.ok()) << step.status();
    steps.push_back(std::move(step).value());
  }
  EXPECT_TRUE(steps[0]->flat().AllViewsAttached());
  Batch global = test::SyntheticBatch(16, 1, 8, 10, 4);
  std::vector<double> losses;
  test::RunRanks(2, [&](int rank) {
    Batch mine = test::Slice(global, {8, 8}, rank);
    for (int s = 0; s < 15; ++s) {
      auto r = steps[rank]->Step(mine);
      ASSERT_TRUE(r.ok()) << r.status();
      if (rank == 0) losses.push_back(r->loss);
    }
  });
  ASSERT_EQ(losses.size(), 15u);
  EXPECT_LT(losses.back(), 0.8 * losses.front());
  EXPECT_TRUE(torch::equal(steps[0]->flat().params(), steps[1]->flat().params()));
  // The module itself sees the trained weights.
  torch::NoGradGuard no_grad;
  auto out = steps[0]->student().Forward(io_["images"]);
  EXPECT_FALSE(torch::allclose(out, io_["student_logits"], 1e-3, 1e-3));
}

}  // namespace
}  // namespace retort::trainer
