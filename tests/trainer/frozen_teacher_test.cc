// The frozen teacher's bf16 path (trainer/frozen_teacher.h), driven on the CPU: the built-in
// ViTs and a BatchNorm network run in pure bf16 (every floating-point weight and buffer cast,
// nothing left in fp32 that would need autocast to reconcile), give the fp32 teacher's logits
// within bf16's precision, and come back as fp32 tensors a loss can save for backward.
#include "trainer/frozen_teacher.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "tests/trainer/python_fixture.h"
#include "trainer/models/model.h"

namespace retort::trainer {
namespace {

// Checks the prepared teacher and its bf16 forward against an fp32 copy of it.
void ExpectPureBf16MatchesFp32(const models::ModelSpec& spec, const torch::Tensor& images) {
  auto bf16 = BuildModel(spec, 7);
  auto fp32 = BuildModel(spec, 7);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  PrepareFrozenTeacher(**bf16, /*bf16=*/true);
  PrepareFrozenTeacher(**fp32, /*bf16=*/false);
  EXPECT_FALSE((*bf16)->IsTraining());
  for (auto& [name, p] : (*bf16)->NamedParameters()) {
    EXPECT_EQ(p.scalar_type(), torch::kBFloat16) << name;
    EXPECT_FALSE(p.requires_grad()) << name;
  }
  for (auto& [name, b] : (*bf16)->NamedBuffers())
    if (b.is_floating_point()) EXPECT_EQ(b.scalar_type(), torch::kBFloat16) << name;
  for (auto& [name, p] : (*fp32)->NamedParameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat);

  const torch::Tensor low = FrozenTeacherForward(**bf16, images, /*bf16=*/true);
  const torch::Tensor full = FrozenTeacherForward(**fp32, images, /*bf16=*/false);
  EXPECT_EQ(low.scalar_type(), torch::kFloat);
  EXPECT_FALSE(low.is_inference()) << "a loss could not save it for backward";
  ASSERT_EQ(low.sizes(), full.sizes());
  // bf16 keeps 8 bits of mantissa: logits within a few percent of their spread, not equal.
  const double spread = (full.max() - full.min()).item<double>();
  const double worst = (low - full).abs().max().item<double>();
  EXPECT_LT(worst, 0.05 * spread) << spec.preset << spec.torchscript_path;
  EXPECT_GT(worst, 0.0)
      << "the bf16 teacher computed exactly the fp32 logits: it did not run in bf16";
}

TEST(FrozenTeacherTest, BuiltInVitsRunInPureBf16WithinItsPrecisionOfFp32) {
  torch::manual_seed(3);
  const torch::Tensor images = torch::randn({6, 1, 28, 28});
  ExpectPureBf16MatchesFp32({.preset = "fm-teacher-p7"}, images);
  ExpectPureBf16MatchesFp32({.preset = "fm-student"}, images);
}

TEST(FrozenTeacherTest, ATorchScriptTeacherWithBatchNormBuffersRunsInPureBf16) {
  const std::string dir = test::SharedFixture("batchnorm");
  ASSERT_FALSE(dir.empty()) << "cannot build the BatchNorm fixture with " RETORT_PYTHON;
  torch::manual_seed(4);
  ExpectPureBf16MatchesFp32({.torchscript_path = dir + "/fresh.pt"},
                            torch::randn({5, 1, 8, 8}) * 3);
}

TEST(FrozenTeacherTest, Fp32TeacherIsFrozenAndUnchangedByItsForward) {
  auto teacher = BuildModel({.preset = "fm-teacher-p7"}, 1);
  ASSERT_TRUE(teacher.ok()) << teacher.status();
  PrepareFrozenTeacher(**teacher, /*bf16=*/false);
  const torch::Tensor images = torch::randn({4, 1, 28, 28});
  const torch::Tensor a = FrozenTeacherForward(**teacher, images, false);
  const torch::Tensor b = FrozenTeacherForward(**teacher, images, false);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(a.requires_grad());
}

}  // namespace
}  // namespace retort::trainer
