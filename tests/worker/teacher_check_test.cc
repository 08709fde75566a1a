// The start-up guard against a silently broken teacher: a teacher loaded from weights_path at
// chance level on the first test samples is refused (FAILED_PRECONDITION naming the file),
// unless distillation.allow_untrained_teacher; jobs without weights or evaluation skip it.
#include <gtest/gtest.h>

#include "tests/trainer/python_fixture.h"
#include "trainer/data/fashion_mnist.h"
#include "worker/job_setup.h"

namespace retort::worker {
namespace {

class TeacherCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = trainer::test::SharedFixture("batchnorm-fm");
    ASSERT_FALSE(dir_.empty()) << "cannot build the fixtures with " RETORT_PYTHON
                                  " (does it have torch? run scripts/setup)";
    auto test = trainer::data::FashionMnistDataset::Load({.train = false});
    ASSERT_TRUE(test.ok()) << test.status();
    test_ = std::move(test).value();
    job_.set_evaluate(true);
    job_.mutable_teacher()->set_torchscript_path(dir_ + "/cnn.pt");
    job_.mutable_teacher()->set_weights_path(dir_ + "/untrained.safetensors");
    auto teacher = BuildModel(job_.teacher(), 1);
    ASSERT_TRUE(teacher.ok()) << teacher.status();
    teacher_ = std::move(teacher).value();
  }
  std::string dir_;  // the shared fixture (read-only)
  v1::JobSpec job_;
  std::unique_ptr<trainer::data::FashionMnistDataset> test_;
  std::unique_ptr<trainer::Model> teacher_;
};

TEST_F(TeacherCheckTest, TeacherAtChanceIsRefusedNamingTheFile) {
  Status s = CheckTeacherBeatsChance(job_, *teacher_, *test_);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("untrained.safetensors"), std::string::npos) << s;
  EXPECT_NE(s.message().find("chance level"), std::string::npos) << s;
  EXPECT_NE(s.message().find("allow_untrained_teacher"), std::string::npos) << s;
}

TEST_F(TeacherCheckTest, OverrideOrNoEvaluationOrNoWeightsLetTheJobStart) {
  v1::JobSpec allowed = job_;
  allowed.mutable_distillation()->set_allow_untrained_teacher(true);
  EXPECT_TRUE(CheckTeacherBeatsChance(allowed, *teacher_, *test_).ok());
  v1::JobSpec no_eval = job_;
  no_eval.set_evaluate(false);
  EXPECT_TRUE(CheckTeacherBeatsChance(no_eval, *teacher_, *test_).ok());
  v1::JobSpec no_weights = job_;
  no_weights.mutable_teacher()->clear_weights_path();
  EXPECT_TRUE(CheckTeacherBeatsChance(no_weights, *teacher_, *test_).ok());
}

}  // namespace
}  // namespace retort::worker
