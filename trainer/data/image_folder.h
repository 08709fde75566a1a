// ImageFolder: root/<class_name>/<file>.{jpg,jpeg,png} (extension case-insensitive), classes in
// sorted name order (label = position), files sorted by name within a class, like
// torchvision.datasets.ImageFolder. Files with other extensions are ignored. Optionally a
// classes file (one class name per line) fixes the class list and order; it must match the
// class directories exactly. Or `label_classes` fixes the label space from another split (the
// evaluation split takes the training split's classes): every class directory must be listed,
// and a listed class without a directory has no samples. `root` is one split's directory of
// classes: image_folder_layout.h finds it under a dataset root (train/, val/, test/).
//
// Training transform (augmentation_seed != 0): RandomResizedCrop (scale 0.08-1, ratio 3/4-4/3,
// torchvision's algorithm) to image_size x image_size, horizontal flip with p = 1/2. Eval
// transform (seed 0): central crop of `eval_crop_fraction` of each side, resized to image_size.
// Both resize bilinearly and normalise with the ImageNet mean/std. JPEGs are decoded with
// libjpeg-turbo's DCT scaling at the largest 1/2, 1/4, 1/8 factor that keeps the crop at least
// image_size pixels on each side (the crop box is chosen on the full-size image first, so the
// geometry depends only on the seed). PNGs via libpng. Output is always 3 channels.
//
// Thread-safety: immutable after Open(); Get() is safe from any number of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/data/dataset.h"
#include "trainer/data/image_codec.h"
#include "trainer/data/image_transforms.h"

namespace retort::trainer::data {

struct ImageFolderOptions {
  std::string root;
  int image_size = 224;
  bool horizontal_flip = true;
  RandomResizedCropOptions crop;
  double eval_crop_fraction = 0.875;
  bool jpeg_dct_scaling = true;
  // Optional: path of a text file listing the class names, one per line.
  std::string classes_file;
  // Optional (exclusive with classes_file): the label space, label = position in this list.
  std::vector<std::string> label_classes;
};

class ImageFolderDataset final : public Dataset {
 public:
  // Scans the folder. NotFound for a missing root or classes file; InvalidArgument for a root
  // without class directories, a class without images, a classes file that does not match
  // the directories (naming the class and the file), or a class directory that label_classes
  // does not list.
  static StatusOr<std::unique_ptr<ImageFolderDataset>> Open(const ImageFolderOptions& options);

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  SampleShape shape() const override {
    return SampleShape{3, options_.image_size, options_.image_size};
  }
  int num_classes() const override { return static_cast<int>(classes_.size()); }
  // Errors name the file: NotFound when it disappeared, DataLoss when it is not a decodable
  // JPEG/PNG (non-image content, truncated or corrupt data).
  Status Get(int64_t index, uint64_t augmentation_seed, float* out, int64_t* label) const override;
  std::string SampleName(int64_t index) const override {
    return files_[static_cast<size_t>(index)].path;
  }
  // JPEGs through `decoder` (the same geometry as Get, from the full-size image); PNGs, and
  // JPEGs the device decoder refuses (UNIMPLEMENTED) or cannot decode (DATA_LOSS), through the
  // CPU decoder and an upload, so a corrupt file fails exactly as in Get.
  Status GetOnDevice(int64_t index, uint64_t augmentation_seed, float* out, int64_t* label,
                     DeviceDecoder& decoder, std::vector<float>* host_scratch) const override;
  // GetOnDevice for a chunk: reads every file, hands all the JPEGs to the device decoder in one
  // DecodeJpegBatch call, and routes each sample as GetOnDevice does (same geometry, labels,
  // fallbacks and errors, per sample).
  void GetChunkOnDevice(const std::vector<DeviceSample>& samples, DeviceDecoder& decoder,
                        std::vector<float>* host_scratch,
                        std::vector<Status>* statuses) const override;
  // JPEGs GetOnDevice handed to the CPU decoder after the device decoder refused them.
  int64_t cpu_fallbacks() const { return cpu_fallbacks_.load(std::memory_order_relaxed); }

  const std::vector<std::string>& classes() const { return classes_; }
  int64_t label(int64_t index) const { return files_[static_cast<size_t>(index)].label; }

 private:
  struct Entry {
    std::string path;
    int64_t label;
  };
  ImageFolderDataset() = default;
  // The file's bytes and header; errors name the file.
  Status Read(int64_t index, std::string* bytes, ImageInfo* info) const;
  SampleGeometry Geometry(const ImageInfo& info, uint64_t augmentation_seed) const;
  // Get's decoding, from bytes already read.
  Status DecodeOnCpu(int64_t index, const std::string& bytes, const ImageInfo& info,
                     uint64_t augmentation_seed, float* out) const;
  // The device route of a sample already read (GetOnDevice and GetChunkOnDevice share it): a
  // JPEG goes to the device decoder with the CPU path's geometry (DeviceRequest); `device` is
  // the decoder's answer for it, null for any other format (straight to the CPU decoder). OK:
  // done. UNIMPLEMENTED or DATA_LOSS: the CPU decoder and an upload, counted in cpu_fallbacks.
  // Any other error is the sample's, naming the file. Writes `*label` on success.
  static bool ForDeviceDecoder(const ImageInfo& info) { return info.format == ImageFormat::kJpeg; }
  JpegDecodeRequest DeviceRequest(const std::string& bytes, const ImageInfo& info,
                                  uint64_t augmentation_seed, float* out) const;
  Status FinishOnDevice(int64_t index, const std::string& bytes, const ImageInfo& info,
                        uint64_t augmentation_seed, float* out, int64_t* label,
                        const Status* device, DeviceDecoder& decoder,
                        std::vector<float>* host_scratch) const;

  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<Entry> files_;
  mutable std::atomic<int64_t> cpu_fallbacks_{0};
};

}  // namespace retort::trainer::data
