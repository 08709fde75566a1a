#include "trainer/data/image_codec.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <cstring>
#include <memory>

#include <jpeglib.h>

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

// Starts libpng's simplified read of `data` into `image` (reset first); DATA_LOSS naming
// libpng's reason when the header is corrupt (the image is freed then). On success the caller
// frees `image` with png_image_free or finishes the read.
Status BeginPngRead(const uint8_t* data, size_t size, png_image* image) {
  std::memset(image, 0, sizeof(*image));
  image->version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(image, data, size) != 0) return Status::Ok();
  std::string message = image->message;
  png_image_free(image);
  return DataLossError("corrupt PNG header: " + message);
}

StatusOr<ImageInfo> ReadPngInfo(const uint8_t* data, size_t size) {
  png_image image;
  RETORT_RETURN_IF_ERROR(BeginPngRead(data, size, &image));
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

// Error manager of DecodeJpegRegion, set up as TurboJPEG sets up its own (so the messages and
// the warning rule are DecodeJpeg's): an error formats libjpeg's message and longjmps back to
// the decode; a warning (corrupt or truncated data that libjpeg decodes around) is recorded,
// the first one's message kept, and decoding goes on.
struct JpegErrorManager {
  jpeg_error_mgr pub;  // first member: libjpeg hands back &pub as cinfo->err
  std::jmp_buf jump;
  bool warned = false;
  char message[JMSG_LENGTH_MAX] = {};
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void JpegEmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;  // trace messages
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  if (!err->warned) (*cinfo->err->format_message)(cinfo, err->message);
  err->warned = true;
  ++cinfo->err->num_warnings;
}

// The state of one region decode. It lives in DecodeJpegRegion's frame, outside the frame that
// calls setjmp, so nothing a longjmp skips has a destructor.
struct RegionDecode {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  bool in_header = true;         // where a libjpeg error happened (for the message)
  bool needs_full_path = false;  // a colour space libjpeg cannot convert to RGB
};

// Output rows that one jpeg_read_scanlines call may return (libjpeg's rec_outbuf_height is at
// most 4 for every upsampler libjpeg-turbo has).
constexpr int kRowsPerRead = 8;

// The libjpeg calls of DecodeJpegRegion: decodes rows [request.y, request.y + request.height)
// of the columns jpeg_crop_scanline widens [request.x, request.x + request.width) to, into
// `image`, at scaling factor num/denom; then reads the rest of the entropy-coded data (only
// the last row goes through the IDCT) so every libjpeg warning a full decode raises is raised.
// Returns false after a libjpeg error (message in state->err). Objects with destructors
// (`image`) live in the caller's frame.
bool RunRegionDecode(RegionDecode* state, const uint8_t* data, size_t size, int num, int denom,
                     const CropBox& request, DecodedImage* image, CropBox* decoded) {
  j_decompress_ptr cinfo = &state->cinfo;
  if (setjmp(state->err.jump) != 0) return false;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  if (cinfo->jpeg_color_space != JCS_YCbCr && cinfo->jpeg_color_space != JCS_GRAYSCALE &&
      cinfo->jpeg_color_space != JCS_RGB) {
    state->needs_full_path = true;
    return true;
  }
  state->in_header = false;
  // tjDecompress2's settings for TJPF_RGB and TJFLAG_FASTDCT (fancy upsampling stays on).
  cinfo->out_color_space = JCS_EXT_RGB;
  cinfo->dct_method = JDCT_FASTEST;
  cinfo->scale_num = static_cast<unsigned int>(num);
  cinfo->scale_denom = static_cast<unsigned int>(denom);
  jpeg_start_decompress(cinfo);
  JDIMENSION x = static_cast<JDIMENSION>(request.x);
  JDIMENSION width = static_cast<JDIMENSION>(request.width);
  if (width < cinfo->output_width) jpeg_crop_scanline(cinfo, &x, &width);
  decoded->x = static_cast<int>(x);
  decoded->y = request.y;
  decoded->width = static_cast<int>(cinfo->output_width);
  decoded->height = request.height;
  image->width = decoded->width;
  image->height = decoded->height;
  image->channels = 3;
  const size_t stride = static_cast<size_t>(decoded->width) * 3;
  // One spare row at the end: the image's last row, read below, lands there.
  image->pixels.resize(stride * (static_cast<size_t>(decoded->height) + 1));
  if (request.y > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(request.y));
  const auto bottom = static_cast<JDIMENSION>(request.y + request.height);
  // Each call returns at least one row (memory source: no suspension): height calls at most.
  for (int call = 0; call < request.height && cinfo->output_scanline < bottom; ++call) {
    JSAMPROW rows[kRowsPerRead];
    const JDIMENSION first = cinfo->output_scanline - static_cast<JDIMENSION>(request.y);
    const JDIMENSION n = std::min<JDIMENSION>(kRowsPerRead, bottom - cinfo->output_scanline);
    for (JDIMENSION i = 0; i < n; ++i) rows[i] = image->pixels.data() + (first + i) * stride;
    jpeg_read_scanlines(cinfo, rows, n);
  }
  if (cinfo->output_scanline != bottom) {
    std::snprintf(state->err.message, sizeof(state->err.message), "libjpeg returned %u of %d rows",
                  cinfo->output_scanline - request.y, request.height);
    return false;
  }
  // jpeg_skip_scanlines to the very bottom stops reading the data, so skip to the last row and
  // decode that one.
  if (cinfo->output_scanline + 1 < cinfo->output_height) {
    jpeg_skip_scanlines(cinfo, cinfo->output_height - 1 - cinfo->output_scanline);
  }
  if (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW spare = image->pixels.data() + static_cast<size_t>(decoded->height) * stride;
    jpeg_read_scanlines(cinfo, &spare, 1);
  }
  jpeg_finish_decompress(cinfo);
  image->pixels.resize(stride * static_cast<size_t>(decoded->height));
  return true;
}

// The libjpeg scaling factor tjDecompress2 picks for an output of at most width x height:
// the first of tjGetScalingFactors' list (largest first) that fits.
bool TurboJpegScale(int jpeg_width, int jpeg_height, int width, int height, int* num, int* denom) {
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; factors != nullptr && i < count; ++i) {
    if (TJSCALED(jpeg_width, factors[i]) <= width && TJSCALED(jpeg_height, factors[i]) <= height) {
      *num = factors[i].num;
      *denom = factors[i].denom;
      return true;
    }
  }
  return false;
}

StatusOr<DecodedImage> DecodePng(const uint8_t* data, size_t size) {
  png_image png;
  RETORT_RETURN_IF_ERROR(BeginPngRead(data, size, &png));
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

namespace {

Status NotAnImageError(size_t size) {
  return DataLossError("not a JPEG or PNG image (unrecognised leading bytes, " +
                       std::to_string(size) + " bytes)");
}

// The JPEG decoder's scale factors (1/downscale).
Status CheckDownscale(int downscale) {
  if (downscale == 1 || downscale == 2 || downscale == 4 || downscale == 8) return Status::Ok();
  return InvalidArgumentError("downscale must be 1, 2, 4 or 8, got " + std::to_string(downscale));
}

}  // namespace

StatusOr<ImageInfo> ReadImageInfo(const uint8_t* data, size_t size) {
  switch (SniffImageFormat(data, size)) {
    case ImageFormat::kJpeg:
      return ReadJpegInfo(data, size);
    case ImageFormat::kPng:
      return ReadPngInfo(data, size);
    case ImageFormat::kUnknown:
      break;
  }
  return NotAnImageError(size);
}

int ScaledJpegDimension(int dimension, int downscale) {
  // TJSCALED(dim, {1, downscale}) = ceil(dim / downscale).
  return (dimension + downscale - 1) / downscale;
}

StatusOr<DecodedImage> DecodeImage(const uint8_t* data, size_t size, int downscale) {
  RETORT_RETURN_IF_ERROR(CheckDownscale(downscale));
  switch (SniffImageFormat(data, size)) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(data, size, downscale);
    case ImageFormat::kPng:
      return DecodePng(data, size);
    case ImageFormat::kUnknown:
      break;
  }
  return NotAnImageError(size);
}

StatusOr<DecodedImage> DecodeJpegRegion(const uint8_t* data, size_t size, int downscale,
                                        const CropBox& wanted, CropBox* decoded) {
  RETORT_RETURN_IF_ERROR(CheckDownscale(downscale));
  // The header through TurboJPEG first: its errors (and the thread handle's reset) are
  // DecodeJpeg's.
  RETORT_ASSIGN_OR_RETURN(ImageInfo info, ReadJpegInfo(data, size));
  const int width = ScaledJpegDimension(info.width, downscale);
  const int height = ScaledJpegDimension(info.height, downscale);
  if (wanted.width <= 0 || wanted.height <= 0 || wanted.x < 0 || wanted.y < 0 ||
      wanted.x + wanted.width > width || wanted.y + wanted.height > height) {
    return InvalidArgumentError("JPEG region " + std::to_string(wanted.width) + "x" +
                                std::to_string(wanted.height) + "+" + std::to_string(wanted.x) +
                                "+" + std::to_string(wanted.y) + " is not inside the " +
                                std::to_string(width) + "x" + std::to_string(height) + " image");
  }
  int num = 0;
  int denom = 0;
  if (!TurboJpegScale(info.width, info.height, width, height, &num, &denom)) {
    return InternalError("jpeg: no scaling factor gives " + std::to_string(width) + "x" +
                         std::to_string(height));
  }
  // Fancy (smoothing) upsampling of horizontally subsampled chroma (4:2:0, 4:2:2, also under
  // DCT scaling where libjpeg cannot scale the chroma up instead) replicates the edge samples
  // of a cropped row instead of reading their neighbours, so the first and last column of a
  // crop can differ from the full decode; rows are exact (jpeg_skip_scanlines keeps the
  // upsampler's context rows). One pixel of margin suffices (image_codec_region_test covers
  // 4:2:0/4:2:2/4:4:4/4:4:0/4:1:1/gray/progressive at every downscale); two are kept on
  // every side.
  constexpr int kMargin = 2;
  CropBox request;
  request.x = std::max(0, wanted.x - kMargin);
  request.y = std::max(0, wanted.y - kMargin);
  request.width = std::min(width, wanted.x + wanted.width + kMargin) - request.x;
  request.height = std::min(height, wanted.y + wanted.height + kMargin) - request.y;

  RegionDecode state;
  std::memset(&state.cinfo, 0, sizeof(state.cinfo));
  state.cinfo.err = jpeg_std_error(&state.err.pub);
  state.err.pub.error_exit = JpegErrorExit;
  state.err.pub.emit_message = JpegEmitMessage;
  DecodedImage image;
  const bool ok = RunRegionDecode(&state, data, size, num, denom, request, &image, decoded);
  jpeg_destroy_decompress(&state.cinfo);  // also aborts a decode an error left half done
  if (!ok && state.in_header)
    return DataLossError(std::string("corrupt JPEG header: ") + state.err.message);
  if (!ok || state.err.warned) {
    return DataLossError(std::string("corrupt JPEG data") +
                         (state.err.warned ? " (decoder warning)" : "") + ": " + state.err.message);
  }
  if (state.needs_full_path) {
    RETORT_ASSIGN_OR_RETURN(image, DecodeJpeg(data, size, downscale));
    *decoded = CropBox{0, 0, image.width, image.height};
  }
  return image;
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
