// TorchScript teacher and student from scripts/make_trainer_fixtures.py.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <iostream>
#include <map>

#include "common/file_util.h"

#include "tests/trainer/python_fixture.h"
#include "tests/trainer/trainer_test_util.h"
#include "trainer/safetensors.h"

namespace retort::trainer {
namespace {

class TorchScriptModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = test::SharedFixture("torchscript");
    ASSERT_FALSE(fixture_.empty()) << "cannot build the TorchScript fixtures with " RETORT_PYTHON
                                      " (does it have torch? run scripts/setup)";
    dir_ = test::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    auto io = ReadSafetensors(fixture_ + "/io.safetensors");
    ASSERT_TRUE(io.ok()) << io.status();
    for (auto& [name, t] : *io) io_[name] = t;
  }
  void TearDown() override { test::RemoveDir(dir_); }
  std::string fixture_;  // student.pt, teacher.pt, io.safetensors (shared, read-only)
  std::string dir_;      // this test's own files
  std::map<std::string, torch::Tensor> io_;
};

TEST_F(TorchScriptModelTest, ForwardMatchesPyTorchAndParametersKeepTheirNames) {
  auto student = BuildModel({.torchscript_path = fixture_ + "/student.pt"}, 0);
  auto teacher = BuildModel({.torchscript_path = fixture_ + "/teacher.pt"}, 0);
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

// Damaged TorchScript files (a job's teacher or student on a shared filesystem) are errors naming
// the file, never a crash of the worker: the real student archive cut at 48 places, with bytes
// flipped at 240 places chosen by a fixed-seed generator, and a few files that are no archive.
TEST_F(TorchScriptModelTest, DamagedFilesAreErrorsNamingTheFileNeverCrashes) {
  auto original = ReadFileToString(fixture_ + "/student.pt");
  ASSERT_TRUE(original.ok()) << original.status();
  const std::string& good = *original;
  ASSERT_GT(good.size(), 1000u);
  std::vector<std::pair<std::string, std::string>> mutants;  // (what, bytes)
  for (int i = 0; i < 48; ++i) {
    const size_t cut = good.size() * i / 48;
    mutants.emplace_back("cut at " + std::to_string(cut), good.substr(0, cut));
  }
  uint64_t state = 0x9E3779B97F4A7C15ull;  // a fixed sequence: the same mutants every run
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  for (int i = 0; i < 240; ++i) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(next() % 8);
    for (int f = 0; f < flips; ++f)
      bytes[next() % bytes.size()] ^= static_cast<char>(1 + next() % 255);
    mutants.emplace_back("flips #" + std::to_string(i), std::move(bytes));
  }
  mutants.emplace_back("zeros", std::string(good.size(), '\0'));
  mutants.emplace_back("text", "this is not a TorchScript archive\n");
  mutants.emplace_back("zip magic only", std::string("PK\x03\x04", 4));

  int refused = 0, loaded = 0;
  const std::string path = dir_ + "/damaged.pt";
  for (const auto& [what, bytes] : mutants) {
    ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
    auto model = LoadTorchScriptModel(path);
    if (model.ok()) {
      ++loaded;  // a flip in bytes nothing reads (padding, a comment in the code)
      continue;
    }
    ++refused;
    EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument)
        << what << ": " << model.status();
    EXPECT_NE(model.status().message().find("damaged.pt"), std::string::npos)
        << what << ": " << model.status();
  }
  // Every cut and every non-archive is refused (a zip's directory is at its end).
  for (const auto& [what, bytes] : mutants) {
    if (what.rfind("flips", 0) == 0) continue;
    ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
    EXPECT_FALSE(LoadTorchScriptModel(path).ok()) << what << " was accepted";
  }
  std::cout << "[ measured ] " << mutants.size() << " damaged TorchScript files: " << refused
            << " refused, " << loaded << " loaded (flips in bytes nothing reads)\n";
  EXPECT_GT(refused, 48);
}

TEST_F(TorchScriptModelTest, StudentTrainsThroughTheFlatBufferOnTwoRanks) {
  at::set_num_threads(1);
  auto group = std::make_shared<testing::ThreadShardGroup>(2);
  std::vector<std::unique_ptr<testing::ThreadShardComm>> comms;
  std::vector<std::unique_ptr<KdStep>> steps;
  for (int r = 0; r < 2; ++r) {
    comms.push_back(std::make_unique<testing::ThreadShardComm>(group, r));
    auto student = test::MustMake(LoadTorchScriptModel(fixture_ + "/student.pt"));
    auto teacher = test::MustMake(LoadTorchScriptModel(fixture_ + "/teacher.pt"));
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
