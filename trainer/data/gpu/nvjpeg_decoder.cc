// The nvJPEG DeviceDecoder (device_decoder.h): nvJPEG's default backend decodes the JPEG into an
// interleaved RGB image in device memory (Huffman decoding on this thread's CPU, the IDCT and
// colour conversion on the GPU), then resample_kernels.cu crops, resizes, mirrors and
// normalises it into the batch row, everything on a stream of this decoder's own; the call
// returns once the stream finished. DecodeJpegBatch decodes the JPEGs the batched decoder takes
// with one nvjpegDecodeBatched call on a second handle: the hardware JPEG decoder where the GPU
// has one (NVJPEG_BACKEND_HARDWARE, e.g. A100, H100), else GPU-assisted Huffman decoding
// (NVJPEG_BACKEND_GPU_HYBRID), else the default backend; then one resample per image and one
// stream synchronisation. Device memory, nvJPEG's own included (nvjpegCreateExV2 with a
// stream-ordered allocator), comes from LibTorch's CUDA caching allocator on this decoder's
// stream: no cudaMalloc / cudaFree in steady state (cudaFree synchronises the whole device, the
// training step and NCCL included), and what a call needs (one image, or one block for the
// whole batch sized by its images, the taps, the scratch) is taken for the call and given back
// at its end, so memory is shared with training instead of held per batch position at the
// largest image ever seen. nvJPEG's pinned host buffers come from LibTorch's caching host
// allocator likewise (PinnedBlocks). The decoder's stream waits for the batch's allocation
// event before it writes a row (OrderAfter, device_decoder.h). One per decode thread, used by
// that thread only.
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "trainer/data/device_decoder.h"
#include "trainer/data/gpu/resample_kernels.h"

namespace retort::trainer::data {
namespace {

Status CudaFailed(cudaError_t e, const std::string& what) {
  return InternalError("nvjpeg decoder: " + what + ": " + cudaGetErrorString(e));
}

// Flags of every nvJPEG handle: chroma upsampled by interpolation, as libjpeg-turbo's "fancy"
// upsampling the CPU path uses (the default replicates chroma samples: about 6 levels of mean
// error against the CPU decode at quality 90, 4:2:0), and strict bitstream checks, so a corrupt
// JPEG fails here and takes the CPU path's verdict instead of decoding to garbage.
constexpr unsigned kNvjpegFlags =
#ifdef NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION
    NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION |
#endif
#ifdef NVJPEG_FLAGS_BITSTREAM_STRICT
    NVJPEG_FLAGS_BITSTREAM_STRICT |
#endif
    0u;

#define RETURN_IF_CUDA(expr, what)                                        \
  do {                                                                    \
    const cudaError_t cuda_error_ = (expr);                               \
    if (cuda_error_ != cudaSuccess) return CudaFailed(cuda_error_, what); \
  } while (0)

// Device memory from LibTorch's caching allocator, for use on one stream (a block given back is
// reused by later allocations on that stream only, so stream order keeps it safe without a
// synchronisation). Call-scoped: taken by Allocate, given back by the destructor or Reset.
class CachedDeviceBytes {
 public:
  CachedDeviceBytes() = default;
  CachedDeviceBytes(const CachedDeviceBytes&) = delete;
  CachedDeviceBytes& operator=(const CachedDeviceBytes&) = delete;
  ~CachedDeviceBytes() { Reset(); }
  void Reset() {
    if (ptr_ != nullptr) c10::cuda::CUDACachingAllocator::raw_delete(ptr_);
    ptr_ = nullptr;
  }
  Status Allocate(size_t bytes, cudaStream_t stream) {
    Reset();
    try {
      ptr_ = c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(std::max<size_t>(bytes, 1),
                                                                    stream);
    } catch (const std::exception& e) {
      return ResourceExhaustedError("nvjpeg decoder: allocating " + std::to_string(bytes) +
                                    " bytes: " + e.what());
    }
    return Status::Ok();
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

// nvJPEG's device allocations (its decode state's buffers) through the caching allocator, in the
// stream order nvJPEG states. Returns 0 on success, as nvJPEG expects.
int NvjpegDeviceMalloc(void*, void** ptr, size_t size, cudaStream_t stream) {
  try {
    *ptr =
        size == 0 ? nullptr : c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(size, stream);
    return 0;
  } catch (...) {
    return 1;
  }
}
int NvjpegDeviceFree(void*, void* ptr, size_t, cudaStream_t) {
  try {
    if (ptr != nullptr) c10::cuda::CUDACachingAllocator::raw_delete(ptr);
    return 0;
  } catch (...) {
    return 1;
  }
}
nvjpegDevAllocatorV2_t kNvjpegDeviceAllocator{&NvjpegDeviceMalloc, &NvjpegDeviceFree, nullptr};

// nvJPEG's pinned host buffers (the staging of its Huffman output, which it grows with the
// largest image seen) through LibTorch's caching host allocator instead of nvJPEG's default,
// which calls cudaHostAlloc / cudaFreeHost each time a buffer grows: cudaFreeHost waits for the
// whole device, the training step and NCCL included. A block nvJPEG frees goes back to the
// cache with an event on the stream nvJPEG names, so it is handed out again (to nvJPEG or to a
// pinned batch) only once that stream's copies from it are done. One per decoder, shared by
// its handles; nvJPEG calls it from the decoder's thread.
class PinnedBlocks {
 public:
  explicit PinnedBlocks(int device) : device_(device) {}
  // nvJPEG's callbacks (ctx: the PinnedBlocks); 0 on success, as nvJPEG expects.
  static int Malloc(void* ctx, void** ptr, size_t size, cudaStream_t) {
    auto* self = static_cast<PinnedBlocks*>(ctx);
    try {
      *ptr = nullptr;
      if (size == 0) return 0;
      at::DataPtr block = at::getHostAllocator(at::kCUDA)->allocate(size);
      if (block.get() == nullptr) return 1;
      *ptr = block.get();
      std::lock_guard<std::mutex> lock(self->mu_);
      self->blocks_.emplace(*ptr, std::move(block));
      return 0;
    } catch (...) {
      return 1;
    }
  }
  static int Free(void* ctx, void* ptr, size_t, cudaStream_t stream) {
    auto* self = static_cast<PinnedBlocks*>(ctx);
    if (ptr == nullptr) return 0;
    at::DataPtr block;
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      auto it = self->blocks_.find(ptr);
      if (it == self->blocks_.end()) return 1;
      block = std::move(it->second);
      self->blocks_.erase(it);
    }
    try {
      const auto index = static_cast<c10::DeviceIndex>(self->device_);
      const c10::cuda::CUDAStream on = stream == nullptr
                                           ? c10::cuda::getDefaultCUDAStream(index)
                                           : c10::cuda::getStreamFromExternal(stream, index);
      at::getHostAllocator(at::kCUDA)->record_event(block.get(), block.get_context(), on.unwrap());
    } catch (...) {
      return 1;  // the block still goes back (below); nvJPEG reports the failure
    }
    return 0;  // `block` goes back to the cache here
  }
  nvjpegPinnedAllocatorV2_t* allocator() { return &allocator_; }

 private:
  const int device_;
  nvjpegPinnedAllocatorV2_t allocator_{&PinnedBlocks::Malloc, &PinnedBlocks::Free, this};
  std::mutex mu_;
  std::unordered_map<void*, at::DataPtr> blocks_;
};

// 256-byte alignment of each image in a batch's block (as cudaMalloc's).
size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

class NvjpegDecoder final : public DeviceDecoder {
 public:
  explicit NvjpegDecoder(int device) : device_(device), pinned_(device) {}
  ~NvjpegDecoder() override {
    DestroyBatchHandle();
    if (state_ != nullptr) nvjpegJpegStateDestroy(state_);
    if (handle_ != nullptr) nvjpegDestroy(handle_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status Init() {
    RETURN_IF_CUDA(cudaSetDevice(device_), "selecting device " + std::to_string(device_));
    RETURN_IF_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                   "creating its stream");
    // LibTorch initialises its CUDA caching allocator lazily, at the first CUDA tensor: make
    // sure that happened before nvJPEG or this decoder allocates through it.
    try {
      (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device_));
    } catch (const std::exception& e) {
      return FailedPreconditionError("nvjpeg decoder: LibTorch's CUDA on device " +
                                     std::to_string(device_) + ": " + e.what());
    }
    if (nvjpegCreateExV2(NVJPEG_BACKEND_DEFAULT, &kNvjpegDeviceAllocator, pinned_.allocator(),
                         kNvjpegFlags, &handle_) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStateCreate(handle_, &state_) != NVJPEG_STATUS_SUCCESS) {
      return InternalError("nvjpeg decoder: creating the nvJPEG handle on device " +
                           std::to_string(device_) + " failed");
    }
    // The batched decoder's handle: the first backend this GPU and library accept (creating a
    // hardware handle fails where the GPU has no JPEG decoder). None: DecodeJpegBatch decodes
    // one JPEG at a time.
    const char* batched = "none (one JPEG at a time)";
    for (auto [backend, name] : {std::pair{NVJPEG_BACKEND_HARDWARE, "hardware JPEG decoder"},
                                 std::pair{NVJPEG_BACKEND_GPU_HYBRID, "GPU-assisted Huffman"},
                                 std::pair{NVJPEG_BACKEND_DEFAULT, "default"}}) {
      if (CreateBatchHandle(backend)) {
        batched = name;
        break;
      }
    }
    // Once per process: which backend the batched decoder got says what the figures measured
    // (the hardware decoder also needs the driver's video library, libnvcuvid).
    static std::once_flag logged;
    std::call_once(logged, [&] {
      RETORT_LOG(kInfo, "nvjpeg") << "batched decoding on cuda:" << device_ << ": " << batched;
    });
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
    CachedDeviceBytes image;  // given back after the stream synchronisation below
    RETORT_RETURN_IF_ERROR(image.Allocate(static_cast<size_t>(width) * height * 3, stream_));
    nvjpegImage_t decoded{};
    decoded.channel[0] = image.as<unsigned char>();
    decoded.pitch[0] = static_cast<size_t>(width) * 3;
    if (nvjpegDecode(handle_, state_, bytes, size, NVJPEG_OUTPUT_RGBI, &decoded, stream_) !=
        NVJPEG_STATUS_SUCCESS) {
      return DataLossError("nvjpeg: decoding failed");
    }

    host_taps_.clear();
    plans_.clear();
    plans_.push_back(ResampleOf(image.as<uint8_t>(), width, height, geometry, out_size, norm, out));
    RETORT_RETURN_IF_ERROR(LaunchResamples());
    // host_taps_ must outlive the asynchronous copy: wait before the next call reuses it.
    RETURN_IF_CUDA(cudaStreamSynchronize(stream_),
                   "decoding a JPEG on device " + std::to_string(device_));
    taps_.Reset();
    scratch_.Reset();
    return Status::Ok();
  }

  void DecodeJpegBatch(const std::vector<JpegDecodeRequest>& requests,
                       std::vector<Status>* results) override {
    results->assign(requests.size(), Status::Ok());
    auto one_by_one = [&](size_t i) {
      const JpegDecodeRequest& r = requests[i];
      (*results)[i] = DecodeJpeg(r.bytes, r.size, r.geometry, r.out_size, r.norm, r.out);
    };
    // Fewer than two JPEGs: nothing to batch.
    if (requests.size() < 2 || batch_handle_ == nullptr || cudaSetDevice(device_) != cudaSuccess) {
      for (size_t i = 0; i < requests.size(); ++i) one_by_one(i);
      return;
    }
    // Which JPEGs the batched decoder takes; the rest (grayscale, CMYK, what the hardware
    // decoder lacks, unreadable headers) go through DecodeJpeg, which decodes them or answers
    // UNIMPLEMENTED / DATA_LOSS exactly as it does for one sample.
    batched_.clear();
    batch_sizes_.clear();
    for (size_t i = 0; i < requests.size(); ++i) {
      int width = 0, height = 0;
      if (BatchTakes(requests[i], &width, &height)) {
        batched_.push_back(i);
        batch_sizes_.push_back({width, height});
      } else {
        one_by_one(i);
      }
    }
    const size_t m = batched_.size();
    // One JPEG is not worth re-initialising the batched decoder for a new batch size.
    if (m < 2 || !DecodeBatched(requests)) {
      batch_block_.Reset();
      for (size_t i : batched_) one_by_one(i);
      return;
    }
    host_taps_.clear();
    plans_.clear();
    for (size_t k = 0; k < m; ++k) {
      const JpegDecodeRequest& r = requests[batched_[k]];
      plans_.push_back(ResampleOf(batch_block_.as<uint8_t>() + batch_offsets_[k],
                                  batch_sizes_[k].first, batch_sizes_[k].second, r.geometry,
                                  r.out_size, r.norm, r.out));
    }
    Status done = LaunchResamples();
    // host_taps_ must outlive the asynchronous copy, and the batch's outputs are finished on
    // return: one wait for the whole batch.
    const cudaError_t synced = cudaStreamSynchronize(stream_);
    if (done.ok() && synced != cudaSuccess) {
      done = CudaFailed(synced, "decoding a batch of " + std::to_string(m) + " JPEGs on device " +
                                    std::to_string(device_));
    }
    batch_block_.Reset();
    taps_.Reset();
    scratch_.Reset();
    for (size_t i : batched_) (*results)[i] = done;
  }

  Status OrderAfter(const AllocationEvent& allocated) override {
    if (allocated.native() == nullptr) return Status::Ok();
    RETURN_IF_CUDA(cudaSetDevice(device_), "selecting device " + std::to_string(device_));
    RETURN_IF_CUDA(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(allocated.native()), 0),
                   "ordering the decoder's stream after the batch's allocation");
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
  // One image's crop-resize-normalise: the launch, with its taps' offsets in host_taps_ until
  // LaunchResamples turns them into device pointers.
  struct Resample {
    gpu::ResampleLaunch launch;
    size_t x_start = 0, x_count = 0, x_weights = 0, y_start = 0, y_count = 0, y_weights = 0;
    size_t scratch_floats = 0;
  };

  // The CPU path's taps for `geometry` on a full-size (no DCT downscaling) width x height
  // interleaved RGB `image` in device memory, appended to host_taps_.
  Resample ResampleOf(const uint8_t* image, int width, int height, const SampleGeometry& geometry,
                      int out_size, const Normalization& norm, float* out) {
    const ResamplePlan plan = data::PlanResample(width, height, geometry.box, out_size, out_size);
    const ResampleAxis& xs = plan.xs;
    const ResampleAxis& ys = plan.ys;
    auto append = [&](const auto& v) {
      const size_t at = host_taps_.size();
      const size_t bytes = v.size() * sizeof(v[0]);
      host_taps_.resize(at + bytes);
      std::memcpy(host_taps_.data() + at, v.data(), bytes);
      return at;
    };
    Resample r;
    r.x_start = append(xs.start);
    r.x_count = append(xs.count);
    r.x_weights = append(xs.weights);
    r.y_start = append(ys.start);
    r.y_count = append(ys.count);
    r.y_weights = append(ys.weights);
    r.launch = gpu::MakeResampleLaunch(plan, width, geometry.flip, norm);
    gpu::ResampleLaunch& l = r.launch;
    r.scratch_floats = static_cast<size_t>(gpu::ScratchFloats(l));
    l.image = image;
    l.out = out;
    return r;
  }

  // Uploads host_taps_ in one copy and enqueues every plan in plans_ on stream_, in order. They
  // share scratch_, sized for the largest: stream order keeps one image's passes from overlapping
  // the next's. The caller keeps host_taps_ untouched until stream_ is synchronised.
  Status LaunchResamples() {
    size_t scratch_floats = 0;
    for (const Resample& r : plans_) scratch_floats = std::max(scratch_floats, r.scratch_floats);
    RETORT_RETURN_IF_ERROR(taps_.Allocate(host_taps_.size(), stream_));
    RETORT_RETURN_IF_ERROR(scratch_.Allocate(scratch_floats * sizeof(float), stream_));
    RETURN_IF_CUDA(cudaMemcpyAsync(taps_.as<char>(), host_taps_.data(), host_taps_.size(),
                                   cudaMemcpyHostToDevice, stream_),
                   "uploading the resampling taps");
    const char* taps = taps_.as<char>();
    for (Resample& r : plans_) {
      gpu::ResampleLaunch& l = r.launch;
      l.x_start = reinterpret_cast<const int*>(taps + r.x_start);
      l.x_count = reinterpret_cast<const int*>(taps + r.x_count);
      l.x_weights = reinterpret_cast<const float*>(taps + r.x_weights);
      l.y_start = reinterpret_cast<const int*>(taps + r.y_start);
      l.y_count = reinterpret_cast<const int*>(taps + r.y_count);
      l.y_weights = reinterpret_cast<const float*>(taps + r.y_weights);
      l.scratch = scratch_.as<float>();
      RETURN_IF_CUDA(gpu::LaunchCropResizeNormalize(l, stream_), "launching the resize kernels");
    }
    return Status::Ok();
  }

  // Makes the batched decoder's handle, state (and, for the hardware backend, the header parser
  // that nvjpegDecodeBatchedSupported needs) on `backend`; false, holding nothing, if any fails.
  bool CreateBatchHandle(nvjpegBackend_t backend) {
    const bool made =
        nvjpegCreateExV2(backend, &kNvjpegDeviceAllocator, pinned_.allocator(), kNvjpegFlags,
                         &batch_handle_) == NVJPEG_STATUS_SUCCESS &&
        nvjpegJpegStateCreate(batch_handle_, &batch_state_) == NVJPEG_STATUS_SUCCESS &&
        (backend != NVJPEG_BACKEND_HARDWARE ||
         nvjpegJpegStreamCreate(batch_handle_, &batch_stream_) == NVJPEG_STATUS_SUCCESS);
    if (!made) {
      DestroyBatchHandle();
      return false;
    }
    batch_hardware_ = backend == NVJPEG_BACKEND_HARDWARE;
    return true;
  }
  void DestroyBatchHandle() {
    if (batch_stream_ != nullptr) nvjpegJpegStreamDestroy(batch_stream_);
    if (batch_state_ != nullptr) nvjpegJpegStateDestroy(batch_state_);
    if (batch_handle_ != nullptr) nvjpegDestroy(batch_handle_);
    batch_stream_ = nullptr;
    batch_state_ = nullptr;
    batch_handle_ = nullptr;
    batch_hardware_ = false;
  }

  // Whether the batched decoder takes this JPEG (3 components, a known subsampling, and for the
  // hardware decoder a bitstream it supports); its full size when it does.
  bool BatchTakes(const JpegDecodeRequest& r, int* width, int* height) {
    int components = 0;
    nvjpegChromaSubsampling_t subsampling = NVJPEG_CSS_UNKNOWN;
    int widths[NVJPEG_MAX_COMPONENT] = {0};
    int heights[NVJPEG_MAX_COMPONENT] = {0};
    if (nvjpegGetImageInfo(handle_, r.bytes, r.size, &components, &subsampling, widths, heights) !=
            NVJPEG_STATUS_SUCCESS ||
        components != 3 || subsampling == NVJPEG_CSS_UNKNOWN || widths[0] <= 0 || heights[0] <= 0) {
      return false;
    }
    if (batch_hardware_) {
      // 0 means supported.
      int unsupported = 1;
      if (nvjpegJpegStreamParseHeader(batch_handle_, r.bytes, r.size, batch_stream_) !=
              NVJPEG_STATUS_SUCCESS ||
          nvjpegDecodeBatchedSupported(batch_handle_, batch_stream_, &unsupported) !=
              NVJPEG_STATUS_SUCCESS ||
          unsupported != 0) {
        return false;
      }
    }
    *width = widths[0];
    *height = heights[0];
    return true;
  }

  // Decodes the JPEGs batched_ lists into batch_images_ with one nvjpegDecodeBatched call,
  // enqueued on stream_. False when the batch could not be decoded as a whole (a corrupt
  // bitstream among them, an allocation failure): the caller decodes them one by one.
  bool DecodeBatched(const std::vector<JpegDecodeRequest>& requests) {
    const size_t m = batched_.size();
    batch_data_.assign(m, nullptr);
    batch_lengths_.assign(m, 0);
    batch_outputs_.assign(m, nvjpegImage_t{});
    batch_offsets_.assign(m, 0);
    size_t block = 0;  // one block for the batch's images, each at an aligned offset
    for (size_t k = 0; k < m; ++k) {
      batch_offsets_[k] = block;
      block += Aligned(static_cast<size_t>(batch_sizes_[k].first) * 3 * batch_sizes_[k].second);
    }
    if (!batch_block_.Allocate(block, stream_).ok()) return false;
    for (size_t k = 0; k < m; ++k) {
      const JpegDecodeRequest& r = requests[batched_[k]];
      batch_data_[k] = r.bytes;
      batch_lengths_[k] = r.size;
      batch_outputs_[k].channel[0] = batch_block_.as<unsigned char>() + batch_offsets_[k];
      batch_outputs_[k].pitch[0] = static_cast<size_t>(batch_sizes_[k].first) * 3;
    }
    // nvjpegDecodeBatched needs the batch size it was initialised with; initialising again also
    // resets the state after a failed batch.
    if (batch_initialized_size_ != m) {
      if (nvjpegDecodeBatchedInitialize(batch_handle_, batch_state_, static_cast<int>(m),
                                        /*max_cpu_threads=*/1,
                                        NVJPEG_OUTPUT_RGBI) != NVJPEG_STATUS_SUCCESS) {
        batch_initialized_size_ = 0;
        return false;
      }
      batch_initialized_size_ = m;
    }
    if (nvjpegDecodeBatched(batch_handle_, batch_state_, batch_data_.data(), batch_lengths_.data(),
                            batch_outputs_.data(), stream_) != NVJPEG_STATUS_SUCCESS) {
      batch_initialized_size_ = 0;
      return false;
    }
    return true;
  }

  const int device_;
  // Declared before the handles that allocate from it (the destructor destroys them first).
  PinnedBlocks pinned_;
  cudaStream_t stream_ = nullptr;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  // The taps and resampling scratch of the call in progress (LaunchResamples).
  CachedDeviceBytes taps_, scratch_;
  std::vector<char> host_taps_;
  std::vector<Resample> plans_;
  // The batched decoder (DecodeJpegBatch); batch_handle_ null when no backend could be made.
  nvjpegHandle_t batch_handle_ = nullptr;
  nvjpegJpegState_t batch_state_ = nullptr;
  nvjpegJpegStream_t batch_stream_ = nullptr;  // hardware backend only
  bool batch_hardware_ = false;
  size_t batch_initialized_size_ = 0;  // 0: initialise before the next batch
  // Per-call scratch of DecodeJpegBatch, kept to avoid allocating: the requests it batches, their
  // full sizes, nvjpegDecodeBatched's arguments, and the images' offsets in batch_block_ (the
  // call's decoded images, given back at its end).
  std::vector<size_t> batched_;
  std::vector<std::pair<int, int>> batch_sizes_;
  std::vector<const unsigned char*> batch_data_;
  std::vector<size_t> batch_lengths_;
  std::vector<nvjpegImage_t> batch_outputs_;
  std::vector<size_t> batch_offsets_;
  CachedDeviceBytes batch_block_;
};

// A cudaEvent_t recorded where a batch was allocated (device_decoder.h).
class CudaAllocationEvent final : public AllocationEvent {
 public:
  explicit CudaAllocationEvent(cudaEvent_t event) : event_(event) {}
  ~CudaAllocationEvent() override { cudaEventDestroy(event_); }
  void* native() const override { return event_; }

 private:
  const cudaEvent_t event_;
};

}  // namespace

bool NvjpegDecoderBuilt() { return true; }

StatusOr<std::shared_ptr<const AllocationEvent>> RecordAllocationEvent(int device) {
  try {
    // On `device` whatever the thread's current device (it is the same in a worker: C3).
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    cudaEvent_t event = nullptr;
    RETURN_IF_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                   "creating a batch's allocation event on cuda:" + std::to_string(device));
    auto owned = std::make_shared<const CudaAllocationEvent>(event);
    RETURN_IF_CUDA(
        cudaEventRecord(event, c10::cuda::getCurrentCUDAStream(guard.current_device().index())),
        "recording a batch's allocation event on cuda:" + std::to_string(device));
    return std::shared_ptr<const AllocationEvent>(std::move(owned));
  } catch (const std::exception& e) {
    return FailedPreconditionError("nvjpeg decoder: a batch's allocation event on cuda:" +
                                   std::to_string(device) + ": " + e.what());
  }
}

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
