// Pre-flight checks of job specs: missing local paths and image sizes the model cannot take are
// found before any worker starts, naming the field and the value.
#include "coordinator/job_preflight.h"

#include <gtest/gtest.h>

#include <fstream>

#include "coordinator/job_spec.h"
#include "testing/subprocess.h"

namespace retort::coordinator {
namespace {

v1::JobSpec Job(const std::string& yaml) {
  auto job = ParseJobSpec(yaml, "test.yaml");
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : v1::JobSpec();
}

std::string ImageFolderJob(const std::string& path, int image_size,
                           const std::string& student = "vit-ti16") {
  return "name: j\nstudent: {preset: " + student +
         "}\ndataset: {kind: image-folder, path: " + path +
         ", image_size: " + std::to_string(image_size) +
         ", num_classes: 10}\nglobal_batch: 8\nsteps: 1\n";
}

bool Mentions(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(JobPreflightTest, AcceptsAnExistingDatasetAndMatchingImageSize) {
  const std::string dir = testing::MakeTempDir("retort_preflight");
  EXPECT_TRUE(PreflightJob(Job(ImageFolderJob(dir, 224)), {}).ok());
}

TEST(JobPreflightTest, MissingDatasetPathIsNamed) {
  Status s = PreflightJob(Job(ImageFolderJob("/nonexistent/retort-dataset", 224)), {});
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(s, "dataset.path")) << s;
  EXPECT_TRUE(Mentions(s, "'/nonexistent/retort-dataset' does not exist")) << s;
  EXPECT_TRUE(Mentions(s, "--no-check-paths")) << s;
}

TEST(JobPreflightTest, NoCheckPathsSkipsPathsButNotShapes) {
  PreflightOptions no_paths;
  no_paths.check_paths = false;
  EXPECT_TRUE(PreflightJob(Job(ImageFolderJob("/nonexistent/retort-dataset", 224)), no_paths).ok());
  Status s = PreflightJob(Job(ImageFolderJob("/nonexistent/retort-dataset", 230)), no_paths);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
}

TEST(JobPreflightTest, DatasetPathThatIsAFileIsRefused) {
  const std::string file = testing::MakeTempDir("retort_preflight") + "/data.bin";
  std::ofstream(file) << "x";
  Status s = PreflightJob(Job(ImageFolderJob(file, 224)), {});
  EXPECT_TRUE(Mentions(s, "is not a directory")) << s;
}

TEST(JobPreflightTest, UrlsAreNotCheckedLocally) {
  EXPECT_TRUE(PreflightJob(Job(ImageFolderJob("s3://bucket/images", 224)), {}).ok());
}

TEST(JobPreflightTest, ImageSizeNotDivisibleByThePatchSizeIsNamed) {
  const std::string dir = testing::MakeTempDir("retort_preflight");
  Status s = PreflightJob(Job(ImageFolderJob(dir, 230)), {});
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(s,
                       "dataset.image_size: 230 is not divisible by the patch size 16 of "
                       "student.preset 'vit-ti16'"))
      << s;
}

TEST(JobPreflightTest, ImageSizeOtherThanThePresetsIsNamed) {
  const std::string dir = testing::MakeTempDir("retort_preflight");
  Status s = PreflightJob(Job(ImageFolderJob(dir, 32, "fm-student")), {});
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(s,
                       "dataset.image_size: 32 differs from the 28x28 input "
                       "student.preset 'fm-student' takes"))
      << s;
}

TEST(JobPreflightTest, TeacherIsCheckedToo) {
  v1::JobSpec job = Job(
      "name: j\nteacher: {preset: fm-teacher-p7}\nstudent: {preset: fm-student}\n"
      "dataset: {kind: synthetic, image_size: 32, num_classes: 10}\nglobal_batch: 8\nsteps: 1\n");
  auto problems = PreflightProblems(job, {});
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("teacher.preset 'fm-teacher-p7'"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("student.preset 'fm-student'"), std::string::npos) << problems[1];
}

TEST(JobPreflightTest, MissingWeightsAndDefaultFashionMnistDirAreChecked) {
  v1::JobSpec job = Job(
      "name: j\nstudent: {preset: fm-student, weights_path: /nonexistent/w.safetensors}\n"
      "dataset: {kind: synthetic, image_size: 28, num_classes: 10}\nglobal_batch: 8\nsteps: 1\n");
  Status s = PreflightJob(job, {});
  EXPECT_TRUE(Mentions(s, "student.weights_path: '/nonexistent/w.safetensors'")) << s;
}

TEST(JobPreflightTest, CheckpointDirThatCannotBeADirectoryIsNamed) {
  const std::string dir = testing::MakeTempDir("retort_preflight");
  std::ofstream(dir + "/a-file") << "x";
  const std::string base = ImageFolderJob(dir, 224);
  Status s = PreflightJob(Job(base + "checkpoint: {dir: " + dir + "/a-file/ckpt}\n"), {});
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(s, "checkpoint.dir")) << s;
  EXPECT_TRUE(Mentions(s, dir + "/a-file' is not one")) << s;
  // A directory to be created under a writable one, or an existing one, is fine.
  EXPECT_TRUE(PreflightJob(Job(base + "checkpoint: {dir: " + dir + "/new/ckpt}\n"), {}).ok());
  EXPECT_TRUE(PreflightJob(Job(base + "checkpoint: {dir: " + dir + "}\n"), {}).ok());
  // Not checked when the coordinator cannot see the workers' paths.
  PreflightOptions no_paths;
  no_paths.check_paths = false;
  EXPECT_TRUE(
      PreflightJob(Job(base + "checkpoint: {dir: " + dir + "/a-file/ckpt}\n"), no_paths).ok());
}

}  // namespace
}  // namespace retort::coordinator
