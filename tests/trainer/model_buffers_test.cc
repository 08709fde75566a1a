// Model state is parameters and buffers: a TorchScript net with BatchNorm loads its running
// statistics from a PyTorch state_dict() saved as safetensors and then gives PyTorch's eval
// logits; a file missing a buffer, or holding a tensor the model lacks, is refused by name.
// Buffers pack into one blob (int64 num_batches_tracked included), the KD step leaves every
// rank with rank 0's buffers, and evaluation leaves each model in the mode it was in.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

#include "tests/trainer/python_fixture.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/kd_loss.h"
#include "trainer/kd_step.h"
#include "trainer/model_buffers.h"
#include "trainer/models/model.h"
#include "trainer/safetensors.h"
#include "trainer/shard_plan.h"
#include "trainer/testing/thread_shard_comm.h"

namespace retort::trainer {
namespace {

class ModelBuffersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::SharedFixture("batchnorm");
    ASSERT_FALSE(dir_.empty()) << "cannot build the BatchNorm fixtures with " RETORT_PYTHON
                                  " (does it have torch? run scripts/setup)";
  }
  std::unique_ptr<Model> Fresh() {
    auto model = LoadTorchScriptModel(dir_ + "/fresh.pt");
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(model).value() : nullptr;
  }
  std::string dir_;  // the shared fixture (read-only)
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

torch::Tensor Buffer(Model& model, const std::string& wanted) {
  for (auto& [name, t] : model.NamedBuffers())
    if (name == wanted) return t;
  ADD_FAILURE() << "no buffer " << wanted;
  return torch::zeros({1});
}

TEST_F(ModelBuffersTest, BlobRoundTripCarriesEveryBufferAndRefusesAnotherSize) {
  auto a = Fresh(), b = Fresh();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  {
    torch::NoGradGuard no_grad;
    Buffer(*a, "bn.running_mean").copy_(torch::arange(4, torch::kFloat) + 0.5);
    Buffer(*a, "bn.running_var").fill_(3.25);
    Buffer(*a, "bn.num_batches_tracked").fill_(int64_t{1} << 40);  // needs all 8 bytes
  }
  const torch::Tensor blob = PackModelBuffers(*a);
  // 4 + 4 floats and one int64: 10 words.
  EXPECT_EQ(blob.numel(), ModelBufferWords(*a));
  EXPECT_EQ(blob.numel(), 10);
  ASSERT_TRUE(UnpackModelBuffers(blob.data_ptr<float>(), blob.numel(), *b).ok());
  for (const char* name : {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"})
    EXPECT_TRUE(torch::equal(Buffer(*a, name), Buffer(*b, name))) << name;
  Status wrong = UnpackModelBuffers(blob.data_ptr<float>(), blob.numel() - 1, *b);
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument) << wrong;
}

TEST_F(ModelBuffersTest, EveryRankLeavesEachStepWithRankZerosBuffers) {
  at::set_num_threads(1);
  constexpr int kWorld = 2, kSteps = 3;
  auto group = std::make_shared<testing::ThreadShardGroup>(kWorld);
  std::vector<std::unique_ptr<testing::ThreadShardComm>> comms;
  std::vector<std::unique_ptr<KdStep>> steps;
  std::vector<Model*> students;
  for (int r = 0; r < kWorld; ++r) {
    comms.push_back(std::make_unique<testing::ThreadShardComm>(group, r));
    auto student = Fresh();
    ASSERT_NE(student, nullptr);
    students.push_back(student.get());
    KdStepOptions o;
    o.loss.alpha = 0;  // supervised: no teacher
    o.optimizer.lr = 1e-2;
    o.optimizer.total_steps = kSteps;
    o.optimizer.warmup_steps = 0;
    o.local_parallelism = 2;  // must fall back to one pass: BatchNorm updates are not parallel
    const ShardPlan plan = MakeEvenShardPlan(FlatParameterCount(*student), kWorld, 16);
    auto step = KdStep::Create(nullptr, std::move(student), comms.back().get(), plan, o);
    ASSERT_TRUE(step.ok()) << step.status();
    steps.push_back(std::move(step).value());
  }
  std::vector<torch::Tensor> rank0_means;
  test::RunRanks(kWorld, [&](int rank) {
    for (int s = 0; s < kSteps; ++s) {
      // Different data on each rank, so each rank's own statistics differ.
      Batch global = test::SyntheticBatch(16, 1, 8, 10, 500 + s, s * 16);
      Batch mine = test::Slice(global, {8, 8}, rank);
      mine.images = mine.images + 100.0 * rank;
      auto r = steps[rank]->Step(mine);
      ASSERT_TRUE(r.ok()) << r.status();
    }
  });
  for (const char* name : {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"})
    EXPECT_TRUE(torch::equal(Buffer(*students[0], name), Buffer(*students[1], name))) << name;
  EXPECT_EQ(Buffer(*students[0], "bn.num_batches_tracked").item<int64_t>(), kSteps)
      << "one forward per step: the slice ran as one pass";
  // Rank 0's statistics, not rank 1's: rank 1's inputs are shifted by 100, which would move its
  // own running means far from rank 0's (which stay near the conv biases).
  EXPECT_LT(Buffer(*students[1], "bn.running_mean").abs().max().item<double>(), 1.0);
}

TEST_F(ModelBuffersTest, TeacherStaysInEvalModeAndStudentInTrainModeAroundEvaluation) {
  auto teacher = Fresh(), student = Fresh();
  ASSERT_NE(teacher, nullptr);
  ASSERT_NE(student, nullptr);
  testing::ThreadShardComm comm(std::make_shared<testing::ThreadShardGroup>(1), 0);
  KdStepOptions o;
  o.optimizer.total_steps = 1;
  o.optimizer.warmup_steps = 0;
  const ShardPlan plan = MakeEvenShardPlan(FlatParameterCount(*student), 1, 16);
  auto step = KdStep::Create(std::move(teacher), std::move(student), &comm, plan, o);
  ASSERT_TRUE(step.ok()) << step.status();
  KdStep& kd = **step;
  EXPECT_FALSE(kd.teacher().IsTraining());
  EXPECT_TRUE(kd.student().IsTraining());
  std::vector<Batch> eval = {test::SyntheticBatch(8, 1, 8, 10, 3)};
  // Dropout is off in eval mode: two evaluations agree exactly.
  const int64_t first = EvaluateTop1(kd.student(), eval).correct;
  EXPECT_EQ(EvaluateTop1(kd.student(), eval).correct, first);
  EvaluateTop1(kd.teacher(), eval);
  EXPECT_FALSE(kd.teacher().IsTraining()) << "the teacher is never switched to train mode";
  EXPECT_TRUE(kd.student().IsTraining()) << "the student trains again after evaluation";
}

}  // namespace
}  // namespace retort::trainer
