// Decoding a folder of valid JPEGs mixed with corrupt files from many threads: no valid file may
// ever be reported corrupt (and skipped), whatever ran on the same decode thread before it.
// Ground truth is an independent decode of every file with a fresh TurboJPEG handle per file.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/trainer/data_test_util.h"
#include "trainer/data/image_codec.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/loader.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

constexpr int kValidFiles = 2000;
constexpr int kClasses = 8;
constexpr int kThreads = 8;
constexpr int kRounds = 20;       // DatasetGet test: passes over the folder
constexpr int kLoaderEpochs = 5;  // Loader test
constexpr int kImageSize = 8;

// A small noisy gradient, different for every seed, encoded as a JPEG.
std::string SmallJpeg(uint64_t seed) {
  SplitMix64 rng(seed);
  const int w = static_cast<int>(rng.Between(12, 28));
  const int h = static_cast<int>(rng.Between(12, 28));
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) {
        rgb[static_cast<size_t>((y * w + x) * 3 + c)] =
            static_cast<uint8_t>((x * 9 + y * 5 + c * 60 + static_cast<int>(rng.Below(40))) & 255);
      }
    }
  }
  auto encoded = EncodeJpeg(rgb.data(), w, h, 3, 90);
  EXPECT_TRUE(encoded.ok()) << encoded.status();
  return encoded.ok() ? *encoded : std::string();
}

// Corrupt variants of a valid JPEG, covering the ways TurboJPEG fails: errors inside the
// header (truncated tables, garbage markers, damaged Huffman tables), a stream that ends before
// the frame header, truncated scan data, and files that are not JPEGs at all.
std::string Corrupt(const std::string& jpeg, int kind, SplitMix64& rng) {
  switch (kind % 7) {
    case 0:
      return jpeg.substr(0, jpeg.size() / 4);
    case 1:
      return std::string("\xFF\xD8\xFF", 3) + std::string(200, 'x');
    case 2: {
      std::string bad = jpeg;
      for (int i = 0; i < 40; ++i) bad[20 + rng.Below(bad.size() / 2)] ^= static_cast<char>(0xA5);
      return bad;
    }
    case 3:
      return jpeg.substr(0, 10);
    case 4:
      return jpeg.substr(0, jpeg.size() - 60);
    case 5:
      return "a text file with a .jpg name";
    default:
      return jpeg.substr(0, jpeg.size() / 2);
  }
}

// Independent reference: a fresh decompressor for this file only.
bool ReferenceDecodes(const std::string& bytes) {
  tjhandle tj = tjInitDecompress();
  if (tj == nullptr) return false;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  bool ok = !bytes.empty() &&
            tjDecompressHeader3(tj, data, bytes.size(), &w, &h, &subsamp, &colorspace) == 0 &&
            w > 0 && h > 0;
  if (ok) {
    std::vector<unsigned char> out(static_cast<size_t>(w) * h * 3);
    ok = tjDecompress2(tj, data, bytes.size(), out.data(), w, 0, h, TJPF_RGB, TJFLAG_FASTDCT) == 0;
  }
  tjDestroy(tj);
  return ok;
}

std::string ReadFileForTest(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::string();
  std::string data;
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), f)) > 0) data.append(buffer, got);
  std::fclose(f);
  return data;
}

// The folder, the reference verdict and the expected output of every file; built once for the
// tests below (writing and decoding a few thousand files is most of their cost).
struct Folder {
  TempDir dir;
  std::shared_ptr<const ImageFolderDataset> dataset;
  std::vector<bool> valid;
  int invalid_count = 0;
  std::vector<std::vector<float>> expected;
  std::string error;  // non-empty: the fixture could not be built
};

void BuildFolder(Folder& f) {
  SplitMix64 rng(99);
  // Every 100th file has a corrupt neighbour sorted right after it in the same class.
  for (int i = 0; i < kValidFiles; ++i) {
    const std::string name = "c" + std::to_string(i % kClasses) + "/img_" + std::to_string(i);
    const std::string jpeg = SmallJpeg(static_cast<uint64_t>(i) + 1);
    WriteFile(f.dir.Sub(name + ".jpg"), jpeg);
    if (i % 100 == 0) WriteFile(f.dir.Sub(name + "_z.jpg"), Corrupt(jpeg, i / 100, rng));
  }
  ImageFolderOptions options;
  options.root = f.dir.path();
  options.image_size = kImageSize;
  auto opened = ImageFolderDataset::Open(options);
  if (!opened.ok()) {
    f.error = opened.status().ToString();
    return;
  }
  f.dataset = std::move(*opened);
  const auto n = static_cast<size_t>(f.dataset->size());
  if (n != static_cast<size_t>(kValidFiles + kValidFiles / 100)) {
    f.error = "folder holds " + std::to_string(n) + " files";
    return;
  }
  f.valid.resize(n);
  for (size_t i = 0; i < n; ++i) {
    f.valid[i] = ReferenceDecodes(ReadFileForTest(f.dataset->SampleName(static_cast<int64_t>(i))));
  }
  // The reference agrees with how the folder was built (a damaged Huffman table may still
  // decode, so only count): the tests must exercise many failing decodes.
  f.invalid_count = static_cast<int>(std::count(f.valid.begin(), f.valid.end(), false));
  if (f.invalid_count < kValidFiles / 100 - 4 || f.invalid_count > kValidFiles / 100) {
    f.error = std::to_string(f.invalid_count) + " files fail the reference decode";
    return;
  }
  // Expected eval-transform output of every valid file, computed on a new thread (a fresh
  // thread-local decoder) that never sees a corrupt file.
  f.expected.assign(n, std::vector<float>());
  std::thread reference([&] {
    for (size_t i = 0; i < n; ++i) {
      if (!f.valid[i]) continue;
      f.expected[i].resize(static_cast<size_t>(f.dataset->shape().numel()));
      int64_t label = -1;
      Status s = f.dataset->Get(static_cast<int64_t>(i), 0, f.expected[i].data(), &label);
      if (!s.ok() && f.error.empty()) f.error = "reference decode: " + s.ToString();
    }
  });
  reference.join();
}

const Folder& SharedFolder() {
  static Folder* folder = [] {
    auto* f = new Folder();
    BuildFolder(*f);
    return f;
  }();
  return *folder;
}

class DecodeThreadsFixture : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(f_.error.empty()) << f_.error; }

  const Folder& f_ = SharedFolder();
  const std::shared_ptr<const ImageFolderDataset>& dataset_ = f_.dataset;
  const std::vector<bool>& valid_ = f_.valid;
  const int invalid_count_ = f_.invalid_count;
  const std::vector<std::vector<float>>& expected_ = f_.expected;
};

// kThreads threads share every file of the folder in a different order each round; every valid
// file decodes to exactly its reference output, every invalid one is DataLoss.
TEST_F(DecodeThreadsFixture, DatasetGetFromManyThreadsNeverFailsAValidFile) {
  const int64_t n = dataset_->size();
  const auto numel = static_cast<size_t>(dataset_->shape().numel());
  int64_t wrongly_failed = 0, wrong_pixels = 0, wrongly_ok = 0;
  std::string first_failure;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    SplitMix64 rng(static_cast<uint64_t>(round) + 7);
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(order[static_cast<size_t>(i)], order[rng.Below(static_cast<uint64_t>(i) + 1)]);
    std::vector<Status> results(static_cast<size_t>(n));
    std::vector<uint8_t> pixels_match(static_cast<size_t>(n), 0);
    std::atomic<int64_t> cursor{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        std::vector<float> out(numel);
        for (int64_t k = cursor++; k < n; k = cursor++) {
          const auto i = static_cast<size_t>(order[static_cast<size_t>(k)]);
          int64_t label = -1;
          results[i] = dataset_->Get(static_cast<int64_t>(i), 0, out.data(), &label);
          pixels_match[i] = results[i].ok() && out == expected_[i];
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      if (valid_[i] && !results[i].ok()) {
        ++wrongly_failed;
        if (first_failure.empty()) first_failure = results[i].message();
      } else if (valid_[i] && !pixels_match[i]) {
        ++wrong_pixels;
      } else if (!valid_[i] && results[i].code() != StatusCode::kDataLoss) {
        ++wrongly_ok;
      }
    }
  }
  EXPECT_EQ(wrongly_failed, 0) << "first: " << first_failure;
  EXPECT_EQ(wrong_pixels, 0);
  EXPECT_EQ(wrongly_ok, 0);
}

// The user-facing path: the loader with skip_corrupt and kThreads decode threads over
// kLoaderEpochs epochs. Only the invalid files are ever replaced (once per epoch each), and
// every sample in a batch is a valid file.
TEST_F(DecodeThreadsFixture, LoaderWithSkipCorruptReplacesOnlyInvalidFiles) {
  LoaderOptions options;
  options.global_batch = 256;
  options.seed = 5;
  options.drop_last = false;  // every index once per epoch
  options.augment = false;
  options.num_threads = kThreads;
  options.prefetch_depth = 4;
  options.skip_corrupt = true;
  auto loader = Loader::Create(dataset_, options);
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE((*loader)->Seek(SamplerState{0, 0}, 0, 1).ok());
  const int64_t n = dataset_->size();
  const int64_t steps_per_epoch = (n + options.global_batch - 1) / options.global_batch;
  int64_t invalid_used = 0;
  for (int64_t step = 0; step < kLoaderEpochs * steps_per_epoch; ++step) {
    auto batch = (*loader)->Next(Deadline::AfterMs(60000));
    ASSERT_TRUE(batch.ok()) << batch.status();
    for (int64_t index : batch->sample_indices) invalid_used += !valid_[static_cast<size_t>(index)];
  }
  EXPECT_EQ(invalid_used, 0);
  EXPECT_EQ((*loader)->stats().replaced_samples, int64_t{invalid_count_} * kLoaderEpochs);
  EXPECT_EQ((*loader)->stats().corrupt_samples, invalid_count_);
}

}  // namespace
}  // namespace retort::trainer::data
