#include "coordinator/job_spec.h"

#include <gtest/gtest.h>

namespace retort::coordinator {
namespace {

constexpr const char* kValid = R"(
name: "fm-kd"
teacher: {preset: fm-teacher}
student:
  preset: fm-student
dataset: {kind: fashion-mnist, augment: true}
global_batch: 128
steps: 500
optimizer: {lr: 0.002, weight_decay: 0.05, warmup_steps: 50, clip_grad_norm: 1.0}
distillation: {temperature: 4, alpha: 0.7}
elastic: {min_workers: 2, max_workers: 4}
)";

TEST(JobSpecTest, ParsesYamlAndAppliesDefaults) {
  auto spec = ParseJobSpec(kValid, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "fm-kd");
  EXPECT_EQ(spec->student().preset(), "fm-student");
  EXPECT_TRUE(spec->dataset().augment());
  EXPECT_EQ(spec->dataset().path(), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(spec->steps(), 500);
  EXPECT_DOUBLE_EQ(spec->optimizer().lr(), 0.002);
  EXPECT_DOUBLE_EQ(spec->optimizer().beta2(), 0.999);
  EXPECT_DOUBLE_EQ(spec->distillation().alpha(), 0.7);
  EXPECT_EQ(spec->elastic().max_workers(), 4);
  EXPECT_EQ(spec->precision(), "float32");
}

TEST(JobSpecTest, ParsesJson) {
  auto spec =
      ParseJobSpec(R"({"teacher": {"preset": "fm-teacher"}, "student": {"preset": "fm-student"},
                               "epochs": 2, "global_batch": 64})",
                   "job.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->epochs(), 2);
  EXPECT_EQ(spec->global_batch(), 64);
}

void ExpectError(const std::string& text, const std::string& fragment) {
  auto spec = ParseJobSpec(text, "bad.yaml");
  ASSERT_FALSE(spec.ok()) << "accepted: " << text;
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(fragment), std::string::npos)
      << "message '" << spec.status().message() << "' lacks '" << fragment << "'";
  EXPECT_NE(spec.status().message().find("bad.yaml"), std::string::npos);
}

TEST(JobSpecTest, MalformedSpecsGetPreciseErrors) {
  const std::string models = "teacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n";
  ExpectError("teacher: [unclosed", "not valid YAML");
  ExpectError("- a\n- b\n", "must be a mapping");
  ExpectError(models + "stpes: 10\n", "stpes");
  ExpectError(models + "global_batch: many\n", "global_batch");
  ExpectError(models + "global_batch: -1\n", "global_batch");
  ExpectError(models + "steps: 10\nepochs: 2\n", "exactly one of steps or epochs");
  ExpectError(models + "optimizer: {lr: -1}\n", "optimizer.lr");
  ExpectError(models + "distillation: {alpha: 1.5}\n", "distillation.alpha");
  ExpectError(models + "elastic: {min_workers: 4, max_workers: 2}\n", "elastic.max_workers");
  ExpectError("teacher: {preset: vit-huge}\nstudent: {preset: fm-student}\n",
              "unknown preset 'vit-huge'");
  ExpectError(
      "teacher: {preset: fm-teacher, torchscript_path: /x.pt}\nstudent: {preset: fm-student}\n",
      "exactly one of preset or torchscript_path");
  ExpectError(models + "dataset: {kind: imagenet}\n", "dataset.kind");
  ExpectError(models + "precision: fp8\n", "precision");
}

TEST(JobSpecTest, NoTeacherMeansSupervisedAndAlphaDefaultsFollow) {
  auto supervised = ParseJobSpec("student: {preset: fm-teacher}\nsteps: 10\n", "t.yaml");
  ASSERT_TRUE(supervised.ok()) << supervised.status();
  EXPECT_DOUBLE_EQ(supervised->distillation().alpha(), 0.0);
  auto kd =
      ParseJobSpec("teacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n", "k.yaml");
  ASSERT_TRUE(kd.ok());
  EXPECT_DOUBLE_EQ(kd->distillation().alpha(), 0.5);
  auto explicit_zero = ParseJobSpec(
      "teacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\ndistillation: {alpha: 0}\n",
      "z.yaml");
  ASSERT_TRUE(explicit_zero.ok());
  EXPECT_DOUBLE_EQ(explicit_zero->distillation().alpha(), 0.0);
  ExpectError("student: {preset: fm-student}\ndistillation: {alpha: 0.5}\n",
              "must be 0 without a teacher");
}

TEST(JobSpecTest, QuotedNumbersStayStrings) {
  auto spec = ParseJobSpec(
      "name: \"123\"\nteacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n", "j");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "123");
}

}  // namespace
}  // namespace retort::coordinator
