// Model state is parameters and buffers: a TorchScript net with BatchNorm loads its running
// statistics from a PyTorch state_dict() saved as safetensors and then gives PyTorch's eval
// logits; a file missing a buffer, or holding a tensor the model lacks, is refused by name.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

#include "tests/trainer/python_fixture.h"
#include "trainer/models/model.h"
#include "trainer/safetensors.h"

namespace retort::trainer {
namespace {

class ModelBuffersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::PythonTorchAvailable()) FAIL() << RETORT_PYTHON " has no torch (run scripts/setup)";
    dir_ = test::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    ASSERT_EQ(test::RunFixtureScript("batchnorm " + dir_ + " 2>/dev/null"), 0);
  }
  void TearDown() override { test::RemoveDir(dir_); }
  std::unique_ptr<Model> Fresh() {
    auto model = LoadTorchScriptModel(dir_ + "/fresh.pt");
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(model).value() : nullptr;
  }
  std::string dir_;
};

TEST_F(ModelBuffersTest, StateDictWithBatchNormStatisticsGivesPyTorchsEvalLogits) {
  auto model = Fresh();
  ASSERT_NE(model, nullptr);
  std::vector<std::string> buffers;
  for (const auto& [name, t] : model->NamedBuffers()) buffers.push_back(name);
  EXPECT_NE(std::find(buffers.begin(), buffers.end(), "bn.running_var"), buffers.end());

  ASSERT_TRUE(LoadModelSafetensors(*model, dir_ + "/state.safetensors").ok());
  auto io = ReadSafetensors(dir_ + "/io.safetensors");
  ASSERT_TRUE(io.ok()) << io.status();
  model->SetTraining(false);
  torch::NoGradGuard no_grad;
  const auto ours = model->Forward((*io)[0].second);
  const auto& expected = (*io)[1].second;
  EXPECT_TRUE(torch::allclose(ours, expected, 1e-5, 1e-5))
      << "max |ours - PyTorch| = " << (ours - expected).abs().max().item<double>();
  for (const auto& [name, t] : model->NamedBuffers())
    if (name == "bn.num_batches_tracked") EXPECT_EQ(t.item<int64_t>(), 20);
}

TEST_F(ModelBuffersTest, MissingOrExtraTensorsAreRefusedByNameUnlessPartialIsAllowed) {
  auto model = Fresh();
  ASSERT_NE(model, nullptr);
  Status missing = LoadModelSafetensors(*model, dir_ + "/missing_buffer.safetensors");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing;
  EXPECT_NE(missing.message().find("'bn.running_var'"), std::string::npos) << missing;
  Status extra = LoadModelSafetensors(*model, dir_ + "/extra_tensor.safetensors");
  EXPECT_EQ(extra.code(), StatusCode::kInvalidArgument) << extra;
  EXPECT_NE(extra.message().find("'bn.surplus'"), std::string::npos) << extra;

  EXPECT_TRUE(
      LoadModelSafetensors(*model, dir_ + "/missing_buffer.safetensors", {.allow_partial = true})
          .ok());
  EXPECT_TRUE(
      LoadModelSafetensors(*model, dir_ + "/extra_tensor.safetensors", {.allow_partial = true})
          .ok());
}

}  // namespace
}  // namespace retort::trainer
