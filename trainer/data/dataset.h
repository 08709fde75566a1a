// The dataset interface the loader decodes from: an indexed collection of labelled images that
// produces one normalised float CHW sample at a time, written into caller-provided memory (the
// loader's batch buffer), so no torch type appears here and no per-sample copy is made.
//
// Threading: Get() is const and must be safe to call concurrently from many decode threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/data/device_decoder.h"

namespace retort::trainer::data {

struct SampleShape {
  int channels = 0;
  int height = 0;
  int width = 0;
  int64_t numel() const { return int64_t{channels} * height * width; }
};

// One sample of a Dataset::GetChunkOnDevice call: GetOnDevice's arguments.
struct DeviceSample {
  int64_t index = 0;
  uint64_t augmentation_seed = 0;
  float* out = nullptr;  // device memory, shape().numel() floats
  int64_t* label = nullptr;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual SampleShape shape() const = 0;
  virtual int num_classes() const = 0;

  // Writes shape().numel() floats (C, H, W order; augmented when augmentation_seed != 0,
  // normalised) to `out` and the class of the sample to `*label`. The result is a pure function
  // of (index, augmentation_seed). Errors name the sample (SampleName) and say what was wrong:
  // NotFound for a missing file, DataLoss for a corrupt or truncated one.
  virtual Status Get(int64_t index, uint64_t augmentation_seed, float* out,
                     int64_t* label) const = 0;

  // Human-readable identity of a sample for error messages (a file path, "train[17]").
  virtual std::string SampleName(int64_t index) const = 0;

  // The same sample as Get, written to `out` in device memory through `decoder` (the loader's
  // batches live on a GPU: dataset.decode gpu). This default decodes on the CPU into
  // `*host_scratch` (resized as needed) and uploads; datasets whose decoding the device does
  // better override it. Same errors as Get.
  virtual Status GetOnDevice(int64_t index, uint64_t augmentation_seed, float* out, int64_t* label,
                             DeviceDecoder& decoder, std::vector<float>* host_scratch) const;

  // GetOnDevice for each of `samples` (a decode thread's chunk of a batch), so that a dataset can
  // hand the device decoder many samples at once (DeviceDecoder::DecodeJpegBatch). On return
  // `*statuses` holds one Status per sample, in order, each what GetOnDevice would have
  // returned for it, and every OK sample's output and label are written. Same thread rules as
  // GetOnDevice (`decoder` and `host_scratch` are the calling thread's). This default calls
  // GetOnDevice per sample.
  virtual void GetChunkOnDevice(const std::vector<DeviceSample>& samples, DeviceDecoder& decoder,
                                std::vector<float>* host_scratch,
                                std::vector<Status>* statuses) const;
};

}  // namespace retort::trainer::data
