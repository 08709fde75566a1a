// The nvJPEG decoder on a GPU (skipped without one): GPU-decoded samples of the same files and
// seeds agree with the CPU decoder (full-size decode, the same geometry and resampling) within
// JPEG decoder tolerance (mean absolute error below 2/255 per pixel), one at a time and in
// batches (DecodeJpegBatch: the hardware decoder where the GPU has one); a corrupt JPEG in the
// middle of a batch gets its own error while the others decode; corrupt files and JPEGs it does
// not take fall back to the CPU decoder through the dataset; 10,000 decodes leave device memory
// flat after warm-up.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/trainer/data_test_util.h"
#include "trainer/data/device_decoder.h"
#include "trainer/data/image_codec.h"
#include "trainer/data/image_folder.h"

namespace retort::trainer::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

// A photo-like test card: gradients, a checkerboard and noise (so chroma subsampling and the
// IDCT both matter).
std::vector<uint8_t> TestCard(int w, int h, uint32_t seed) {
  std::vector<uint8_t> p(static_cast<size_t>(w) * h * 3);
  uint32_t s = seed;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      s = s * 1664525u + 1013904223u;
      uint8_t* px = &p[static_cast<size_t>((y * w + x) * 3)];
      const bool check = ((x / 16) + (y / 16)) % 2 == 0;
      px[0] = static_cast<uint8_t>(std::min(255, 255 * x / w + static_cast<int>(s >> 29)));
      px[1] = static_cast<uint8_t>(check ? 200 : 40);
      px[2] = static_cast<uint8_t>(128 + 100 * std::sin(x * 0.07 + y * 0.03));
    }
  return p;
}

// Mean absolute difference of two normalised CHW samples, in 8-bit pixel units.
double MeanAbsoluteError(const float* got, const float* expected, int64_t floats) {
  const Normalization norm = ImageNetNormalization();
  const int64_t plane = floats / 3;
  double total = 0;
  for (int64_t k = 0; k < floats; ++k) {
    const int c = static_cast<int>(k / plane);
    total += std::fabs(got[k] - expected[k]) * norm.std[c] * 255.0;
  }
  return total / static_cast<double>(floats);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class NvjpegDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = CreateNvjpegDecoder(0);
    if (!made.ok()) GTEST_SKIP() << made.status();
    decoder_ = std::move(*made);
    for (int i = 0; i < 8; ++i) {
      const int w = 500 - 37 * i, h = 375 - 21 * i;
      const auto rgb = TestCard(w, h, static_cast<uint32_t>(i + 1));
      auto jpeg = EncodeJpeg(rgb.data(), w, h, 3, 90);
      ASSERT_TRUE(jpeg.ok());
      WriteFile(dir_.Sub("c/" + std::to_string(i) + ".jpg"), *jpeg);
    }
  }
  std::unique_ptr<ImageFolderDataset> Open() {
    ImageFolderOptions o;
    o.root = dir_.path();
    o.image_size = 224;
    o.jpeg_dct_scaling = false;
    auto ds = ImageFolderDataset::Open(o);
    EXPECT_TRUE(ds.ok()) << ds.status();
    return ds.ok() ? std::move(*ds) : nullptr;
  }
  TempDir dir_;
  std::unique_ptr<DeviceDecoder> decoder_;
};

TEST_F(NvjpegDecoderTest, AgreesWithTheCpuDecoderWithinJpegTolerance) {
  auto ds = Open();
  ASSERT_NE(ds, nullptr);
  const int64_t floats = ds->shape().numel();
  torch::Tensor device = torch::empty({floats}, torch::TensorOptions().device(torch::kCUDA, 0));
  std::vector<float> scratch, cpu(static_cast<size_t>(floats));
  const Normalization norm = ImageNetNormalization();
  for (int64_t i = 0; i < ds->size(); ++i) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{11}, uint64_t{987654}}) {
      int64_t label = 0;
      ASSERT_TRUE(
          ds->GetOnDevice(i, seed, device.data_ptr<float>(), &label, *decoder_, &scratch).ok());
      ASSERT_TRUE(ds->Get(i, seed, cpu.data(), &label).ok());
      torch::Tensor got = device.cpu();
      const float* g = got.data_ptr<float>();
      double total = 0;
      const int64_t plane = floats / 3;
      for (int64_t k = 0; k < floats; ++k) {
        const int c = static_cast<int>(k / plane);
        total += std::fabs(g[k] - cpu[static_cast<size_t>(k)]) * norm.std[c] * 255.0;
      }
      EXPECT_LT(total / floats, 2.0)
          << "sample " << i << " seed " << seed << ": mean absolute error in 8-bit pixel units";
    }
  }
  EXPECT_EQ(ds->cpu_fallbacks(), 0);
}

TEST_F(NvjpegDecoderTest, ABatchAgreesWithTheCpuDecoderAndACorruptJpegFailsAlone) {
  auto ds = Open();
  ASSERT_NE(ds, nullptr);
  const int64_t n = ds->size();
  const int64_t floats = ds->shape().numel();
  std::vector<std::string> bytes;
  for (int64_t i = 0; i < n; ++i) bytes.push_back(ReadBytes(ds->SampleName(i)));
  bytes[3] = std::string("\xFF\xD8\xFF\xE0 truncated", 15);
  torch::Tensor device = torch::empty({n, floats}, torch::TensorOptions().device(torch::kCUDA, 0));
  std::vector<JpegDecodeRequest> requests;
  for (int64_t i = 0; i < n; ++i) {
    const int w = 500 - 37 * static_cast<int>(i), h = 375 - 21 * static_cast<int>(i);
    JpegDecodeRequest r;
    r.bytes = reinterpret_cast<const uint8_t*>(bytes[static_cast<size_t>(i)].data());
    r.size = bytes[static_cast<size_t>(i)].size();
    r.geometry = ChooseSampleGeometry(w, h, 100 + static_cast<uint64_t>(i),
                                      RandomResizedCropOptions(), true, 0.875);
    r.out_size = 224;
    r.norm = ImageNetNormalization();
    r.out = device.data_ptr<float>() + i * floats;
    requests.push_back(r);
  }
  for (int round = 0; round < 2; ++round) {  // the second reuses the batch buffers
    std::vector<Status> results;
    decoder_->DecodeJpegBatch(requests, &results);
    ASSERT_EQ(results.size(), requests.size());
    EXPECT_EQ(results[3].code(), StatusCode::kDataLoss) << results[3];
    torch::Tensor got = device.cpu();
    std::vector<float> cpu(static_cast<size_t>(floats));
    for (int64_t i = 0; i < n; ++i) {
      if (i == 3) continue;
      ASSERT_TRUE(results[static_cast<size_t>(i)].ok())
          << i << ": " << results[static_cast<size_t>(i)];
      int64_t label = 0;
      ASSERT_TRUE(ds->Get(i, 100 + static_cast<uint64_t>(i), cpu.data(), &label).ok());
      EXPECT_LT(MeanAbsoluteError(got.data_ptr<float>() + i * floats, cpu.data(), floats), 2.0)
          << "round " << round << " sample " << i;
    }
  }
}

TEST_F(NvjpegDecoderTest, ChunksThroughTheDatasetAgreeWithTheCpuDecoder) {
  const std::vector<uint8_t> gray(64 * 48, 90);
  auto gray_jpeg = EncodeJpeg(gray.data(), 64, 48, 1, 90);
  ASSERT_TRUE(gray_jpeg.ok());
  WriteFile(dir_.Sub("c/3.jpg"), *gray_jpeg);
  auto ds = Open();
  ASSERT_NE(ds, nullptr);
  const int64_t n = ds->size();
  const int64_t floats = ds->shape().numel();
  torch::Tensor device = torch::empty({n, floats}, torch::TensorOptions().device(torch::kCUDA, 0));
  std::vector<int64_t> labels(static_cast<size_t>(n), -1);
  std::vector<float> scratch, cpu(static_cast<size_t>(floats));
  // Chunks of 8, 5 and 8 samples: batch sizes change between calls.
  for (int64_t chunk : {n, n - 3, n}) {
    std::vector<DeviceSample> samples;
    for (int64_t i = 0; i < chunk; ++i) {
      samples.push_back(DeviceSample{i, 7 + static_cast<uint64_t>(i * chunk),
                                     device.data_ptr<float>() + i * floats,
                                     &labels[static_cast<size_t>(i)]});
    }
    std::vector<Status> statuses;
    ds->GetChunkOnDevice(samples, *decoder_, &scratch, &statuses);
    ASSERT_EQ(statuses.size(), samples.size());
    torch::Tensor got = device.cpu();
    for (const DeviceSample& s : samples) {
      ASSERT_TRUE(statuses[static_cast<size_t>(s.index)].ok())
          << s.index << ": " << statuses[static_cast<size_t>(s.index)];
      int64_t label = -1;
      ASSERT_TRUE(ds->Get(s.index, s.augmentation_seed, cpu.data(), &label).ok());
      EXPECT_EQ(*s.label, label);
      EXPECT_LT(MeanAbsoluteError(got.data_ptr<float>() + s.index * floats, cpu.data(), floats),
                2.0)
          << "chunk of " << chunk << " sample " << s.index;
    }
  }
  EXPECT_EQ(ds->cpu_fallbacks(), 3) << "the grayscale JPEG, once per chunk";
}

TEST_F(NvjpegDecoderTest, CorruptAndGrayscaleJpegsTakeTheCpuPath) {
  const std::vector<uint8_t> gray(64 * 48, 90);
  auto gray_jpeg = EncodeJpeg(gray.data(), 64, 48, 1, 90);
  ASSERT_TRUE(gray_jpeg.ok());
  WriteFile(dir_.Sub("c/0.jpg"), *gray_jpeg);
  WriteFile(dir_.Sub("c/1.jpg"), std::string("\xFF\xD8\xFF\xE0 truncated", 15));
  auto ds = Open();
  ASSERT_NE(ds, nullptr);
  torch::Tensor device =
      torch::empty({ds->shape().numel()}, torch::TensorOptions().device(torch::kCUDA, 0));
  std::vector<float> scratch;
  int64_t label = 0;
  EXPECT_TRUE(ds->GetOnDevice(0, 3, device.data_ptr<float>(), &label, *decoder_, &scratch).ok());
  Status corrupt = ds->GetOnDevice(1, 3, device.data_ptr<float>(), &label, *decoder_, &scratch);
  EXPECT_EQ(corrupt.code(), StatusCode::kDataLoss) << corrupt;
  // The grayscale JPEG only: the bad header fails while its header is read, before any decoder.
  EXPECT_EQ(ds->cpu_fallbacks(), 1);
}

TEST_F(NvjpegDecoderTest, TenThousandDecodesLeaveDeviceMemoryFlat) {
  auto ds = Open();
  ASSERT_NE(ds, nullptr);
  torch::Tensor device =
      torch::empty({ds->shape().numel()}, torch::TensorOptions().device(torch::kCUDA, 0));
  std::vector<float> scratch;
  int64_t label = 0;
  auto decode = [&](int n) {
    for (int i = 0; i < n; ++i)
      ASSERT_TRUE(ds->GetOnDevice(i % ds->size(), static_cast<uint64_t>(i + 1),
                                  device.data_ptr<float>(), &label, *decoder_, &scratch)
                      .ok());
  };
  decode(200);  // warm-up: the grow-only buffers reach their size
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  decode(10000);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_LE(free_before - std::min(free_before, free_after), size_t{4} << 20)
      << "device memory grew by " << (free_before - free_after) << " bytes over 10,000 decodes";
}

}  // namespace
}  // namespace retort::trainer::data
