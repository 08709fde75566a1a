#include "trainer/data/image_folder_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/trainer/data_test_util.h"
#include "trainer/data/image_codec.h"
#include "trainer/data/image_folder.h"

namespace retort::trainer::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

// A real (tiny) JPEG so that the resolved folders also open as datasets.
std::string TinyJpeg() {
  std::vector<uint8_t> rgb(8 * 8 * 3, 120);
  auto encoded = EncodeJpeg(rgb.data(), 8, 8, 3, 90);
  EXPECT_TRUE(encoded.ok()) << encoded.status();
  return encoded.ok() ? *encoded : std::string();
}

void AddImages(const TempDir& dir, const std::string& class_dir, int count) {
  for (int i = 0; i < count; ++i)
    WriteFile(dir.Sub(class_dir + "/" + std::to_string(i) + ".jpg"), TinyJpeg());
}

void ExpectMessageHas(const Status& status, const std::vector<std::string>& fragments) {
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "message '" << status.message() << "' lacks '" << f << "'";
  }
}

const std::vector<std::string> kExpectedLayoutWords = {"expected <root>/train/<class>/<image>",
                                                       "<root>/<class>/<image>"};

TEST(ImageFolderLayout, RootOfClassesServesBothSplits) {
  TempDir dir;
  AddImages(dir, "cat", 2);
  AddImages(dir, "ant", 1);
  for (ImageFolderSplit split : {ImageFolderSplit::kTrain, ImageFolderSplit::kEval}) {
    auto layout = ResolveImageFolderLayout(dir.path(), split);
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_EQ(layout->class_root, dir.path());
    EXPECT_EQ(layout->label_classes, (std::vector<std::string>{"ant", "cat"}));
    EXPECT_EQ(layout->description, "root of classes");
    EXPECT_EQ(layout->eval_reads_training_images, split == ImageFolderSplit::kEval);
  }
}

TEST(ImageFolderLayout, TrainAndValSplits) {
  TempDir dir;
  AddImages(dir, "train/b", 1);
  AddImages(dir, "train/a", 1);
  AddImages(dir, "val/a", 1);
  AddImages(dir, "val/b", 1);
  auto train = ResolveImageFolderLayout(dir.path(), ImageFolderSplit::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->class_root, dir.Sub("train"));
  EXPECT_EQ(train->label_classes, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(train->eval_reads_training_images);
  auto eval = ResolveImageFolderLayout(dir.path(), ImageFolderSplit::kEval);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->class_root, dir.Sub("val"));
  EXPECT_EQ(eval->label_classes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(eval->description, "split layout (val/)");
}

// The layout deploy/README.md documents: images/{train,test}/<class>/*.jpg. Both splits open as
// datasets (this root used to fail with "test: class directory has no .jpg/.jpeg/.png file").
TEST(ImageFolderLayout, TrainAndTestSplitsOpenAsDatasets) {
  TempDir dir;
  AddImages(dir, "train/dog", 3);
  AddImages(dir, "train/cat", 2);
  AddImages(dir, "test/cat", 1);
  AddImages(dir, "test/dog", 1);
  for (ImageFolderSplit split : {ImageFolderSplit::kTrain, ImageFolderSplit::kEval}) {
    auto layout = ResolveImageFolderLayout(dir.path(), split);
    ASSERT_TRUE(layout.ok()) << layout.status();
    ImageFolderOptions options;
    options.root = layout->class_root;
    options.label_classes = layout->label_classes;
    options.image_size = 8;
    auto ds = ImageFolderDataset::Open(options);
    ASSERT_TRUE(ds.ok()) << ds.status();
    EXPECT_EQ((*ds)->size(), split == ImageFolderSplit::kTrain ? 5 : 2);
    EXPECT_EQ((*ds)->num_classes(), 2);
  }
  EXPECT_EQ(ResolveImageFolderLayout(dir.path(), ImageFolderSplit::kEval)->class_root,
            dir.Sub("test"));
}

TEST(ImageFolderLayout, ValWinsOverTestForEvaluation) {
  TempDir dir;
  AddImages(dir, "train/a", 1);
  AddImages(dir, "val/a", 1);
  AddImages(dir, "test/a", 1);
  auto eval = ResolveImageFolderLayout(dir.path(), ImageFolderSplit::kEval);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->class_root, dir.Sub("val"));
}

// The evaluation split keeps the training labels when it lacks a class, and refuses a class
// the training split does not have.
TEST(ImageFolderLayout, EvalSplitUsesTrainingLabels) {
  TempDir dir;
  AddImages(dir, "train/a", 1);
  AddImages(dir, "train/b", 1);
  AddImages(dir, "train/c", 1);
  AddImages(dir, "val/c", 2);
  auto eval = ResolveImageFolderLayout(dir.path(), ImageFolderSplit::kEval);
  ASSERT_TRUE(eval.ok()) << eval.status();
  ImageFolderOptions options;
  options.root = eval->class_root;
  options.label_classes = eval->label_classes;
  options.image_size = 8;
  auto ds = ImageFolderDataset::Open(options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->num_classes(), 3);
  ASSERT_EQ((*ds)->size(), 2);
  EXPECT_EQ((*ds)->label(0), 2);  // c keeps its training label, not 0

  AddImages(dir, "val/zebra", 1);
  ds = ImageFolderDataset::Open(options);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kInvalidArgument);
  ExpectMessageHas(ds.status(), {dir.Sub("val/zebra"), "not one of the training split's 3"});
}

TEST(ImageFolderLayout, MissingRootIsNotFound) {
  TempDir dir;
  auto layout = ResolveImageFolderLayout(dir.Sub("absent"), ImageFolderSplit::kTrain);
  EXPECT_EQ(layout.status().code(), StatusCode::kNotFound);
  ExpectMessageHas(layout.status(), {dir.Sub("absent"), "not a directory"});
}

TEST(ImageFolderLayout, EmptyRootNamesTheExpectedLayouts) {
  TempDir dir;
  WriteFile(dir.Sub("README.txt"), "x");
  auto layout = ResolveImageFolderLayout(dir.path(), ImageFolderSplit::kTrain);
  EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument);
  ExpectMessageHas(layout.status(), kExpectedLayoutWords);
  ExpectMessageHas(layout.status(), {"no class directories", "no subdirectories", "1 other file"});
}

TEST(ImageFolderLayout, SplitLayoutWithoutEvaluationSplit) {
  TempDir dir;
  AddImages(dir, "train/a", 1);
  ASSERT_TRUE(ResolveImageFolderLayout(dir.path(), ImageFolderSplit::kTrain).ok());
  auto eval = ResolveImageFolderLayout(dir.path(), ImageFolderSplit::kEval);
  EXPECT_EQ(eval.status().code(), StatusCode::kInvalidArgument);
  ExpectMessageHas(eval.status(), kExpectedLayoutWords);
  ExpectMessageHas(eval.status(), {"no val/ or test/", "train/ (1 subdirectory"});
}

TEST(ImageFolderLayout, EvaluationSplitWithoutTrain) {
  TempDir dir;
  AddImages(dir, "test/a", 1);
  AddImages(dir, "test/b", 1);
  for (ImageFolderSplit split : {ImageFolderSplit::kTrain, ImageFolderSplit::kEval}) {
    auto layout = ResolveImageFolderLayout(dir.path(), split);
    EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument);
    ExpectMessageHas(layout.status(), kExpectedLayoutWords);
    ExpectMessageHas(layout.status(), {"test/ holds class folders but there is no train/",
                                       "test/ (2 subdirectories, 0 image files"});
  }
}

// A root one level too high (the dataset root's parent) or a class with no image of its own.
TEST(ImageFolderLayout, ClassDirectoriesWithoutImagesAreNamed) {
  TempDir dir;
  AddImages(dir, "imagenet/train/a", 1);
  AddImages(dir, "imagenet/val/a", 1);
  auto layout = ResolveImageFolderLayout(dir.path(), ImageFolderSplit::kTrain);
  EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument);
  ExpectMessageHas(layout.status(), kExpectedLayoutWords);
  ExpectMessageHas(layout.status(),
                   {"class directories without images: imagenet/ (2 subdirectories, "
                    "0 image files, 0 other files)"});

  TempDir flat;
  AddImages(flat, "a", 1);
  WriteFile(flat.Sub("b/notes.txt"), "not an image");
  layout = ResolveImageFolderLayout(flat.path(), ImageFolderSplit::kTrain);
  EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument);
  ExpectMessageHas(layout.status(), {"without images: b/ (0 subdirectories, 0 image files, 1 other "
                                     "file)",
                                     "a/ (0 subdirectories, 1 image file, 0 other files)"});
}

TEST(ImageFolderLayout, ImageExtensionsAreCaseInsensitive) {
  EXPECT_TRUE(HasImageExtension("a/b.JPG"));
  EXPECT_TRUE(HasImageExtension("x.jpeg"));
  EXPECT_TRUE(HasImageExtension("x.Png"));
  EXPECT_FALSE(HasImageExtension("x.gif"));
  EXPECT_FALSE(HasImageExtension("jpg"));
}

}  // namespace
}  // namespace retort::trainer::data
