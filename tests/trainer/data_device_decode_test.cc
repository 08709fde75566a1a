// The GPU decode path's routing, on the CPU with a host-memory DeviceDecoder standing in for
// nvJPEG: an image folder hands JPEGs to the device decoder with the geometry the CPU path uses
// (so the same (seed, sample) crops the same pixels), PNGs and JPEGs the device decoder refuses
// go through the CPU decoder and an upload (counted), a corrupt file fails as it does on the CPU,
// and the loader's device path yields the CPU path's batches. The nvJPEG decoder itself is
// tested on a GPU (tests/trainer/nvjpeg_decoder_gpu_test.cc).
#include <gtest/gtest.h>

#include <atomic>
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

// Decodes on the CPU at full size (what nvJPEG does) with the shared geometry and resampling;
// "device" memory is host memory. `refuse`: every JPEG is UNIMPLEMENTED (as nvJPEG answers for
// CMYK).
class HostDecoder final : public DeviceDecoder {
 public:
  explicit HostDecoder(bool refuse = false) : refuse_(refuse) {}
  Status DecodeJpeg(const uint8_t* bytes, size_t size, const SampleGeometry& geometry, int out_size,
                    const Normalization& norm, float* out) override {
    ++jpegs;
    last_geometry = geometry;
    if (refuse_) return UnimplementedError("host decoder: refused");
    auto image = DecodeImage(bytes, size, 1);
    if (!image.ok()) return DataLossError("host decoder: " + image.status().message());
    CropResizeNormalize(image->pixels.data(), image->width, image->height, image->channels,
                        geometry.box, out_size, out_size, geometry.flip, norm, out);
    return Status::Ok();
  }
  Status Upload(const float* host, size_t floats, float* out) override {
    ++uploads;
    std::memcpy(out, host, floats * sizeof(float));
    return Status::Ok();
  }
  int jpegs = 0, uploads = 0;
  SampleGeometry last_geometry;

 private:
  const bool refuse_;
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

TEST(DeviceDecodeBuild, WithoutAGpuTheNvjpegDecoderIsAPreciseError) {
  auto decoder = CreateNvjpegDecoder(0);
  if (decoder.ok()) GTEST_SKIP() << "a GPU is visible here (the GPU tests cover the decoder)";
  EXPECT_EQ(decoder.status().code(), StatusCode::kFailedPrecondition) << decoder.status();
  EXPECT_NE(decoder.status().message().find("dataset.decode: gpu"), std::string::npos);
}

}  // namespace
}  // namespace retort::trainer::data
