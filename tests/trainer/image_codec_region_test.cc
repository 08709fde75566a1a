// DecodeJpegRegion against DecodeImage: the pixels of the wanted rectangle must be bit-identical
// to the full decode's for every subsampling, size, downscale and position, and the errors must
// be the full decode's. Then ImageFolderDataset::Get (which decodes only the region its
// resampler reads) against a full-decode reference.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "tests/trainer/data_test_util.h"
#include "trainer/data/image_codec.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/image_transforms.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

// Gradients plus per-pixel noise in every channel, so chroma changes from sample to sample and
// any difference in chroma upsampling at a region's edge shows in the pixels.
std::vector<uint8_t> NoisyImage(int w, int h, int channels, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<uint8_t> p(static_cast<size_t>(w) * h * channels);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        const int base = c == 0   ? 255 * x / std::max(1, w - 1)
                         : c == 1 ? 255 * y / std::max(1, h - 1)
                                  : static_cast<int>(128 + 100 * std::sin(x * 0.07 + y * 0.05));
        const int noise = static_cast<int>(rng.Next() % 64) - 32;
        p[(static_cast<size_t>(y) * w + x) * channels + c] =
            static_cast<uint8_t>(std::clamp(base + noise, 0, 255));
      }
    }
  }
  return p;
}

struct JpegFixture {
  std::string name;
  int width;
  int height;
  int subsamp;  // TJSAMP_*
  bool progressive;
};

// TurboJPEG directly: EncodeJpeg always writes 4:2:0 (or grayscale).
std::string EncodeFixture(const JpegFixture& f, int quality = 90) {
  const bool gray = f.subsamp == TJSAMP_GRAY;
  const std::vector<uint8_t> pixels = NoisyImage(f.width, f.height, gray ? 1 : 3, 7);
  tjhandle tj = tjInitCompress();
  EXPECT_NE(tj, nullptr);
  if (tj == nullptr) return std::string();
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const int rc =
      tjCompress2(tj, pixels.data(), f.width, 0, f.height, gray ? TJPF_GRAY : TJPF_RGB, &buffer,
                  &size, f.subsamp, quality, f.progressive ? TJFLAG_PROGRESSIVE : 0);
  EXPECT_EQ(rc, 0) << f.name << ": " << tjGetErrorStr2(tj);
  std::string out = rc == 0 ? std::string(reinterpret_cast<const char*>(buffer), size) : "";
  tjFree(buffer);
  tjDestroy(tj);
  return out;
}

std::vector<JpegFixture> Fixtures() {
  return {
      {"420_500x375", 500, 375, TJSAMP_420, false},
      {"420_odd_333x251", 333, 251, TJSAMP_420, false},
      {"422_301x203", 301, 203, TJSAMP_422, false},
      {"444_97x61", 97, 61, TJSAMP_444, false},
      {"440_255x129", 255, 129, TJSAMP_440, false},
      {"411_301x117", 301, 117, TJSAMP_411, false},
      {"gray_190x143", 190, 143, TJSAMP_GRAY, false},
      {"420_progressive_257x193", 257, 193, TJSAMP_420, true},
      {"420_tiny_9x7", 9, 7, TJSAMP_420, false},
  };
}

// Rectangles of a width x height image: the whole image, its corners and edges, thin strips
// and single pixels, and random boxes.
std::vector<CropBox> TestRects(int width, int height, uint64_t seed) {
  std::vector<CropBox> rects = {
      {0, 0, width, height},
      {0, 0, std::min(width, 17), std::min(height, 13)},
      {width - std::min(width, 19), height - std::min(height, 11), std::min(width, 19),
       std::min(height, 11)},
      {width - 1, 0, 1, height},
      {0, height - 1, width, 1},
      {width / 2, height / 2, 1, 1},
  };
  // Boxes starting on iMCU boundaries (8/16 pixels) and just after them.
  for (int x : {8, 16, 17, 32}) {
    for (int y : {8, 16, 15}) {
      if (x < width && y < height) rects.push_back({x, y, std::min(width - x, 21), height - y});
    }
  }
  SplitMix64 rng(seed);
  for (int i = 0; i < 24; ++i) {
    const int w = 1 + static_cast<int>(rng.Next() % static_cast<uint64_t>(width));
    const int h = 1 + static_cast<int>(rng.Next() % static_cast<uint64_t>(height));
    const int x = static_cast<int>(rng.Next() % static_cast<uint64_t>(width - w + 1));
    const int y = static_cast<int>(rng.Next() % static_cast<uint64_t>(height - h + 1));
    rects.push_back({x, y, w, h});
  }
  return rects;
}

// Pixels of `wanted` that differ between the full decode and the region decode.
int CountDifferences(const DecodedImage& full, const DecodedImage& region, const CropBox& decoded,
                     const CropBox& wanted) {
  int differing = 0;
  for (int y = wanted.y; y < wanted.y + wanted.height; ++y) {
    for (int x = wanted.x; x < wanted.x + wanted.width; ++x) {
      const uint8_t* a = &full.pixels[(static_cast<size_t>(y) * full.width + x) * 3];
      const uint8_t* b =
          &region.pixels[(static_cast<size_t>(y - decoded.y) * region.width + (x - decoded.x)) * 3];
      differing += (a[0] != b[0] || a[1] != b[1] || a[2] != b[2]) ? 1 : 0;
    }
  }
  return differing;
}

TEST(ImageCodecRegion, RegionPixelsAreBitIdenticalToTheFullDecode) {
  int compared = 0;
  for (const JpegFixture& f : Fixtures()) {
    const std::string jpeg = EncodeFixture(f);
    ASSERT_FALSE(jpeg.empty()) << f.name;
    const auto* data = reinterpret_cast<const uint8_t*>(jpeg.data());
    for (int downscale : {1, 2, 4, 8}) {
      StatusOr<DecodedImage> full = DecodeImage(data, jpeg.size(), downscale);
      ASSERT_TRUE(full.ok()) << f.name << ": " << full.status();
      for (const CropBox& wanted : TestRects(full->width, full->height, 11)) {
        CropBox decoded;
        StatusOr<DecodedImage> region =
            DecodeJpegRegion(data, jpeg.size(), downscale, wanted, &decoded);
        const std::string where = f.name + " downscale " + std::to_string(downscale) + " rect " +
                                  std::to_string(wanted.width) + "x" +
                                  std::to_string(wanted.height) + "+" + std::to_string(wanted.x) +
                                  "+" + std::to_string(wanted.y);
        ASSERT_TRUE(region.ok()) << where << ": " << region.status();
        ASSERT_EQ(region->width, decoded.width) << where;
        ASSERT_EQ(region->height, decoded.height) << where;
        ASSERT_EQ(region->pixels.size(), static_cast<size_t>(decoded.width) * decoded.height * 3);
        ASSERT_TRUE(decoded.x <= wanted.x && decoded.y <= wanted.y &&
                    decoded.x + decoded.width >= wanted.x + wanted.width &&
                    decoded.y + decoded.height >= wanted.y + wanted.height &&
                    decoded.x + decoded.width <= full->width &&
                    decoded.y + decoded.height <= full->height)
            << where << ": decoded " << decoded.width << "x" << decoded.height << "+" << decoded.x
            << "+" << decoded.y;
        EXPECT_EQ(CountDifferences(*full, *region, decoded, wanted), 0) << where;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 1000);
}

TEST(ImageCodecRegion, RegionAboveTheDamageStillFailsLikeTheFullDecode) {
  const JpegFixture f{"420", 320, 240, TJSAMP_420, false};
  const std::string jpeg = EncodeFixture(f);
  ASSERT_FALSE(jpeg.empty());
  // Truncated at 70%: the full decode warns "premature end of data"; the top rows are intact.
  const std::string truncated = jpeg.substr(0, jpeg.size() * 7 / 10);
  const auto* data = reinterpret_cast<const uint8_t*>(truncated.data());
  StatusOr<DecodedImage> full = DecodeImage(data, truncated.size(), 1);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kDataLoss) << full.status();
  CropBox decoded;
  StatusOr<DecodedImage> region =
      DecodeJpegRegion(data, truncated.size(), 1, CropBox{10, 5, 50, 20}, &decoded);
  ASSERT_FALSE(region.ok());
  EXPECT_EQ(region.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(region.status().message(), full.status().message());

  // Not a JPEG at all: the header error of the full decode.
  const std::string text = "\xFF\xD8\xFF this is not really a JPEG";
  const auto* text_data = reinterpret_cast<const uint8_t*>(text.data());
  StatusOr<DecodedImage> full_text = DecodeImage(text_data, text.size(), 1);
  StatusOr<DecodedImage> region_text =
      DecodeJpegRegion(text_data, text.size(), 1, CropBox{0, 0, 1, 1}, &decoded);
  ASSERT_FALSE(full_text.ok());
  ASSERT_FALSE(region_text.ok());
  EXPECT_EQ(region_text.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(region_text.status().message(), full_text.status().message());
}

TEST(ImageCodecRegion, CmykTakesTheFullDecodePath) {
  const int w = 40;
  const int h = 24;
  const std::vector<uint8_t> cmyk = NoisyImage(w, h, 4, 3);
  tjhandle tj = tjInitCompress();
  ASSERT_NE(tj, nullptr);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(tj, cmyk.data(), w, 0, h, TJPF_CMYK, &buffer, &size, TJSAMP_444, 90, 0), 0)
      << tjGetErrorStr2(tj);
  const std::string jpeg(reinterpret_cast<const char*>(buffer), size);
  tjFree(buffer);
  tjDestroy(tj);
  const auto* data = reinterpret_cast<const uint8_t*>(jpeg.data());
  StatusOr<DecodedImage> full = DecodeImage(data, jpeg.size(), 1);
  CropBox decoded;
  StatusOr<DecodedImage> region = DecodeJpegRegion(data, jpeg.size(), 1, {5, 5, 10, 10}, &decoded);
  ASSERT_EQ(region.ok(), full.ok()) << region.status() << " vs " << full.status();
  if (full.ok()) {
    EXPECT_EQ(decoded.width, full->width);
    EXPECT_EQ(decoded.height, full->height);
    EXPECT_EQ(region->pixels, full->pixels);
  } else {
    EXPECT_EQ(region.status().message(), full.status().message());
  }
}

TEST(ImageCodecRegion, RegionsOutsideTheImageAreInvalidArguments) {
  const std::string jpeg = EncodeFixture({"420", 64, 48, TJSAMP_420, false});
  const auto* data = reinterpret_cast<const uint8_t*>(jpeg.data());
  CropBox decoded;
  for (const CropBox& bad :
       {CropBox{0, 0, 0, 5}, CropBox{-1, 0, 5, 5}, CropBox{60, 0, 5, 5}, CropBox{0, 40, 5, 9}}) {
    EXPECT_EQ(DecodeJpegRegion(data, jpeg.size(), 1, bad, &decoded).status().code(),
              StatusCode::kInvalidArgument);
  }
  // 64x48 at 1/2 is 32x24.
  EXPECT_EQ(DecodeJpegRegion(data, jpeg.size(), 2, {0, 0, 33, 1}, &decoded).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeJpegRegion(data, jpeg.size(), 3, {0, 0, 1, 1}, &decoded).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ImageCodecRegion, WindowedResampleMatchesTheWholeImage) {
  const int w = 123;
  const int h = 77;
  const std::vector<uint8_t> image = NoisyImage(w, h, 3, 5);
  const Normalization norm = ImageNetNormalization();
  SplitMix64 rng(9);
  for (int i = 0; i < 40; ++i) {
    const CropBox box = RandomResizedCropBox(w, h, RandomResizedCropOptions(), rng);
    const int out = i % 2 == 0 ? 16 : 200;  // shrinking and enlarging
    const bool flip = i % 3 == 0;
    const ResamplePlan plan = PlanResample(w, h, box, out, out);
    const CropBox src = plan.source;
    ASSERT_TRUE(src.x <= box.x && src.y <= box.y && src.x + src.width >= box.x + box.width &&
                src.y + src.height >= box.y + box.height && src.x >= 0 && src.y >= 0 &&
                src.x + src.width <= w && src.y + src.height <= h);
    std::vector<uint8_t> window(static_cast<size_t>(src.width) * src.height * 3);
    for (int y = 0; y < src.height; ++y) {
      std::copy_n(&image[(static_cast<size_t>(src.y + y) * w + src.x) * 3],
                  static_cast<size_t>(src.width) * 3,
                  &window[static_cast<size_t>(y) * src.width * 3]);
    }
    std::vector<float> whole(3 * static_cast<size_t>(out) * out);
    std::vector<float> windowed(whole.size());
    CropResizeNormalize(image.data(), w, h, 3, box, out, out, flip, norm, whole.data());
    CropResizeNormalizeWindow(window.data(), src, 3, plan, flip, norm, windowed.data());
    EXPECT_EQ(whole, windowed) << "crop " << i;
  }
}

// The CPU path of ImageFolderDataset (DCT-scaled or not) against a reference that decodes the
// whole image and resamples it as the path did before it decoded regions.
TEST(ImageCodecRegion, ImageFolderOutputMatchesTheFullDecodeReference) {
  TempDir dir;
  const std::vector<JpegFixture> fixtures = Fixtures();
  std::vector<std::string> files;
  for (size_t i = 0; i < fixtures.size(); ++i) {
    const std::string path = dir.Sub("c/" + std::to_string(10 + i) + ".jpg");
    WriteFile(path, EncodeFixture(fixtures[i]));
    files.push_back(path);
  }
  const std::vector<uint8_t> png_pixels = NoisyImage(50, 40, 3, 1);
  StatusOr<std::string> png = EncodePng(png_pixels.data(), 50, 40, 3);
  ASSERT_TRUE(png.ok());
  WriteFile(dir.Sub("c/99.png"), *png);
  files.push_back(dir.Sub("c/99.png"));

  for (bool dct_scaling : {true, false}) {
    for (int image_size : {24, 96}) {
      ImageFolderOptions options;
      options.root = dir.path();
      options.image_size = image_size;
      options.jpeg_dct_scaling = dct_scaling;
      auto ds = ImageFolderDataset::Open(options);
      ASSERT_TRUE(ds.ok()) << ds.status();
      ASSERT_EQ((*ds)->size(), static_cast<int64_t>(files.size()));
      const size_t floats = 3 * static_cast<size_t>(image_size) * image_size;
      std::vector<float> got(floats);
      std::vector<float> want(floats);
      for (size_t index = 0; index < files.size(); ++index) {
        std::string bytes;
        {
          std::ifstream in(files[index], std::ios::binary);
          bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        }
        const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
        StatusOr<ImageInfo> info = ReadImageInfo(data, bytes.size());
        ASSERT_TRUE(info.ok()) << info.status();
        for (uint64_t seed = 0; seed < 12; ++seed) {
          int64_t label = -1;
          ASSERT_TRUE((*ds)->Get(static_cast<int64_t>(index), seed, got.data(), &label).ok());
          // Reference: image_folder.cc's geometry and downscale rule, whole-image decode.
          const SampleGeometry g =
              ChooseSampleGeometry(info->width, info->height, seed, options.crop,
                                   options.horizontal_flip, options.eval_crop_fraction);
          int downscale = 1;
          if (info->format == ImageFormat::kJpeg && dct_scaling) {
            for (int d : {8, 4, 2}) {
              if (g.box.width / d >= image_size && g.box.height / d >= image_size) {
                downscale = d;
                break;
              }
            }
          }
          StatusOr<DecodedImage> full = DecodeImage(data, bytes.size(), downscale);
          ASSERT_TRUE(full.ok()) << full.status();
          const CropRegion region =
              CropRegion(g.box).Scaled(static_cast<double>(full->width) / info->width,
                                       static_cast<double>(full->height) / info->height);
          CropResizeNormalize(full->pixels.data(), full->width, full->height, full->channels,
                              downscale == 1 ? CropRegion(g.box) : region, image_size, image_size,
                              g.flip, ImageNetNormalization(), want.data());
          EXPECT_EQ(got, want) << files[index] << " seed " << seed << " size " << image_size
                               << " dct " << dct_scaling;
        }
      }
    }
  }
}

}  // namespace
}  // namespace retort::trainer::data
