// The GPU decode path's routing, on the CPU with a host-memory DeviceDecoder standing in for
// nvJPEG: an image folder hands JPEGs to the device decoder with the geometry the CPU path uses
// (so the same (seed, sample) crops the same pixels), PNGs and JPEGs the device decoder refuses
// go through the CPU decoder and an upload (counted), a corrupt file fails as it does on the CPU,
// a chunk decoded through one DecodeJpegBatch call equals the same samples decoded one by one,
// and the loader's device path (chunks of JPEGs in batches) yields the CPU path's batches, errors
// and replacements. The nvJPEG decoder itself is tested on a GPU
// (tests/trainer/gpu/nvjpeg_decoder_test.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/trainer/data_test_util.h"
#include "trainer/data/device_decoder.h"
#include "trainer/data/image_codec.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/loader.h"

namespace retort::trainer::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

// The component count in a JPEG's frame header (SOF0-2), -1 if there is none.
int JpegComponents(const uint8_t* data, size_t size) {
  size_t i = 2;
  while (i + 10 <= size && data[i] == 0xFF) {
    const uint8_t marker = data[i + 1];
    if (marker >= 0xC0 && marker <= 0xC2) return data[i + 9];
    i += 2 + ((static_cast<size_t>(data[i + 2]) << 8) | data[i + 3]);
  }
  return -1;
}

// Batch calls of the decoders of several decode threads.
struct BatchCounts {
  std::atomic<int> calls{0};
  std::atomic<int> requests{0};
  std::atomic<int> largest{0};
  std::atomic<int> jpegs_outside_batches{0};
};

// Decodes on the CPU at full size (what nvJPEG does) with the shared geometry and resampling;
// "device" memory is host memory. Grayscale JPEGs are UNIMPLEMENTED (as nvJPEG answers).
// `refuse`: every JPEG is UNIMPLEMENTED (as nvJPEG answers for CMYK). DecodeJpegBatch is the
// interface's default (DecodeJpeg per request), counted here and in `shared` when given.
class HostDecoder final : public DeviceDecoder {
 public:
  explicit HostDecoder(bool refuse = false, BatchCounts* shared = nullptr)
      : refuse_(refuse), shared_(shared) {}
  Status DecodeJpeg(const uint8_t* bytes, size_t size, const SampleGeometry& geometry, int out_size,
                    const Normalization& norm, float* out) override {
    ++jpegs;
    if (!in_batch_) {
      ++jpegs_outside_batches;
      if (shared_ != nullptr) ++shared_->jpegs_outside_batches;
    }
    last_geometry = geometry;
    if (refuse_) return UnimplementedError("host decoder: refused");
    if (JpegComponents(bytes, size) == 1) return UnimplementedError("host decoder: grayscale");
    auto image = DecodeImage(bytes, size, 1);
    if (!image.ok()) return DataLossError("host decoder: " + image.status().message());
    CropResizeNormalize(image->pixels.data(), image->width, image->height, image->channels,
                        geometry.box, out_size, out_size, geometry.flip, norm, out);
    return Status::Ok();
  }
  void DecodeJpegBatch(const std::vector<JpegDecodeRequest>& requests,
                       std::vector<Status>* results) override {
    ++batch_calls;
    batch_requests += static_cast<int>(requests.size());
    if (shared_ != nullptr) {
      ++shared_->calls;
      shared_->requests += static_cast<int>(requests.size());
      int largest = shared_->largest.load();
      while (largest < static_cast<int>(requests.size()) &&
             !shared_->largest.compare_exchange_weak(largest, static_cast<int>(requests.size()))) {
      }
    }
    in_batch_ = true;
    DeviceDecoder::DecodeJpegBatch(requests, results);
    in_batch_ = false;
  }
  Status Upload(const float* host, size_t floats, float* out) override {
    ++uploads;
    std::memcpy(out, host, floats * sizeof(float));
    return Status::Ok();
  }
  int jpegs = 0, uploads = 0, batch_calls = 0, batch_requests = 0, jpegs_outside_batches = 0;
  SampleGeometry last_geometry;

 private:
  const bool refuse_;
  BatchCounts* const shared_;
  bool in_batch_ = false;
};

std::vector<uint8_t> Gradient(int w, int h) {
  std::vector<uint8_t> p(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* px = &p[static_cast<size_t>((y * w + x) * 3)];
      px[0] = static_cast<uint8_t>(255 * x / (w - 1));
      px[1] = static_cast<uint8_t>(255 * y / (h - 1));
      px[2] = static_cast<uint8_t>((x * 7 + y * 3) % 256);
    }
  return p;
}

class DeviceDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto rgb = Gradient(120, 90);
    auto jpeg = EncodeJpeg(rgb.data(), 120, 90, 3, 92);
    auto png = EncodePng(rgb.data(), 120, 90, 3);
    ASSERT_TRUE(jpeg.ok() && png.ok());
    for (int i = 0; i < 6; ++i) WriteFile(dir_.Sub("cat/" + std::to_string(i) + ".jpg"), *jpeg);
    WriteFile(dir_.Sub("dog/a.png"), *png);
    WriteFile(dir_.Sub("dog/b.jpg"), *jpeg);
  }
  // More RGB JPEGs in class cat (cat/m<i>.jpg), for batches larger than the fixture.
  void AddJpegs(int count) {
    const auto rgb = Gradient(64, 48);
    for (int i = 0; i < count; ++i) {
      auto jpeg = EncodeJpeg(rgb.data(), 64, 48, 3, 80 + i % 15);
      ASSERT_TRUE(jpeg.ok());
      WriteFile(dir_.Sub("cat/m" + std::to_string(i) + ".jpg"), *jpeg);
    }
  }
  // A grayscale JPEG (the device decoder refuses it), a JPEG cut in half (its header reads, its
  // data does not decode) and a file whose header does not read, in class dog.
  void AddAwkwardFiles(bool truncated, bool bad_header) {
    const std::vector<uint8_t> gray(40 * 30, 90);
    auto gray_jpeg = EncodeJpeg(gray.data(), 40, 30, 1, 90);
    ASSERT_TRUE(gray_jpeg.ok());
    WriteFile(dir_.Sub("dog/c_gray.jpg"), *gray_jpeg);
    if (truncated) {
      const auto rgb = Gradient(120, 90);
      auto jpeg = EncodeJpeg(rgb.data(), 120, 90, 3, 92);
      ASSERT_TRUE(jpeg.ok());
      WriteFile(dir_.Sub("dog/d_truncated.jpg"), jpeg->substr(0, jpeg->size() / 2));
    }
    if (bad_header) {
      WriteFile(dir_.Sub("dog/e_bad_header.jpg"), std::string("\xFF\xD8\xFF\xE0 truncated", 15));
    }
  }
  std::unique_ptr<ImageFolderDataset> Open() {
    ImageFolderOptions o;
    o.root = dir_.path();
    o.image_size = 32;
    o.jpeg_dct_scaling = false;  // the device decoder decodes at full size
    auto ds = ImageFolderDataset::Open(o);
    EXPECT_TRUE(ds.ok()) << ds.status();
    return ds.ok() ? std::move(*ds) : nullptr;
  }
  TempDir dir_;
};

TEST_F(DeviceDecodeTest, JpegsGoToTheDeviceDecoderWithTheCpuPathsGeometryAndPixels) {
  auto ds = Open();
  ASSERT_NE(ds, nullptr);
  const size_t floats = static_cast<size_t>(ds->shape().numel());
  HostDecoder decoder;
  std::vector<float> scratch, on_device(floats), on_cpu(floats);
  for (int64_t i = 0; i < ds->size(); ++i) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{77}, uint64_t{1234567}}) {
      int64_t label_device = -1, label_cpu = -2;
      ASSERT_TRUE(
          ds->GetOnDevice(i, seed, on_device.data(), &label_device, decoder, &scratch).ok());
      ASSERT_TRUE(ds->Get(i, seed, on_cpu.data(), &label_cpu).ok());
      EXPECT_EQ(label_device, label_cpu);
      for (size_t k = 0; k < floats; ++k) ASSERT_EQ(on_device[k], on_cpu[k]) << i << " " << k;
    }
  }
  // 7 JPEGs x 3 seeds on the device decoder, the PNG x 3 through an upload.
  EXPECT_EQ(decoder.jpegs, 21);
  EXPECT_EQ(decoder.uploads, 3);
  EXPECT_EQ(ds->cpu_fallbacks(), 0);
  const SampleGeometry expected =
      ChooseSampleGeometry(120, 90, 1234567, RandomResizedCropOptions(), true, 0.875);
  EXPECT_EQ(decoder.last_geometry.box.x, expected.box.x);
  EXPECT_EQ(decoder.last_geometry.box.width, expected.box.width);
  EXPECT_EQ(decoder.last_geometry.flip, expected.flip);
}

TEST_F(DeviceDecodeTest, JpegsTheDeviceRefusesFallBackToTheCpuDecoderAndAreCounted) {
  auto ds = Open();
  ASSERT_NE(ds, nullptr);
  const size_t floats = static_cast<size_t>(ds->shape().numel());
  HostDecoder refusing(/*refuse=*/true);
  std::vector<float> scratch, on_device(floats), on_cpu(floats);
  int64_t label = 0;
  ASSERT_TRUE(ds->GetOnDevice(0, 5, on_device.data(), &label, refusing, &scratch).ok());
  ASSERT_TRUE(ds->Get(0, 5, on_cpu.data(), &label).ok());
  EXPECT_EQ(on_device, on_cpu);
  EXPECT_EQ(refusing.uploads, 1);
  EXPECT_EQ(ds->cpu_fallbacks(), 1);
}

TEST_F(DeviceDecodeTest, ACorruptJpegFailsAsOnTheCpuNamingTheFile) {
  WriteFile(dir_.Sub("cat/0.jpg"), std::string("\xFF\xD8\xFF\xE0 truncated", 15));
  auto ds = Open();
  ASSERT_NE(ds, nullptr);
  HostDecoder decoder;
  std::vector<float> scratch, out(static_cast<size_t>(ds->shape().numel()));
  int64_t label = 0;
  Status on_device = ds->GetOnDevice(0, 5, out.data(), &label, decoder, &scratch);
  Status on_cpu = ds->Get(0, 5, out.data(), &label);
  EXPECT_EQ(on_device.code(), StatusCode::kDataLoss) << on_device;
  EXPECT_EQ(on_device.code(), on_cpu.code());
  EXPECT_NE(on_device.message().find("cat/0.jpg"), std::string::npos) << on_device;
}

TEST_F(DeviceDecodeTest, TheLoadersDevicePathYieldsTheCpuPathsBatches) {
  std::shared_ptr<const Dataset> ds = Open();
  ASSERT_NE(ds, nullptr);
  LoaderOptions o;
  o.global_batch = 4;
  o.seed = 9;
  o.num_threads = 2;
  std::atomic<int> decoders{0};
  LoaderOptions device = o;
  device.device_decoder_factory = [&]() -> StatusOr<std::unique_ptr<DeviceDecoder>> {
    ++decoders;
    return std::unique_ptr<DeviceDecoder>(std::make_unique<HostDecoder>());
  };
  auto cpu = Loader::Create(ds, o);
  auto dev = Loader::Create(ds, device);
  ASSERT_TRUE(cpu.ok() && dev.ok());
  ASSERT_TRUE((*cpu)->Seek({0, 0}, 0, 1).ok());
  ASSERT_TRUE((*dev)->Seek({0, 0}, 0, 1).ok());
  for (int step = 0; step < 2; ++step) {
    auto a = (*cpu)->Next(Deadline::AfterMs(20000));
    auto b = (*dev)->Next(Deadline::AfterMs(20000));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(torch::equal(a->images, b->images)) << "step " << step;
    EXPECT_TRUE(torch::equal(a->labels, b->labels));
    EXPECT_EQ(a->sample_indices, b->sample_indices);
  }
  EXPECT_GE(decoders.load(), 1);
  EXPECT_LE(decoders.load(), 2) << "one decoder per decode thread";
}

TEST_F(DeviceDecodeTest, AChunkThroughOneBatchEqualsTheSamplesOneByOne) {
  AddAwkwardFiles(/*truncated=*/true, /*bad_header=*/true);
  auto one_by_one = Open();
  auto chunked = Open();
  ASSERT_NE(one_by_one, nullptr);
  ASSERT_NE(chunked, nullptr);
  const int64_t n = chunked->size();
  ASSERT_EQ(n, 11);  // 6 cat JPEGs, dog: a.png, b.jpg, gray, truncated, bad header
  const auto floats = static_cast<size_t>(chunked->shape().numel());
  std::vector<float> expected(floats * static_cast<size_t>(n), -7.f);
  std::vector<float> got(floats * static_cast<size_t>(n), -7.f);
  std::vector<int64_t> expected_labels(static_cast<size_t>(n), -1);
  std::vector<int64_t> got_labels(static_cast<size_t>(n), -1);
  HostDecoder single, batched;
  std::vector<float> scratch;
  std::vector<Status> expected_statuses;
  std::vector<DeviceSample> samples;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t seed = 1000 + static_cast<uint64_t>(i);
    const auto k = static_cast<size_t>(i);
    expected_statuses.push_back(one_by_one->GetOnDevice(i, seed, &expected[k * floats],
                                                        &expected_labels[k], single, &scratch));
    samples.push_back(DeviceSample{i, seed, &got[k * floats], &got_labels[k]});
  }
  std::vector<Status> statuses;
  chunked->GetChunkOnDevice(samples, batched, &scratch, &statuses);
  ASSERT_EQ(statuses.size(), samples.size());
  int ok = 0;
  for (size_t k = 0; k < statuses.size(); ++k) {
    EXPECT_EQ(statuses[k].code(), expected_statuses[k].code()) << k << ": " << statuses[k];
    EXPECT_EQ(statuses[k].message(), expected_statuses[k].message()) << k;
    EXPECT_EQ(got_labels[k], expected_labels[k]) << k;
    ok += statuses[k].ok() ? 1 : 0;
  }
  EXPECT_EQ(ok, 9) << "all but the truncated JPEG and the bad header";
  EXPECT_EQ(statuses[9].code(), StatusCode::kDataLoss) << statuses[9];
  EXPECT_NE(statuses[9].message().find("d_truncated.jpg"), std::string::npos) << statuses[9];
  EXPECT_EQ(statuses[10].code(), StatusCode::kDataLoss) << statuses[10];
  // Pixels bit for bit, for the failed samples too (whatever was written before the failure).
  for (size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], expected[k]) << k;
  // The gray and the truncated JPEG fell back to the CPU decoder on both routes.
  EXPECT_EQ(one_by_one->cpu_fallbacks(), 2);
  EXPECT_EQ(chunked->cpu_fallbacks(), 2);
  EXPECT_EQ(batched.uploads, single.uploads);
  // Every JPEG whose header read went to the device decoder in one batch.
  EXPECT_EQ(batched.batch_calls, 1);
  EXPECT_EQ(batched.batch_requests, 9);
  EXPECT_EQ(batched.jpegs_outside_batches, 0);
  EXPECT_EQ(single.jpegs, 9);
  EXPECT_EQ(single.batch_calls, 0);
}

TEST_F(DeviceDecodeTest, AChunkOfOtherDatasetsDecodesSampleBySample) {
  // Dataset's default GetChunkOnDevice on a dataset that does not override it: GetOnDevice per
  // sample (CPU decode and upload here), statuses in order, including an out-of-range index.
  class Counting final : public Dataset {
   public:
    int64_t size() const override { return 3; }
    SampleShape shape() const override { return SampleShape{1, 2, 2}; }
    int num_classes() const override { return 2; }
    Status Get(int64_t index, uint64_t seed, float* out, int64_t* label) const override {
      if (index >= size()) return OutOfRangeError("counting: " + std::to_string(index));
      for (int k = 0; k < 4; ++k) out[k] = static_cast<float>(index * 10 + k + int64_t(seed));
      *label = index % 2;
      return Status::Ok();
    }
    std::string SampleName(int64_t index) const override { return std::to_string(index); }
  } ds;
  HostDecoder decoder;
  std::vector<float> out(12, -1.f), scratch;
  std::vector<int64_t> labels(3, -1);
  std::vector<DeviceSample> samples = {DeviceSample{2, 0, &out[0], &labels[0]},
                                       DeviceSample{5, 0, &out[4], &labels[1]},
                                       DeviceSample{1, 100, &out[8], &labels[2]}};
  std::vector<Status> statuses;
  ds.GetChunkOnDevice(samples, decoder, &scratch, &statuses);
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_EQ(statuses[1].code(), StatusCode::kOutOfRange) << statuses[1];
  EXPECT_TRUE(statuses[2].ok()) << statuses[2];
  EXPECT_EQ(out[0], 20.f);
  EXPECT_EQ(out[11], 113.f);
  EXPECT_EQ(labels, (std::vector<int64_t>{0, -1, 1}));
  EXPECT_EQ(decoder.uploads, 2);
  EXPECT_EQ(decoder.batch_calls, 0);
}

// A CPU loader and a device loader (host decoders counting into `counts`) over `ds`.
struct LoaderPair {
  std::unique_ptr<Loader> cpu, device;
};
LoaderPair MakeLoaders(std::shared_ptr<const Dataset> ds, LoaderOptions o, BatchCounts* counts,
                       std::atomic<int>* decoders) {
  LoaderOptions device = o;
  device.device_decoder_factory = [counts, decoders]() -> StatusOr<std::unique_ptr<DeviceDecoder>> {
    ++*decoders;
    return std::unique_ptr<DeviceDecoder>(std::make_unique<HostDecoder>(false, counts));
  };
  auto cpu = Loader::Create(ds, o);
  auto dev = Loader::Create(ds, device);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(dev.ok()) << dev.status();
  LoaderPair pair;
  if (!cpu.ok() || !dev.ok()) return pair;
  pair.cpu = std::move(*cpu);
  pair.device = std::move(*dev);
  EXPECT_TRUE(pair.cpu->Seek({0, 0}, 0, 1).ok());
  EXPECT_TRUE(pair.device->Seek({0, 0}, 0, 1).ok());
  return pair;
}

// The next `steps` batches of both loaders are the same samples, pixels, labels and seeds.
void ExpectSameBatches(LoaderPair& loaders, int steps) {
  for (int step = 0; step < steps; ++step) {
    auto a = loaders.cpu->Next(Deadline::AfterMs(30000));
    auto b = loaders.device->Next(Deadline::AfterMs(30000));
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(torch::equal(a->images, b->images)) << "step " << step;
    EXPECT_TRUE(torch::equal(a->labels, b->labels));
    EXPECT_EQ(a->sample_indices, b->sample_indices);
    EXPECT_EQ(a->augmentation_seeds, b->augmentation_seeds);
  }
}

TEST_F(DeviceDecodeTest, TheLoadersDevicePathDecodesChunksInBatchesAsTheCpuPathDecodes) {
  AddJpegs(17);
  AddAwkwardFiles(/*truncated=*/false, /*bad_header=*/false);
  std::shared_ptr<const ImageFolderDataset> ds = Open();
  ASSERT_NE(ds, nullptr);
  ASSERT_EQ(ds->size(), 26);
  LoaderOptions o;
  o.global_batch = 26;  // every sample in every batch; chunks of 26 / (4 x 3) = 2 slots
  o.seed = 4;
  o.num_threads = 3;
  BatchCounts counts;
  std::atomic<int> decoders{0};
  LoaderPair loaders = MakeLoaders(ds, o, &counts, &decoders);
  ASSERT_NE(loaders.device, nullptr);
  ExpectSameBatches(loaders, 3);
  EXPECT_GE(decoders.load(), 1);
  EXPECT_LE(decoders.load(), 3) << "one decoder per decode thread";
  // At least 3 batches of 25 JPEGs (the PNG is uploaded; later batches may be decoding ahead),
  // every one of them inside a batch call, and batch calls of more than one JPEG.
  EXPECT_GE(counts.requests.load(), 75);
  EXPECT_EQ(counts.jpegs_outside_batches.load(), 0);
  EXPECT_GE(counts.largest.load(), 2);
  EXPECT_GE(ds->cpu_fallbacks(), 3) << "the grayscale JPEG, once per batch";
}

TEST_F(DeviceDecodeTest, TheLoadersDevicePathReplacesAndFailsAsTheCpuPathDoes) {
  AddJpegs(17);
  AddAwkwardFiles(/*truncated=*/true, /*bad_header=*/true);
  std::shared_ptr<const Dataset> ds = Open();
  ASSERT_NE(ds, nullptr);
  ASSERT_EQ(ds->size(), 28);
  LoaderOptions o;
  o.global_batch = 28;
  o.seed = 5;
  o.num_threads = 3;
  BatchCounts counts;
  std::atomic<int> decoders{0};
  {
    // skip_corrupt: both unreadable files are replaced by the same samples on both paths.
    LoaderOptions skip = o;
    skip.skip_corrupt = true;
    LoaderPair loaders = MakeLoaders(ds, skip, &counts, &decoders);
    ASSERT_NE(loaders.device, nullptr);
    ExpectSameBatches(loaders, 2);
    EXPECT_EQ(loaders.cpu->stats().replaced_samples, 4);
    EXPECT_EQ(loaders.device->stats().replaced_samples, 4);
    EXPECT_EQ(loaders.device->stats().corrupt_samples, loaders.cpu->stats().corrupt_samples);
  }
  // Without: the batch fails with the same error on both paths.
  std::string bad = dir_.Sub("dog/e_bad_header.jpg");
  ASSERT_EQ(std::remove(bad.c_str()), 0);  // one unreadable file: one possible first error
  std::shared_ptr<const Dataset> one_bad = Open();
  ASSERT_NE(one_bad, nullptr);
  o.global_batch = 27;
  LoaderPair loaders = MakeLoaders(one_bad, o, &counts, &decoders);
  ASSERT_NE(loaders.device, nullptr);
  auto a = loaders.cpu->Next(Deadline::AfterMs(30000));
  auto b = loaders.device->Next(Deadline::AfterMs(30000));
  ASSERT_FALSE(a.ok());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kDataLoss) << b.status();
  EXPECT_EQ(b.status().code(), a.status().code());
  EXPECT_EQ(b.status().message(), a.status().message());
  EXPECT_NE(b.status().message().find("d_truncated.jpg"), std::string::npos) << b.status();
}

TEST(DeviceDecodeBuild, WithoutAGpuTheNvjpegDecoderIsAPreciseError) {
  auto decoder = CreateNvjpegDecoder(0);
  if (decoder.ok()) GTEST_SKIP() << "a GPU is visible here (the GPU tests cover the decoder)";
  EXPECT_EQ(decoder.status().code(), StatusCode::kFailedPrecondition) << decoder.status();
  EXPECT_NE(decoder.status().message().find("dataset.decode: gpu"), std::string::npos);
}

}  // namespace
}  // namespace retort::trainer::data
