#include "trainer/data/image_codec.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>

namespace retort::trainer::data {
namespace {

struct TjHandleDeleter {
  void operator()(void* handle) const {
    if (handle != nullptr) tjDestroy(handle);
  }
};
using TjHandle = std::unique_ptr<void, TjHandleDeleter>;

// One decompressor per thread: tjInitDecompress allocates, and decode threads are long-lived.
//
// A handle must not outlive a failed call. When tjDecompressHeader3 fails (libjpeg-turbo 2.1
// longjmps out of jpeg_read_header and returns without jpeg_abort_decompress), libjpeg's
// global_state stays DSTATE_INHEADER and the marker reader keeps the failed stream's state: the
// next header read on that handle then reports a valid image as 0x0 ("empty dimensions") or
// repeats the old error for every later file. Which valid files hit this depends on which
// decode thread read a corrupt file just before, so the skipped set changed between runs.
// Every failure therefore discards the thread's handle; the next call starts from a fresh one.
class ThreadDecompressor {
 public:
  // The calling thread's handle (created on first use or after Discard()); null when
  // tjInitDecompress fails.
  static tjhandle Get() {
    if (!handle_) handle_.reset(tjInitDecompress());
    return handle_.get();
  }
  // Drops the calling thread's handle after a failed call on it.
  static void Discard() { handle_.reset(); }

 private:
  static thread_local TjHandle handle_;
};
thread_local TjHandle ThreadDecompressor::handle_;

std::string TjError(tjhandle handle) { return tjGetErrorStr2(handle); }

StatusOr<ImageInfo> ReadJpegInfo(const uint8_t* data, size_t size) {
  tjhandle tj = ThreadDecompressor::Get();
  if (tj == nullptr) return InternalError("jpeg: tjInitDecompress failed");
  int width = 0;
  int height = 0;
  int subsamp = 0;
  int colorspace = 0;
  if (tjDecompressHeader3(tj, data, static_cast<unsigned long>(size), &width, &height, &subsamp,
                          &colorspace) != 0) {
    std::string message = "corrupt JPEG header: " + TjError(tj);
    ThreadDecompressor::Discard();
    return DataLossError(message);
  }
  if (width <= 0 || height <= 0) {
    // tjDecompressHeader3 returns success without dimensions when the data ends (or holds an
    // EOI marker) before the frame header: a tables-only or truncated stream.
    ThreadDecompressor::Discard();
    return DataLossError("JPEG header has empty dimensions (" + std::to_string(width) + "x" +
                         std::to_string(height) + "): the data ends before the frame header");
  }
  return ImageInfo{ImageFormat::kJpeg, width, height};
}

StatusOr<ImageInfo> ReadPngInfo(const uint8_t* data, size_t size) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&image, data, size) == 0) {
    std::string message = image.message;
    png_image_free(&image);
    return DataLossError("corrupt PNG header: " + message);
  }
  ImageInfo info{ImageFormat::kPng, static_cast<int>(image.width), static_cast<int>(image.height)};
  png_image_free(&image);
  return info;
}

StatusOr<DecodedImage> DecodeJpeg(const uint8_t* data, size_t size, int downscale) {
  RETORT_ASSIGN_OR_RETURN(ImageInfo info, ReadJpegInfo(data, size));
  tjhandle tj = ThreadDecompressor::Get();
  if (tj == nullptr) return InternalError("jpeg: tjInitDecompress failed");
  DecodedImage image;
  image.width = ScaledJpegDimension(info.width, downscale);
  image.height = ScaledJpegDimension(info.height, downscale);
  image.channels = 3;
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * 3);
  // TJFLAG_FASTDCT: the integer IDCT (what torchvision/PIL use by default as well).
  if (tjDecompress2(tj, data, static_cast<unsigned long>(size), image.pixels.data(), image.width,
                    0 /* pitch: tight */, image.height, TJPF_RGB, TJFLAG_FASTDCT) != 0) {
    std::string message = std::string("corrupt JPEG data") +
                          (tjGetErrorCode(tj) == TJERR_WARNING ? " (decoder warning)" : "") + ": " +
                          TjError(tj);
    ThreadDecompressor::Discard();
    return DataLossError(message);
  }
  return image;
}

StatusOr<DecodedImage> DecodePng(const uint8_t* data, size_t size) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&png, data, size) == 0) {
    std::string message = png.message;
    png_image_free(&png);
    return DataLossError("corrupt PNG header: " + message);
  }
  // Images with transparency are read as RGBA and the alpha channel is dropped without
  // compositing, which is what PIL's convert("RGB") (torchvision's ImageFolder loader) does.
  const bool has_alpha = (png.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  png.format = has_alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  DecodedImage image;
  image.width = static_cast<int>(png.width);
  image.height = static_cast<int>(png.height);
  image.channels = 3;
  image.pixels.resize(PNG_IMAGE_SIZE(png));
  if (png_image_finish_read(&png, nullptr, image.pixels.data(), 0 /* row stride: tight */,
                            nullptr) == 0) {
    std::string message = png.message;
    png_image_free(&png);
    return DataLossError("corrupt PNG data: " + message);
  }
  if (has_alpha) {
    const size_t n = static_cast<size_t>(image.width) * image.height;
    for (size_t i = 0; i < n; ++i) {
      for (int c = 0; c < 3; ++c) image.pixels[3 * i + c] = image.pixels[4 * i + c];
    }
    image.pixels.resize(3 * n);
  }
  return image;
}

}  // namespace

ImageFormat SniffImageFormat(const uint8_t* data, size_t size) {
  static const uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::kJpeg;
  if (size >= 8 && std::memcmp(data, kPngMagic, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

StatusOr<ImageInfo> ReadImageInfo(const uint8_t* data, size_t size) {
  switch (SniffImageFormat(data, size)) {
    case ImageFormat::kJpeg:
      return ReadJpegInfo(data, size);
    case ImageFormat::kPng:
      return ReadPngInfo(data, size);
    case ImageFormat::kUnknown:
      break;
  }
  return DataLossError("not a JPEG or PNG image (unrecognised leading bytes, " +
                       std::to_string(size) + " bytes)");
}

int ScaledJpegDimension(int dimension, int downscale) {
  // TJSCALED(dim, {1, downscale}) = ceil(dim / downscale).
  return (dimension + downscale - 1) / downscale;
}

StatusOr<DecodedImage> DecodeImage(const uint8_t* data, size_t size, int downscale) {
  if (downscale != 1 && downscale != 2 && downscale != 4 && downscale != 8) {
    return InvalidArgumentError("downscale must be 1, 2, 4 or 8, got " + std::to_string(downscale));
  }
  switch (SniffImageFormat(data, size)) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(data, size, downscale);
    case ImageFormat::kPng:
      return DecodePng(data, size);
    case ImageFormat::kUnknown:
      break;
  }
  return DataLossError("not a JPEG or PNG image (unrecognised leading bytes, " +
                       std::to_string(size) + " bytes)");
}

StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int width, int height, int channels,
                                 int quality) {
  if (channels != 1 && channels != 3)
    return InvalidArgumentError("EncodeJpeg: channels must be 1 or 3");
  TjHandle tj(tjInitCompress());
  if (!tj) return InternalError("jpeg: tjInitCompress failed");
  unsigned char* buffer = nullptr;
  unsigned long buffer_size = 0;
  const int format = channels == 3 ? TJPF_RGB : TJPF_GRAY;
  const int subsamp = channels == 3 ? TJSAMP_420 : TJSAMP_GRAY;
  if (tjCompress2(tj.get(), pixels, width, 0, height, format, &buffer, &buffer_size, subsamp,
                  quality, 0) != 0) {
    std::string message = TjError(tj.get());
    tjFree(buffer);
    return InternalError("jpeg encode failed: " + message);
  }
  std::string out(reinterpret_cast<const char*>(buffer), buffer_size);
  tjFree(buffer);
  return out;
}

StatusOr<std::string> EncodePng(const uint8_t* pixels, int width, int height, int channels) {
  if (channels != 1 && channels != 3 && channels != 4) {
    return InvalidArgumentError("EncodePng: channels must be 1, 3 or 4");
  }
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(width);
  png.height = static_cast<png_uint_32>(height);
  png.format = channels == 4 ? PNG_FORMAT_RGBA : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  png_alloc_size_t size = 0;
  if (png_image_write_to_memory(&png, nullptr, &size, 0, pixels, 0, nullptr) == 0) {
    return InternalError(std::string("png encode (size) failed: ") + png.message);
  }
  std::string out(size, '\0');
  if (png_image_write_to_memory(&png, out.data(), &size, 0, pixels, 0, nullptr) == 0) {
    return InternalError(std::string("png encode failed: ") + png.message);
  }
  out.resize(size);
  return out;
}

}  // namespace retort::trainer::data
