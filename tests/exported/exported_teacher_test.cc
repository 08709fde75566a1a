// Exported (AOTInductor) teachers in C++: a torchvision ResNet-18 exported on the CPU gives
// PyTorch eager's logits within 1e-4 at two batch sizes, and every package the worker must
// refuse is refused before training with an error naming the file and what is wrong.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "tests/trainer/python_fixture.h"
#include "trainer/data/fashion_mnist.h"
#include "trainer/models/aoti_model.h"
#include "trainer/safetensors.h"
#include "worker/exported_teacher.h"
#include "worker/job_setup.h"

namespace retort::worker {
namespace {

namespace fs = std::filesystem;

class ExportedTeacherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fixture_ = new std::string(trainer::test::AotiFixture());
    auto test = trainer::data::FashionMnistDataset::Load({.train = false});
    if (test.ok()) test_ = std::move(test).value().release();
  }
  static void TearDownTestSuite() {
    delete fixture_;
    delete test_;
  }
  void SetUp() override {
    ASSERT_FALSE(fixture_->empty())
        << "cannot build the exported-teacher fixtures with " RETORT_PYTHON
           " (does it have torch? run scripts/setup)";
    ASSERT_NE(test_, nullptr) << "Fashion-MNIST test split not found";
    job_.set_evaluate(true);
    job_.mutable_dataset()->set_kind("fashion-mnist");
  }
  void TearDown() override { trainer::test::RemoveDir(tmp_); }

  std::string Package(const std::string& name) const { return *fixture_ + "/" + name; }
  // A copy of fixture package `name` (and its sidecar) in a folder of the test's own, with the
  // sidecar edited by `edit`; returns the copy's path.
  std::string Copy(const std::string& name, void (*edit)(nlohmann::json&) = nullptr) {
    if (tmp_.empty()) tmp_ = trainer::test::MakeTempDir();
    const std::string dst = tmp_ + "/" + name;
    fs::copy_file(Package(name), dst, fs::copy_options::overwrite_existing);
    auto j = nlohmann::json::parse(*ReadFileToString(Package(name) + ".json"));
    if (edit) edit(j);
    std::ofstream(dst + ".json") << j.dump();
    return dst;
  }
  Status Load(const std::string& package, const std::string& device = "cpu") {
    job_.mutable_teacher()->set_exported_path(package);
    auto model = LoadExportedTeacher(job_, device, *test_);
    if (model.ok()) teacher_ = std::move(model).value();
    return model.status();
  }

  static std::string* fixture_;
  static trainer::data::FashionMnistDataset* test_;
  std::string tmp_;
  v1::JobSpec job_;
  std::unique_ptr<trainer::Model> teacher_;
};
std::string* ExportedTeacherTest::fixture_ = nullptr;
trainer::data::FashionMnistDataset* ExportedTeacherTest::test_ = nullptr;

// `status` has `want` as its code and names `file` and `fragment` in its message.
#define EXPECT_REFUSED(status, want, fragment, file)                                  \
  do {                                                                                \
    const Status s_ = (status);                                                       \
    EXPECT_EQ(s_.code(), want) << s_;                                                 \
    EXPECT_NE(s_.message().find(fragment), std::string::npos) << s_;                  \
    EXPECT_NE(s_.message().find(file), std::string::npos) << "names no file: " << s_; \
  } while (0)

TEST_F(ExportedTeacherTest, ResNet18LogitsEqualPyTorchEagerAtTwoBatchSizes) {
  auto model = trainer::LoadExportedModel(Package("resnet18.pt2"), torch::Device("cpu"));
  ASSERT_TRUE(model.ok()) << model.status();
  auto io = trainer::ReadSafetensors(Package("resnet18_io.safetensors"));
  ASSERT_TRUE(io.ok()) << io.status();
  torch::Tensor images, expected;
  for (auto& [name, t] : *io) (name == "images" ? images : expected) = t;
  ASSERT_EQ(images.size(0), 64);
  // 64 and 16 as compiled; 1 runs as a batch of two (the package's dimension starts at 2).
  for (int64_t batch : {64, 16, 1}) {
    torch::InferenceMode inference;
    std::vector<torch::Tensor> parts;
    for (int64_t i = 0; i < 64; i += batch)
      parts.push_back((*model)->Forward(images.narrow(0, i, batch)));
    const torch::Tensor logits = torch::cat(parts);
    ASSERT_EQ(logits.sizes(), expected.sizes());
    const double diff = (logits - expected).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << "batch " << batch;
  }
}

TEST_F(ExportedTeacherTest, TrainedTeacherLoadsAndPassesTheTeacherCheck) {
  ASSERT_TRUE(Load(Package("fm_teacher.pt2")).ok());
  EXPECT_EQ(teacher_->Describe(), "exported:" + Package("fm_teacher.pt2"));
  EXPECT_TRUE(CheckTeacherBeatsChance(job_, *teacher_, *test_).ok());
}

TEST_F(ExportedTeacherTest, TeacherAtChanceIsRefusedNamingThePackage) {
  ASSERT_TRUE(Load(Package("fm_untrained.pt2")).ok());
  EXPECT_REFUSED(CheckTeacherBeatsChance(job_, *teacher_, *test_), StatusCode::kFailedPrecondition,
                 "chance level", "fm_untrained.pt2");
}

TEST_F(ExportedTeacherTest, FixedBatchDimensionIsRefused) {
  EXPECT_REFUSED(Load(Package("fm_fixed_batch.pt2")), StatusCode::kFailedPrecondition,
                 "fixed batch dimension", "fm_fixed_batch.pt2");
}

TEST_F(ExportedTeacherTest, OutputOtherThanBatchByClassesIsRefused) {
  EXPECT_REFUSED(Load(Package("fm_bad_output.pt2")), StatusCode::kFailedPrecondition,
                 "float logits [batch, num_classes]", "fm_bad_output.pt2");
}

TEST_F(ExportedTeacherTest, CpuPackageOnAGpuWorkerIsRefused) {
  EXPECT_REFUSED(Load(Package("fm_untrained.pt2"), "cuda:0"), StatusCode::kFailedPrecondition,
                 "compiled for cpu but this worker trains on cuda:0", "fm_untrained.pt2");
}

TEST_F(ExportedTeacherTest, GpuPackageOnACpuWorkerIsRefused) {
  EXPECT_REFUSED(Load(Package("fm_cuda_kind.pt2")), StatusCode::kFailedPrecondition,
                 "compiled for cuda but this worker trains on cpu", "fm_cuda_kind.pt2");
}

TEST_F(ExportedTeacherTest, PackageFromAnotherPyTorchReleaseIsRefused) {
  const std::string package =
      Copy("fm_untrained.pt2", [](nlohmann::json& j) { j["torch_version"] = "2.3.1+cpu"; });
  EXPECT_REFUSED(Load(package), StatusCode::kFailedPrecondition, "built by PyTorch 2.3.1", package);
}

TEST_F(ExportedTeacherTest, CorruptOrTruncatedPackageIsRefused) {
  const std::string package = Copy("fm_untrained.pt2");
  fs::resize_file(package, fs::file_size(package) / 2);
  EXPECT_REFUSED(Load(package), StatusCode::kInvalidArgument, "not a readable AOTInductor package",
                 package);
  std::ofstream(package, std::ios::trunc) << "not a zip archive";
  EXPECT_REFUSED(Load(package), StatusCode::kInvalidArgument, "not a readable AOTInductor package",
                 package);
}

TEST_F(ExportedTeacherTest, MissingOrForeignSidecarIsRefused) {
  const std::string package = Copy("fm_untrained.pt2");
  fs::remove(package + ".json");
  EXPECT_REFUSED(Load(package), StatusCode::kInvalidArgument, "no readable sidecar", package);
  std::ofstream(package + ".json") << R"({"format": "other/2"})";
  EXPECT_REFUSED(Load(package), StatusCode::kInvalidArgument, "format", package);
}

TEST_F(ExportedTeacherTest, SidecarThatDisagreesWithTheDatasetIsRefused) {
  EXPECT_REFUSED(Load(Package("resnet18.pt2")), StatusCode::kFailedPrecondition,
                 "takes input [3, 64, 64] but the dataset's samples are [1, 28, 28]",
                 "resnet18.pt2");
  const std::string classes =
      Copy("fm_untrained.pt2", [](nlohmann::json& j) { j["num_classes"] = 5; });
  EXPECT_REFUSED(Load(classes), StatusCode::kFailedPrecondition, "has 5 classes", classes);
  const std::string norm = Copy("fm_untrained.pt2", [](nlohmann::json& j) {
    j["normalization"] = {{"mean", {0.485}}, {"std", {0.229}}};
  });
  EXPECT_REFUSED(Load(norm), StatusCode::kFailedPrecondition, "expects inputs normalised", norm);
}

}  // namespace
}  // namespace retort::worker
