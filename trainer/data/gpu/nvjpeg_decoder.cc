// The nvJPEG DeviceDecoder (device_decoder.h): nvJPEG's default backend decodes the JPEG into an
// interleaved RGB image in device memory (Huffman decoding on this thread's CPU, the IDCT and
// colour conversion on the GPU), then resample_kernels.cu crops, resizes, mirrors and
// normalises it into the batch row, everything on a stream of this decoder's own; the call
// returns once the stream finished. Grow-only device buffers: steady-state decoding allocates
// nothing. One per decode thread.
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "trainer/data/device_decoder.h"
#include "trainer/data/gpu/resample_kernels.h"

namespace retort::trainer::data {
namespace {

Status CudaFailed(cudaError_t e, const std::string& what) {
  return InternalError("nvjpeg decoder: " + what + ": " + cudaGetErrorString(e));
}

#define RETURN_IF_CUDA(expr, what)                                        \
  do {                                                                    \
    const cudaError_t cuda_error_ = (expr);                               \
    if (cuda_error_ != cudaSuccess) return CudaFailed(cuda_error_, what); \
  } while (0)

// A grow-only device allocation.
class DeviceBytes {
 public:
  ~DeviceBytes() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  Status Reserve(size_t bytes) {
    if (bytes <= size_) return Status::Ok();
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    RETURN_IF_CUDA(cudaMalloc(&ptr_, bytes), "allocating " + std::to_string(bytes) + " bytes");
    size_ = bytes;
    return Status::Ok();
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

class NvjpegDecoder final : public DeviceDecoder {
 public:
  explicit NvjpegDecoder(int device) : device_(device) {}
  ~NvjpegDecoder() override {
    if (state_ != nullptr) nvjpegJpegStateDestroy(state_);
    if (handle_ != nullptr) nvjpegDestroy(handle_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status Init() {
    RETURN_IF_CUDA(cudaSetDevice(device_), "selecting device " + std::to_string(device_));
    RETURN_IF_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                   "creating its stream");
    if (nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &handle_) !=
            NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStateCreate(handle_, &state_) != NVJPEG_STATUS_SUCCESS) {
      return InternalError("nvjpeg decoder: creating the nvJPEG handle on device " +
                           std::to_string(device_) + " failed");
    }
    return Status::Ok();
  }

  Status DecodeJpeg(const uint8_t* bytes, size_t size, const SampleGeometry& geometry, int out_size,
                    const Normalization& norm, float* out) override {
    RETURN_IF_CUDA(cudaSetDevice(device_), "selecting device " + std::to_string(device_));
    int components = 0;
    nvjpegChromaSubsampling_t subsampling = NVJPEG_CSS_UNKNOWN;
    int widths[NVJPEG_MAX_COMPONENT] = {0};
    int heights[NVJPEG_MAX_COMPONENT] = {0};
    if (nvjpegGetImageInfo(handle_, bytes, size, &components, &subsampling, widths, heights) !=
        NVJPEG_STATUS_SUCCESS) {
      return DataLossError("nvjpeg: not a JPEG it can read");
    }
    // Grayscale and CMYK/YCCK stay on the CPU decoder (it converts them to RGB as PIL does).
    if (components != 3 || subsampling == NVJPEG_CSS_UNKNOWN)
      return UnimplementedError("nvjpeg: " + std::to_string(components) +
                                "-component JPEG left to the CPU decoder");
    const int width = widths[0], height = heights[0];
    if (width <= 0 || height <= 0) return DataLossError("nvjpeg: empty image");
    RETORT_RETURN_IF_ERROR(image_.Reserve(static_cast<size_t>(width) * height * 3));
    nvjpegImage_t image{};
    image.channel[0] = image_.as<unsigned char>();
    image.pitch[0] = static_cast<size_t>(width) * 3;
    if (nvjpegDecode(handle_, state_, bytes, size, NVJPEG_OUTPUT_RGBI, &image, stream_) !=
        NVJPEG_STATUS_SUCCESS) {
      return DataLossError("nvjpeg: decoding failed");
    }

    // The CPU path's taps, for the same geometry (full-size image: no DCT downscaling here).
    const CropRegion region = geometry.box;
    const ResampleAxis xs = ResampleTaps(out_size, region.x, region.width, width);
    const ResampleAxis ys = ResampleTaps(out_size, region.y, region.height, height);
    int row_begin = height, row_end = 0;
    for (int o = 0; o < out_size; ++o) {
      row_begin = std::min(row_begin, ys.start[static_cast<size_t>(o)]);
      row_end =
          std::max(row_end, ys.start[static_cast<size_t>(o)] + ys.count[static_cast<size_t>(o)]);
    }
    // One host block for the taps, one copy.
    host_taps_.clear();
    auto append = [&](const auto& v) {
      const size_t at = host_taps_.size();
      const size_t bytes = v.size() * sizeof(v[0]);
      host_taps_.resize(at + bytes);
      std::memcpy(host_taps_.data() + at, v.data(), bytes);
      return at;
    };
    const size_t xs_start = append(xs.start), xs_count = append(xs.count),
                 xs_weights = append(xs.weights), ys_start = append(ys.start),
                 ys_count = append(ys.count), ys_weights = append(ys.weights);
    RETORT_RETURN_IF_ERROR(taps_.Reserve(host_taps_.size()));
    RETURN_IF_CUDA(cudaMemcpyAsync(taps_.as<char>(), host_taps_.data(), host_taps_.size(),
                                   cudaMemcpyHostToDevice, stream_),
                   "uploading the resampling taps");
    const size_t scratch_floats =
        static_cast<size_t>(std::max(row_end - row_begin, 1)) * out_size * 3;
    RETORT_RETURN_IF_ERROR(scratch_.Reserve(scratch_floats * sizeof(float)));

    gpu::ResampleLaunch l;
    l.image = image_.as<uint8_t>();
    l.pitch = width * 3;
    l.row_begin = row_begin;
    l.row_end = row_end;
    l.out_size = out_size;
    const char* taps = taps_.as<char>();
    l.x_start = reinterpret_cast<const int*>(taps + xs_start);
    l.x_count = reinterpret_cast<const int*>(taps + xs_count);
    l.x_weights = reinterpret_cast<const float*>(taps + xs_weights);
    l.x_max_taps = xs.max_taps;
    l.y_start = reinterpret_cast<const int*>(taps + ys_start);
    l.y_count = reinterpret_cast<const int*>(taps + ys_count);
    l.y_weights = reinterpret_cast<const float*>(taps + ys_weights);
    l.y_max_taps = ys.max_taps;
    l.flip = geometry.flip;
    for (int c = 0; c < 3; ++c) {
      l.scale[c] = 1.0f / (255.0f * norm.std[c]);
      l.shift[c] = -norm.mean[c] / norm.std[c];
    }
    l.scratch = scratch_.as<float>();
    l.out = out;
    RETURN_IF_CUDA(gpu::LaunchCropResizeNormalize(l, stream_), "launching the resize kernels");
    // host_taps_ must outlive the asynchronous copy: wait before the next call reuses it.
    RETURN_IF_CUDA(cudaStreamSynchronize(stream_),
                   "decoding a JPEG on device " + std::to_string(device_));
    return Status::Ok();
  }

  Status Upload(const float* host, size_t floats, float* out) override {
    RETURN_IF_CUDA(cudaSetDevice(device_), "selecting device " + std::to_string(device_));
    RETURN_IF_CUDA(
        cudaMemcpyAsync(out, host, floats * sizeof(float), cudaMemcpyHostToDevice, stream_),
        "uploading a CPU-decoded sample");
    RETURN_IF_CUDA(cudaStreamSynchronize(stream_), "uploading a CPU-decoded sample");
    return Status::Ok();
  }

 private:
  const int device_;
  cudaStream_t stream_ = nullptr;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  DeviceBytes image_, taps_, scratch_;
  std::vector<char> host_taps_;
};

}  // namespace

bool NvjpegDecoderBuilt() { return true; }

StatusOr<std::unique_ptr<DeviceDecoder>> CreateNvjpegDecoder(int device) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return FailedPreconditionError("dataset.decode: gpu needs a GPU; none is visible");
  if (device < 0 || device >= devices)
    return FailedPreconditionError("dataset.decode: gpu on cuda:" + std::to_string(device) +
                                   ", but " + std::to_string(devices) + " GPU(s) are visible");
  auto decoder = std::make_unique<NvjpegDecoder>(device);
  RETORT_RETURN_IF_ERROR(decoder->Init());
  return std::unique_ptr<DeviceDecoder>(std::move(decoder));
}

}  // namespace retort::trainer::data
