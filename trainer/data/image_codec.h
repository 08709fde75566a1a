// JPEG (libjpeg-turbo) and PNG (libpng) decoding to 8-bit RGB, plus the matching encoders that
// tests and benchmarks use to build image folders. std-only interface; thread-safe (each call
// uses its own or a thread-local codec handle, and a thread-local handle is dropped after any
// failed call, so one corrupt file never affects the next decode on that thread). Errors say
// what was wrong with the data; callers add the file name (Status::WithContext).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/data/image_transforms.h"  // CropBox

namespace retort::trainer::data {

enum class ImageFormat { kUnknown, kJpeg, kPng };

// Recognises the format from the leading magic bytes (not from the file name).
ImageFormat SniffImageFormat(const uint8_t* data, size_t size);

struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0;
  int height = 0;
};

// Reads the header only. DataLoss when the data is not a JPEG/PNG or its header is corrupt.
StatusOr<ImageInfo> ReadImageInfo(const uint8_t* data, size_t size);

// Interleaved 8-bit RGB (channels == 3), row-major.
struct DecodedImage {
  int width = 0;
  int height = 0;
  int channels = 3;
  std::vector<uint8_t> pixels;
};

// Decodes to RGB. For JPEG, `downscale` in {1, 2, 4, 8} asks libjpeg-turbo to decode at
// 1/downscale of the size (DCT-domain scaling, much cheaper than decoding and resizing); the
// result is ceil(width / downscale) x ceil(height / downscale). PNG ignores `downscale` (always
// full size; an alpha channel is dropped without compositing, like PIL's convert("RGB")).
// DataLoss for corrupt or truncated data (libjpeg warnings such as "premature end of
// data" count as corruption: a half-decoded image must not reach training).
StatusOr<DecodedImage> DecodeImage(const uint8_t* data, size_t size, int downscale = 1);

// Dimension of a JPEG decoded with `downscale` (libjpeg-turbo's TJSCALED rounding).
int ScaledJpegDimension(int dimension, int downscale);

// Decodes the part of a JPEG that covers `wanted`, a rectangle of the image as DecodeImage
// would decode it with the same `downscale` (1, 2, 4 or 8): only the rows down to the bottom
// of `wanted` and the iMCU columns across it go through the IDCT, upsampling and colour
// conversion (libjpeg's jpeg_crop_scanline and jpeg_skip_scanlines). The result is a
// rectangle at least as large as `wanted` (widened to iMCU columns and by a margin for the
// chroma upsampling), and `*decoded` receives where it lies in the whole decoded image.
// Contract: every pixel of `wanted` is bit-identical to the same pixel of DecodeImage(data,
// size, downscale); pixels of the result outside `wanted` may differ from it. The rest of the
// entropy-coded data is still read to the end, so the errors are DecodeImage's: DataLoss for
// a corrupt or truncated file (a libjpeg warning counts as corruption) whatever the region.
// A JPEG libjpeg cannot convert to RGB row by row (CMYK, YCCK) takes DecodeImage's path (its
// result is the whole image, `*decoded` says so). InvalidArgument when `wanted` is empty or
// not inside the decoded image, or `downscale` is not 1, 2, 4 or 8.
StatusOr<DecodedImage> DecodeJpegRegion(const uint8_t* data, size_t size, int downscale,
                                        const CropBox& wanted, CropBox* decoded);

// Encoders (JPEG: channels 1 or 3; PNG: 1, 3 or 4 = RGBA). Used to build fixtures and
// benchmark folders.
StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int width, int height, int channels,
                                 int quality);
StatusOr<std::string> EncodePng(const uint8_t* pixels, int width, int height, int channels);

}  // namespace retort::trainer::data
