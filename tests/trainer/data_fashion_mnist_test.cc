#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/trainer/data_test_util.h"
#include "trainer/data/fashion_mnist.h"

namespace retort::trainer::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

constexpr char kInstalledRoot[] = "/usr/share/datasets/fashion-mnist";

bool InstalledDatasetPresent() {
  return std::filesystem::exists(std::string(kInstalledRoot) + "/train-images-idx3-ubyte.gz");
}

std::string BigEndian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string IdxImages(uint32_t count, uint32_t rows, uint32_t cols, size_t data_bytes) {
  std::string s =
      BigEndian32(0x00000803) + BigEndian32(count) + BigEndian32(rows) + BigEndian32(cols);
  for (size_t i = 0; i < data_bytes; ++i) s.push_back(static_cast<char>(i * 7));
  return s;
}

std::string IdxLabels(uint32_t count) {
  std::string s = BigEndian32(0x00000801) + BigEndian32(count);
  for (uint32_t i = 0; i < count; ++i) s.push_back(static_cast<char>(i % 10));
  return s;
}

void WriteGzip(const std::string& path, const std::string& contents) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, contents.data(), static_cast<unsigned>(contents.size())),
            static_cast<int>(contents.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// A valid 5-sample split in `dir` (test split names), written gzip-compressed.
void WriteSmallSplit(const TempDir& dir) {
  WriteGzip(dir.Sub("t10k-images-idx3-ubyte.gz"), IdxImages(5, 28, 28, 5 * 28 * 28));
  WriteGzip(dir.Sub("t10k-labels-idx1-ubyte.gz"), IdxLabels(5));
}

FashionMnistOptions TestSplit(const TempDir& dir) {
  FashionMnistOptions options;
  options.root = dir.path();
  options.train = false;
  return options;
}

TEST(DataFashionMnist, InstalledTrainAndTestSplitsLoad) {
  if (!InstalledDatasetPresent())
    GTEST_SKIP() << "Fashion-MNIST not installed at " << kInstalledRoot;
  FashionMnistOptions options;
  options.root = kInstalledRoot;
  auto train = FashionMnistDataset::Load(options);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ((*train)->size(), 60000);
  EXPECT_EQ((*train)->shape().numel(), 784);
  options.train = false;
  auto test = FashionMnistDataset::Load(options);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ((*test)->size(), 10000);

  // Fashion-MNIST is class balanced, and its published mean/std normalise it to ~N(0, 1).
  std::vector<int64_t> per_class(10, 0);
  double sum = 0, sum_sq = 0;
  std::vector<float> sample(784);
  for (int64_t i = 0; i < (*train)->size(); ++i) {
    int64_t label = -1;
    ASSERT_TRUE((*train)->Get(i, 0, sample.data(), &label).ok());
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++per_class[static_cast<size_t>(label)];
    for (float v : sample) {
      sum += v;
      sum_sq += static_cast<double>(v) * v;
    }
  }
  for (int64_t c : per_class) EXPECT_EQ(c, 6000);
  const double n = 60000.0 * 784;
  const double mean = sum / n;
  const double stddev = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(stddev, 1.0, 0.01);
}

TEST(DataFashionMnist, AugmentationIsReproducibleAndSeedZeroIsPlain) {
  TempDir dir;
  WriteSmallSplit(dir);
  auto ds = FashionMnistDataset::Load(TestSplit(dir));
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<float> plain(784), a(784), b(784);
  int64_t label = -1;
  ASSERT_TRUE((*ds)->Get(3, 0, plain.data(), &label).ok());
  EXPECT_EQ(label, 3);
  for (int i = 0; i < 784; ++i) {
    EXPECT_NEAR(plain[static_cast<size_t>(i)],
                ((*ds)->raw_pixels(3)[i] / 255.0f - 0.2860f) / 0.3530f, 1e-5);
  }
  int differing_seeds = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ASSERT_TRUE((*ds)->Get(3, seed, a.data(), &label).ok());
    ASSERT_TRUE((*ds)->Get(3, seed, b.data(), &label).ok());
    EXPECT_EQ(a, b);
    differing_seeds += a != plain;
  }
  EXPECT_GT(differing_seeds, 10);  // 49 of 50 crop/flip draws differ from the identity
  EXPECT_EQ((*ds)->Get(5, 0, a.data(), &label).code(), StatusCode::kOutOfRange);
}

TEST(DataFashionMnist, MissingFileIsNotFoundNamingIt) {
  TempDir dir;
  WriteGzip(dir.Sub("t10k-images-idx3-ubyte.gz"), IdxImages(5, 28, 28, 5 * 28 * 28));
  auto ds = FashionMnistDataset::Load(TestSplit(dir));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ds.status().message().find("t10k-labels-idx1-ubyte.gz"), std::string::npos)
      << ds.status();
}

TEST(DataFashionMnist, WrongMagicIsNamed) {
  TempDir dir;
  WriteSmallSplit(dir);
  // A labels file where the images file belongs.
  WriteGzip(dir.Sub("t10k-images-idx3-ubyte.gz"), IdxLabels(5));
  auto ds = FashionMnistDataset::Load(TestSplit(dir));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ds.status().message().find("t10k-images-idx3-ubyte.gz"), std::string::npos)
      << ds.status();
  EXPECT_NE(ds.status().message().find("magic"), std::string::npos) << ds.status();
}

TEST(DataFashionMnist, CountMismatchNamesBothFiles) {
  TempDir dir;
  WriteSmallSplit(dir);
  WriteGzip(dir.Sub("t10k-labels-idx1-ubyte.gz"), IdxLabels(4));
  auto ds = FashionMnistDataset::Load(TestSplit(dir));
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("5 images"), std::string::npos) << ds.status();
  EXPECT_NE(ds.status().message().find("4 labels"), std::string::npos) << ds.status();
}

TEST(DataFashionMnist, TruncatedDataIsDataLossNamingTheFile) {
  TempDir dir;
  WriteSmallSplit(dir);
  WriteGzip(dir.Sub("t10k-images-idx3-ubyte.gz"), IdxImages(5, 28, 28, 5 * 28 * 28 - 100));
  auto ds = FashionMnistDataset::Load(TestSplit(dir));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(ds.status().message().find("t10k-images-idx3-ubyte.gz"), std::string::npos)
      << ds.status();
  EXPECT_NE(ds.status().message().find("truncated"), std::string::npos) << ds.status();
}

TEST(DataFashionMnist, TruncatedGzipStreamIsDataLoss) {
  TempDir dir;
  WriteSmallSplit(dir);
  auto full = std::filesystem::file_size(dir.Sub("t10k-images-idx3-ubyte.gz"));
  std::filesystem::resize_file(dir.Sub("t10k-images-idx3-ubyte.gz"), full / 2);
  auto ds = FashionMnistDataset::Load(TestSplit(dir));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(ds.status().message().find("t10k-images-idx3-ubyte.gz"), std::string::npos)
      << ds.status();
}

TEST(DataFashionMnist, LabelOutOfRangeAndWrongImageSizeAreRejected) {
  TempDir dir;
  WriteSmallSplit(dir);
  WriteGzip(dir.Sub("t10k-labels-idx1-ubyte.gz"),
            BigEndian32(0x00000801) + BigEndian32(5) + std::string("\x00\x01\x02\x0a\x04", 5));
  auto ds = FashionMnistDataset::Load(TestSplit(dir));
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("label 10 of sample 3"), std::string::npos) << ds.status();

  WriteSmallSplit(dir);
  WriteGzip(dir.Sub("t10k-images-idx3-ubyte.gz"), IdxImages(5, 32, 32, 5 * 32 * 32));
  ds = FashionMnistDataset::Load(TestSplit(dir));
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("32x32"), std::string::npos) << ds.status();
}

TEST(DataFashionMnist, UncompressedFilesAreReadToo) {
  TempDir dir;
  WriteFile(dir.Sub("t10k-images-idx3-ubyte.gz"), IdxImages(5, 28, 28, 5 * 28 * 28));
  WriteFile(dir.Sub("t10k-labels-idx1-ubyte.gz"), IdxLabels(5));
  auto ds = FashionMnistDataset::Load(TestSplit(dir));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), 5);
  EXPECT_EQ((*ds)->raw_pixels(1)[0], static_cast<uint8_t>(784 * 7));
}

}  // namespace
}  // namespace retort::trainer::data
