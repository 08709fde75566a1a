// DeviceDecoder: where a decode thread of the data loader puts samples when batches live on a
// GPU (dataset.decode: gpu). One per decode thread, used by that thread only. Std only: the
// nvJPEG implementation (gpu/nvjpeg_decoder.cc) is the CUDA surface behind it, and CPU tests
// drive the dataset's routing (JPEG to the device decoder, everything else and every failure it
// reports to the CPU decoder) through a host-memory implementation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "trainer/data/image_transforms.h"

namespace retort::trainer::data {

// One JPEG of a DecodeJpegBatch call: DecodeJpeg's arguments. `bytes` and `out` are borrowed for
// the call only.
struct JpegDecodeRequest {
  const uint8_t* bytes = nullptr;  // host memory
  size_t size = 0;
  SampleGeometry geometry;
  int out_size = 0;
  Normalization norm;
  float* out = nullptr;  // device memory, 3 x out_size x out_size floats
};

// Where a device batch's memory became usable: an event recorded on the stream that allocated
// it (the consumer's current stream, through LibTorch's caching allocator), right after the
// allocation. The allocator hands out a block as soon as the kernels that used it are queued on
// that stream, not finished, so a write on another stream must be ordered after this event or
// it can overwrite memory a pending kernel of the last batch still reads. Immutable; shared by
// the decode threads that write the batch.
class AllocationEvent {
 public:
  virtual ~AllocationEvent() = default;
  virtual void* native() const = 0;              // the cudaEvent_t (null in host-memory tests)
  virtual uint64_t serial() const { return 0; }  // for tests of the order
};

// An AllocationEvent recorded on the calling thread's current stream of CUDA device `device`
// (the thread that just allocated a batch there). FAILED_PRECONDITION in a build without
// nvJPEG (where no batch lives on a GPU).
StatusOr<std::shared_ptr<const AllocationEvent>> RecordAllocationEvent(int device);

class DeviceDecoder {
 public:
  virtual ~DeviceDecoder() = default;
  // Orders every later write of this decoder (DecodeJpeg, DecodeJpegBatch, Upload) after
  // `allocated` on the device, without a host wait (nvJPEG: its stream waits for the event).
  // The loader calls it before each chunk of a device batch. Host-memory decoders (tests) need
  // no order: this default does nothing.
  virtual Status OrderAfter(const AllocationEvent& allocated) {
    (void)allocated;
    return Status::Ok();
  }
  // Decodes the JPEG in `bytes`, crops `geometry.box` (in full-size pixels), resizes it to
  // out_size x out_size with the CPU path's resampling (ResampleTaps), mirrors it when
  // `geometry.flip`, normalises with `norm` and writes 3 x out_size x out_size floats (CHW) to
  // `out` in device memory; finished when it returns. UNIMPLEMENTED when this JPEG needs the CPU
  // decoder (CMYK, more than 3 components, a coding the device decoder lacks) and DATA_LOSS
  // when it cannot be decoded: the caller falls back to the CPU decoder, which then decides
  // (decodes it, or reports it corrupt as it always does).
  virtual Status DecodeJpeg(const uint8_t* bytes, size_t size, const SampleGeometry& geometry,
                            int out_size, const Normalization& norm, float* out) = 0;
  // DecodeJpeg for every request, as one batch where the decoder can (nvJPEG: one batched decode
  // of the JPEGs it takes, one stream synchronisation). Same thread rule as DecodeJpeg (the
  // owning decode thread). On return `*results` holds one Status per request, in order, each
  // meaning exactly what DecodeJpeg's would for that JPEG (UNIMPLEMENTED or DATA_LOSS: the
  // caller falls back to the CPU decoder for that sample only), and every OK request's `out` is
  // finished. This default calls DecodeJpeg for each request.
  virtual void DecodeJpegBatch(const std::vector<JpegDecodeRequest>& requests,
                               std::vector<Status>* results);
  // Copies `floats` host floats (a CPU-decoded sample) to `out` in device memory; finished when
  // it returns.
  virtual Status Upload(const float* host, size_t floats, float* out) = 0;
};

inline void DeviceDecoder::DecodeJpegBatch(const std::vector<JpegDecodeRequest>& requests,
                                           std::vector<Status>* results) {
  results->clear();
  results->reserve(requests.size());
  for (const JpegDecodeRequest& r : requests)
    results->push_back(DecodeJpeg(r.bytes, r.size, r.geometry, r.out_size, r.norm, r.out));
}

// Whether this build holds the nvJPEG decoder (gpu/nvjpeg_decoder.cc).
bool NvjpegDecoderBuilt();
// An nvJPEG decoder on CUDA device `device`. FAILED_PRECONDITION, saying why, in a build
// without nvJPEG or when no GPU is visible.
StatusOr<std::unique_ptr<DeviceDecoder>> CreateNvjpegDecoder(int device);

}  // namespace retort::trainer::data
