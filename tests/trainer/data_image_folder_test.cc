#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/trainer/data_test_util.h"
#include "trainer/data/image_codec.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/loader.h"

namespace retort::trainer::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

std::vector<uint8_t> SolidRgb(int w, int h, uint8_t r, uint8_t g, uint8_t b) {
  std::vector<uint8_t> p(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < p.size(); i += 3) {
    p[i] = r;
    p[i + 1] = g;
    p[i + 2] = b;
  }
  return p;
}

// Smooth diagonal gradient with distinct channels (JPEG-friendly, asymmetric so flips show).
std::vector<uint8_t> GradientRgb(int w, int h) {
  std::vector<uint8_t> p(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* px = &p[static_cast<size_t>((y * w + x) * 3)];
      px[0] = static_cast<uint8_t>(255 * x / (w - 1));
      px[1] = static_cast<uint8_t>(255 * y / (h - 1));
      px[2] = static_cast<uint8_t>(128 + 100 * std::sin(x * 0.05));
    }
  }
  return p;
}

std::string Jpeg(const std::vector<uint8_t>& rgb, int w, int h, int quality = 95) {
  auto encoded = EncodeJpeg(rgb.data(), w, h, 3, quality);
  EXPECT_TRUE(encoded.ok()) << encoded.status();
  return encoded.ok() ? *encoded : std::string();
}

std::string Png(const std::vector<uint8_t>& pixels, int w, int h, int channels) {
  auto encoded = EncodePng(pixels.data(), w, h, channels);
  EXPECT_TRUE(encoded.ok()) << encoded.status();
  return encoded.ok() ? *encoded : std::string();
}

// root/bird/{a.jpg,b.png}, root/ant/{x.jpeg,y.PNG(gray),notes.txt}: classes sort as ant, bird.
class ImageFolderFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_.Sub("bird/a.jpg"), Jpeg(SolidRgb(64, 48, 200, 40, 90), 64, 48));
    WriteFile(dir_.Sub("bird/b.png"), Png(GradientRgb(40, 30), 40, 30, 3));
    WriteFile(dir_.Sub("ant/x.jpeg"), Jpeg(GradientRgb(80, 60), 80, 60));
    std::vector<uint8_t> gray(30 * 20, 77);
    WriteFile(dir_.Sub("ant/y.PNG"), Png(gray, 30, 20, 1));
    WriteFile(dir_.Sub("ant/notes.txt"), "not an image and ignored");
  }

  ImageFolderOptions Options(int image_size = 16) const {
    ImageFolderOptions options;
    options.root = dir_.path();
    options.image_size = image_size;
    return options;
  }

  TempDir dir_;
};

TEST(DataImageCodec, PngRoundTripIsExactAndJpegIsClose) {
  const auto rgb = GradientRgb(33, 17);
  const std::string png = Png(rgb, 33, 17, 3);
  auto decoded = DecodeImage(reinterpret_cast<const uint8_t*>(png.data()), png.size());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, 33);
  EXPECT_EQ(decoded->height, 17);
  EXPECT_EQ(decoded->pixels, rgb);

  const auto solid = SolidRgb(32, 24, 10, 150, 240);
  const std::string jpeg = Jpeg(solid, 32, 24);
  EXPECT_EQ(SniffImageFormat(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size()),
            ImageFormat::kJpeg);
  auto full = DecodeImage(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size());
  ASSERT_TRUE(full.ok()) << full.status();
  for (size_t i = 0; i < solid.size(); ++i) ASSERT_NEAR(full->pixels[i], solid[i], 4) << i;
  auto half = DecodeImage(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), 2);
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_EQ(half->width, 16);
  EXPECT_EQ(half->height, 12);
  EXPECT_EQ(
      DecodeImage(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), 3).status().code(),
      StatusCode::kInvalidArgument);
}

TEST(DataImageCodec, PngAlphaIsDroppedWithoutCompositing) {
  // One opaque and one fully transparent pixel: both keep their colour, as PIL's convert("RGB").
  const std::vector<uint8_t> rgba = {10, 200, 30, 255, 90, 60, 250, 0};
  const std::string png = Png(rgba, 2, 1, 4);
  auto decoded = DecodeImage(reinterpret_cast<const uint8_t*>(png.data()), png.size());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->channels, 3);
  EXPECT_EQ(decoded->pixels, (std::vector<uint8_t>{10, 200, 30, 90, 60, 250}));
}

TEST_F(ImageFolderFixture, ScansSortedClassesAndFilesAndIgnoresOtherExtensions) {
  auto ds = ImageFolderDataset::Open(Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->classes(), (std::vector<std::string>{"ant", "bird"}));
  ASSERT_EQ((*ds)->size(), 4);
  EXPECT_EQ((*ds)->SampleName(0), dir_.Sub("ant/x.jpeg"));
  EXPECT_EQ((*ds)->SampleName(1), dir_.Sub("ant/y.PNG"));
  EXPECT_EQ((*ds)->SampleName(2), dir_.Sub("bird/a.jpg"));
  EXPECT_EQ((*ds)->label(1), 0);
  EXPECT_EQ((*ds)->label(3), 1);
  EXPECT_EQ((*ds)->shape().numel(), 3 * 16 * 16);
}

TEST_F(ImageFolderFixture, EvalTransformOfSolidImagesGivesNormalizedColour) {
  auto ds = ImageFolderDataset::Open(Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<float> out(3 * 16 * 16);
  int64_t label = -1;
  const float mean[3] = {0.485f, 0.456f, 0.406f};
  const float stddev[3] = {0.229f, 0.224f, 0.225f};
  // bird/a.jpg: solid (200, 40, 90), JPEG tolerance of a few levels.
  ASSERT_TRUE((*ds)->Get(2, 0, out.data(), &label).ok());
  EXPECT_EQ(label, 1);
  const int colour[3] = {200, 40, 90};
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 256; ++i) {
      ASSERT_NEAR(out[static_cast<size_t>(c * 256 + i)], (colour[c] / 255.0f - mean[c]) / stddev[c],
                  6.0f / 255 / stddev[c]);
    }
  }
  // ant/y.PNG: gray 77 expands to RGB (77, 77, 77) exactly.
  ASSERT_TRUE((*ds)->Get(1, 0, out.data(), &label).ok());
  EXPECT_EQ(label, 0);
  for (int c = 0; c < 3; ++c)
    EXPECT_NEAR(out[static_cast<size_t>(c * 256 + 5)], (77 / 255.0f - mean[c]) / stddev[c], 1e-5);
}

TEST_F(ImageFolderFixture, AugmentationIsReproducibleAndDependsOnTheSeed) {
  auto ds = ImageFolderDataset::Open(Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<float> a(3 * 16 * 16), b(a.size()), eval(a.size());
  int64_t label;
  ASSERT_TRUE((*ds)->Get(0, 0, eval.data(), &label).ok());
  int differing = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    ASSERT_TRUE((*ds)->Get(0, seed, a.data(), &label).ok());
    ASSERT_TRUE((*ds)->Get(0, seed, b.data(), &label).ok());
    EXPECT_EQ(a, b) << "seed " << seed;
    differing += a != eval;
  }
  EXPECT_EQ(differing, 10);
}

TEST(DataImageFolder, DctScaledDecodeStaysCloseToFullDecode) {
  TempDir dir;
  WriteFile(dir.Sub("c/big.jpg"), Jpeg(GradientRgb(512, 384), 512, 384));
  ImageFolderOptions options;
  options.root = dir.path();
  options.image_size = 32;
  auto scaled = ImageFolderDataset::Open(options);
  options.jpeg_dct_scaling = false;
  auto full = ImageFolderDataset::Open(options);
  ASSERT_TRUE(scaled.ok() && full.ok());
  std::vector<float> a(3 * 32 * 32), b(a.size());
  int64_t label;
  for (uint64_t seed : {0ull, 3ull, 4ull}) {
    ASSERT_TRUE((*scaled)->Get(0, seed, a.data(), &label).ok());
    ASSERT_TRUE((*full)->Get(0, seed, b.data(), &label).ok());
    double mean_abs = 0;
    for (size_t i = 0; i < a.size(); ++i) mean_abs += std::fabs(a[i] - b[i]);
    mean_abs /= static_cast<double>(a.size());
    EXPECT_LT(mean_abs, 0.05) << "seed " << seed;  // ~3 levels of 255 after normalisation
  }
}

TEST_F(ImageFolderFixture, TruncatedJpegIsDataLossNamingTheFile) {
  const std::string jpeg = Jpeg(GradientRgb(80, 60), 80, 60);
  WriteFile(dir_.Sub("bird/a.jpg"), jpeg.substr(0, jpeg.size() / 2));
  auto ds = ImageFolderDataset::Open(Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<float> out(3 * 16 * 16);
  int64_t label;
  Status s = (*ds)->Get(2, 0, out.data(), &label);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(dir_.Sub("bird/a.jpg")), std::string::npos) << s;
}

TEST_F(ImageFolderFixture, NonImageFileIsDataLossNamingTheFile) {
  WriteFile(dir_.Sub("bird/a.jpg"), "this is text, not a JPEG");
  auto ds = ImageFolderDataset::Open(Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<float> out(3 * 16 * 16);
  int64_t label;
  Status s = (*ds)->Get(2, 0, out.data(), &label);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(dir_.Sub("bird/a.jpg")), std::string::npos) << s;
  EXPECT_NE(s.message().find("not a JPEG or PNG"), std::string::npos) << s;
}

TEST_F(ImageFolderFixture, FileRemovedAfterScanIsNotFoundNamingIt) {
  auto ds = ImageFolderDataset::Open(Options());
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::filesystem::remove(dir_.Sub("bird/b.png"));
  std::vector<float> out(3 * 16 * 16);
  int64_t label;
  Status s = (*ds)->Get(3, 0, out.data(), &label);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find(dir_.Sub("bird/b.png")), std::string::npos) << s;
}

TEST(DataImageFolder, BadRootsAreRejectedWithTheirPath) {
  TempDir dir;
  ImageFolderOptions options;
  options.root = dir.Sub("missing");
  auto ds = ImageFolderDataset::Open(options);
  EXPECT_EQ(ds.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ds.status().message().find(options.root), std::string::npos);

  options.root = dir.path();  // exists, no class directories
  ds = ImageFolderDataset::Open(options);
  EXPECT_EQ(ds.status().code(), StatusCode::kInvalidArgument) << ds.status();

  WriteFile(dir.Sub("empty_class/readme.txt"), "x");
  ds = ImageFolderDataset::Open(options);
  EXPECT_EQ(ds.status().code(), StatusCode::kInvalidArgument) << ds.status();
  EXPECT_NE(ds.status().message().find("empty_class"), std::string::npos) << ds.status();
}

TEST_F(ImageFolderFixture, ClassesFileFixesOrderAndMustMatchDirectories) {
  TempDir other;  // the classes file lives outside the root (it is not a class directory)
  WriteFile(other.Sub("classes.txt"), "bird\nant\n");
  ImageFolderOptions options = Options();
  options.classes_file = other.Sub("classes.txt");
  auto ds = ImageFolderDataset::Open(options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->classes(), (std::vector<std::string>{"bird", "ant"}));
  EXPECT_EQ((*ds)->label(0), 0);  // bird/a.jpg comes first now

  WriteFile(other.Sub("classes.txt"), "bird\nant\nzebra\n");
  options.classes_file = other.Sub("classes.txt");
  ds = ImageFolderDataset::Open(options);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("zebra"), std::string::npos) << ds.status();
  EXPECT_NE(ds.status().message().find(options.classes_file), std::string::npos) << ds.status();

  WriteFile(other.Sub("classes.txt"), "bird\n");
  ds = ImageFolderDataset::Open(options);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("ant"), std::string::npos) << ds.status();

  options.classes_file = other.Sub("absent.txt");
  EXPECT_EQ(ImageFolderDataset::Open(options).status().code(), StatusCode::kNotFound);
}

// Through the loader: without skip_corrupt the corrupt file's error surfaces on Next(); with it
// the slot is filled by the next valid index and the replacement is counted.
TEST_F(ImageFolderFixture, LoaderSurfacesOrSkipsCorruptFiles) {
  WriteFile(dir_.Sub("ant/y.PNG"), "\x89PNG\r\n\x1a\n truncated garbage");
  auto opened = ImageFolderDataset::Open(Options());
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<const Dataset> ds(std::move(*opened));

  LoaderOptions options;
  options.global_batch = 4;
  options.num_threads = 2;
  auto loader = Loader::Create(ds, options);
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE((*loader)->Seek(SamplerState{0, 0}, 0, 1).ok());
  auto batch = (*loader)->Next(Deadline::AfterMs(10000));
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(batch.status().message().find(dir_.Sub("ant/y.PNG")), std::string::npos)
      << batch.status();

  options.skip_corrupt = true;
  auto skipping = Loader::Create(ds, options);
  ASSERT_TRUE(skipping.ok());
  ASSERT_TRUE((*skipping)->Seek(SamplerState{0, 0}, 0, 1).ok());
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto b = (*skipping)->Next(Deadline::AfterMs(10000));
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(b->images.size(0), 4);
    // Index 1 (y.PNG) is replaced by index 2 (the next valid one).
    std::vector<int64_t> sorted = b->sample_indices;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int64_t>{0, 2, 2, 3}));
  }
  EXPECT_EQ((*skipping)->stats().replaced_samples, 2);
  EXPECT_EQ((*skipping)->stats().corrupt_samples, 1);
}

}  // namespace
}  // namespace retort::trainer::data
