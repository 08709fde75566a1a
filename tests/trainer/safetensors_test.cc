#include "trainer/safetensors.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/file_util.h"
#include "tests/trainer/python_fixture.h"
#include "tests/trainer/trainer_test_util.h"

namespace retort::trainer {
namespace {

TEST(SafetensorsTest, RoundTripInCxxAndPreciseErrors) {
  const std::string dir = test::MakeTempDir();
  NamedTensors tensors = {{"a.weight", torch::randn({3, 4})},
                          {"b", torch::arange(5, torch::kLong)},
                          {"c", torch::randn({2}).to(torch::kBFloat16)},
                          {"scalar", torch::tensor(2.5f).reshape({})}};
  ASSERT_TRUE(WriteSafetensors(dir + "/t.safetensors", tensors, {{"k", "v\"q"}}).ok());
  auto contents = ReadFileToString(dir + "/t.safetensors");
  ASSERT_TRUE(contents.ok());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t((*contents)[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(contents->size(), 8 + n + 12 * 4 + 5 * 8 + 2 * 2 + 4);
  auto back = ReadSafetensors(dir + "/t.safetensors");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ((*back)[i].first, tensors[i].first);
    EXPECT_TRUE(torch::equal((*back)[i].second, tensors[i].second)) << tensors[i].first;
  }
  // Truncation is DATA_LOSS naming the file.
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/cut.safetensors", contents->substr(0, contents->size() - 3))
          .ok());
  auto cut = ReadSafetensors(dir + "/cut.safetensors");
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("outside the data section"), std::string::npos)
      << cut.status();
  EXPECT_EQ(
      WriteSafetensors(dir + "/d.safetensors", {{"x", torch::ones({1})}, {"x", torch::ones({1})}})
          .code(),
      StatusCode::kInvalidArgument);
  test::RemoveDir(dir);
}

TEST(SafetensorsTest, PresetSpecLoadsWeights) {
  const std::string dir = test::MakeTempDir();
  auto source = test::MustMake(MakeVitPreset("fm-student", 3));
  ASSERT_TRUE(ExportModelSafetensors(*source, dir + "/w.safetensors").ok());
  auto loaded = BuildModel({.preset = "fm-student", .weights_path = dir + "/w.safetensors"}, 99);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto a = source->NamedParameters(), b = (*loaded)->NamedParameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, b[i].second));
  auto missing = BuildModel({.preset = "fm-student", .weights_path = dir + "/none.safetensors"}, 0);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none.safetensors"), std::string::npos)
      << missing.status();
  test::RemoveDir(dir);
}

TEST(SafetensorsTest, ExportedStudentLoadsIntoPyTorchAndGivesTheSameLogits) {
  if (!test::PythonTorchAvailable()) FAIL() << RETORT_PYTHON " has no torch (run scripts/setup)";
  const std::string dir = test::MakeTempDir();
  VitConfig config = test::TinyVit(16, 2);
  auto model = test::MustMake(MakeVit(config, 21));
  {
    // Move the weights away from their initial values (norms and biases too).
    torch::NoGradGuard g;
    for (auto& [name, p] : model->NamedParameters()) p.add_(torch::randn_like(p) * 0.1);
  }
  ASSERT_TRUE(ExportModelSafetensors(*model, dir + "/student.safetensors").ok());
  auto images = torch::randn({5, 1, 8, 8});
  ASSERT_TRUE(WriteSafetensors(dir + "/in.safetensors", {{"images", images}}).ok());
  const std::string shape = "8,1,4,16,2,2,10";
  ASSERT_EQ(test::RunFixtureScript("vit-forward " + dir + "/student.safetensors " + dir +
                                   "/in.safetensors " + dir + "/out.safetensors " + shape),
            0);
  auto out = ReadSafetensors(dir + "/out.safetensors");
  ASSERT_TRUE(out.ok()) << out.status();
  model->SetTraining(false);
  torch::Tensor ours;
  {
    torch::NoGradGuard g;
    ours = model->Forward(images);
  }
  EXPECT_TRUE(torch::allclose((*out)[0].second, ours, 1e-5, 1e-5)) << (*out)[0].second << "\n"
                                                                   << ours;
  // The training path (autograd on, plain attention) computes the same function.
  model->SetTraining(true);
  auto trained_path = model->Forward(images).detach();
  EXPECT_TRUE(torch::allclose((*out)[0].second, trained_path, 1e-5, 1e-5));
  // And the file loads back into a fresh model.
  auto fresh = test::MustMake(MakeVit(config, 1));
  ASSERT_TRUE(LoadModelSafetensors(*fresh, dir + "/student.safetensors").ok());
  EXPECT_TRUE(torch::equal(fresh->NamedParameters()[2].second, model->NamedParameters()[2].second));
  // A preset spec with weights: the fm-student preset does not fit these tiny weights.
  auto wrong =
      BuildModel({.preset = "fm-student", .weights_path = dir + "/student.safetensors"}, 0);
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument) << wrong.status();
  auto other = test::MustMake(MakeVit(test::TinyVit(24, 2), 1));
  EXPECT_EQ(LoadModelSafetensors(*other, dir + "/student.safetensors").code(),
            StatusCode::kInvalidArgument);
  test::RemoveDir(dir);
}

}  // namespace
}  // namespace retort::trainer
