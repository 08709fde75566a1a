#include "trainer/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "trainer/data/image_codec.h"
#include "trainer/data/image_folder_layout.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace fs = std::filesystem;
namespace {

StatusOr<std::vector<std::string>> ReadClassesFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open classes file");
  std::vector<std::string> classes;
  std::set<std::string> seen;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.empty()) continue;
    if (!seen.insert(line).second) {
      return InvalidArgumentError(path + ":" + std::to_string(line_number) + ": class '" + line +
                                  "' listed twice");
    }
    classes.push_back(line);
  }
  if (classes.empty()) return InvalidArgumentError(path + ": classes file lists no class");
  return classes;
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return NotFoundError(path + ": no such file");
    return UnavailableError(path + ": cannot open for reading");
  }
  std::string data;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) data.append(buffer, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return DataLossError(path + ": read error");
  return data;
}

// Largest JPEG DCT downscale that keeps the crop at least `out` pixels on each side.
int ChooseDownscale(const CropBox& box, int out_width, int out_height) {
  for (int d : {8, 4, 2}) {
    if (box.width / d >= out_width && box.height / d >= out_height) return d;
  }
  return 1;
}

}  // namespace

StatusOr<std::unique_ptr<ImageFolderDataset>> ImageFolderDataset::Open(
    const ImageFolderOptions& options) {
  if (options.image_size <= 0) return InvalidArgumentError("image folder: image_size must be > 0");
  std::error_code ec;
  if (!fs::is_directory(options.root, ec)) {
    return NotFoundError(options.root + ": image folder root is not a directory");
  }
  std::vector<std::string> dirs;
  for (const auto& entry : fs::directory_iterator(options.root, ec)) {
    if (entry.is_directory()) dirs.push_back(entry.path().filename().string());
  }
  if (ec) return UnavailableError(options.root + ": cannot list: " + ec.message());
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) return InvalidArgumentError(options.root + ": no class directories");

  if (!options.classes_file.empty() && !options.label_classes.empty()) {
    return InvalidArgumentError(options.root +
                                ": image folder: set classes_file or label_classes, not both");
  }
  std::unique_ptr<ImageFolderDataset> dataset(new ImageFolderDataset());
  dataset->options_ = options;
  const std::set<std::string> dir_set(dirs.begin(), dirs.end());
  if (!options.label_classes.empty()) {
    dataset->classes_ = options.label_classes;
    const std::set<std::string> class_set(dataset->classes_.begin(), dataset->classes_.end());
    for (const std::string& d : dirs) {
      if (!class_set.count(d)) {
        return InvalidArgumentError(options.root + "/" + d +
                                    ": class directory is not one of the training split's " +
                                    std::to_string(class_set.size()) + " classes");
      }
    }
  } else if (options.classes_file.empty()) {
    dataset->classes_ = dirs;
  } else {
    RETORT_ASSIGN_OR_RETURN(dataset->classes_, ReadClassesFile(options.classes_file));
    const std::set<std::string> class_set(dataset->classes_.begin(), dataset->classes_.end());
    for (const std::string& c : dataset->classes_) {
      if (!dir_set.count(c)) {
        return InvalidArgumentError(options.classes_file + ": class '" + c +
                                    "' has no directory in " + options.root);
      }
    }
    for (const std::string& d : dirs) {
      if (!class_set.count(d)) {
        return InvalidArgumentError(options.root + "/" + d +
                                    ": directory is not a class listed in " + options.classes_file);
      }
    }
  }
  for (size_t label = 0; label < dataset->classes_.size(); ++label) {
    if (!dir_set.count(dataset->classes_[label])) continue;  // label_classes: no samples here
    const fs::path dir = fs::path(options.root) / dataset->classes_[label];
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (!entry.is_directory() && HasImageExtension(entry.path().string()))
        files.push_back(entry.path().string());
    }
    if (ec) return UnavailableError(dir.string() + ": cannot list: " + ec.message());
    if (files.empty()) {
      return InvalidArgumentError(dir.string() + ": class directory has no .jpg/.jpeg/.png file");
    }
    std::sort(files.begin(), files.end());
    for (std::string& f : files)
      dataset->files_.push_back(Entry{std::move(f), static_cast<int64_t>(label)});
  }
  return dataset;
}

Status ImageFolderDataset::Read(int64_t index, std::string* bytes, ImageInfo* info) const {
  if (index < 0 || index >= size()) {
    return OutOfRangeError(options_.root + ": sample index " + std::to_string(index) +
                           " out of range [0, " + std::to_string(size()) + ")");
  }
  const Entry& entry = files_[static_cast<size_t>(index)];
  RETORT_ASSIGN_OR_RETURN(*bytes, ReadWholeFile(entry.path));
  StatusOr<ImageInfo> read =
      ReadImageInfo(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  if (!read.ok()) return read.status().WithContext(entry.path);
  *info = *read;
  return Status::Ok();
}

SampleGeometry ImageFolderDataset::Geometry(const ImageInfo& info, uint64_t seed) const {
  return ChooseSampleGeometry(info.width, info.height, seed, options_.crop,
                              options_.horizontal_flip, options_.eval_crop_fraction);
}

Status ImageFolderDataset::Get(int64_t index, uint64_t augmentation_seed, float* out,
                               int64_t* label) const {
  std::string bytes;
  ImageInfo info;
  RETORT_RETURN_IF_ERROR(Read(index, &bytes, &info));
  RETORT_RETURN_IF_ERROR(DecodeOnCpu(index, bytes, info, augmentation_seed, out));
  *label = files_[static_cast<size_t>(index)].label;
  return Status::Ok();
}

Status ImageFolderDataset::DecodeOnCpu(int64_t index, const std::string& bytes,
                                       const ImageInfo& info, uint64_t augmentation_seed,
                                       float* out) const {
  const Entry& entry = files_[static_cast<size_t>(index)];
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const int size = options_.image_size;
  const SampleGeometry geometry = Geometry(info, augmentation_seed);
  if (info.format == ImageFormat::kJpeg) {
    const int downscale = options_.jpeg_dct_scaling ? ChooseDownscale(geometry.box, size, size) : 1;
    // Only the pixels the resampler reads are decoded (the crop box plus the filter's support);
    // they are bit-identical to a whole-image decode's, so the output is too.
    const int width = ScaledJpegDimension(info.width, downscale);
    const int height = ScaledJpegDimension(info.height, downscale);
    CropRegion region = geometry.box;
    if (downscale != 1) {
      // The same region in the downscaled image (continuous coordinates, no rounding).
      region = region.Scaled(static_cast<double>(width) / info.width,
                             static_cast<double>(height) / info.height);
    }
    const ResamplePlan plan = PlanResample(width, height, region, size, size);
    CropBox window;
    StatusOr<DecodedImage> image =
        DecodeJpegRegion(data, bytes.size(), downscale, plan.source, &window);
    if (!image.ok()) return image.status().WithContext(entry.path);
    CropResizeNormalizeWindow(image->pixels.data(), window, image->channels, plan, geometry.flip,
                              ImageNetNormalization(), out);
    return Status::Ok();
  }
  // PNG: decoded whole (no DCT scaling).
  StatusOr<DecodedImage> image = DecodeImage(data, bytes.size());
  if (!image.ok()) return image.status().WithContext(entry.path);
  CropResizeNormalize(image->pixels.data(), image->width, image->height, image->channels,
                      geometry.box, size, size, geometry.flip, ImageNetNormalization(), out);
  return Status::Ok();
}

JpegDecodeRequest ImageFolderDataset::DeviceRequest(const std::string& bytes, const ImageInfo& info,
                                                    uint64_t augmentation_seed, float* out) const {
  JpegDecodeRequest request;
  request.bytes = reinterpret_cast<const uint8_t*>(bytes.data());
  request.size = bytes.size();
  request.geometry = Geometry(info, augmentation_seed);
  request.out_size = options_.image_size;
  request.norm = ImageNetNormalization();
  request.out = out;
  return request;
}

Status ImageFolderDataset::FinishOnDevice(int64_t index, const std::string& bytes,
                                          const ImageInfo& info, uint64_t augmentation_seed,
                                          float* out, int64_t* label, const Status* device,
                                          DeviceDecoder& decoder,
                                          std::vector<float>* host_scratch) const {
  const Entry& entry = files_[static_cast<size_t>(index)];
  if (device != nullptr) {
    if (device->ok()) {
      *label = entry.label;
      return Status::Ok();
    }
    if (device->code() != StatusCode::kUnimplemented && device->code() != StatusCode::kDataLoss) {
      return device->WithContext(entry.path);
    }
    // The CPU decoder takes it from here: it decodes what the device decoder does not
    // support, and names a corrupt file exactly as the CPU path does.
    cpu_fallbacks_.fetch_add(1, std::memory_order_relaxed);
  }
  const size_t floats = static_cast<size_t>(shape().numel());
  if (host_scratch->size() < floats) host_scratch->resize(floats);
  RETORT_RETURN_IF_ERROR(DecodeOnCpu(index, bytes, info, augmentation_seed, host_scratch->data()));
  RETORT_RETURN_IF_ERROR(decoder.Upload(host_scratch->data(), floats, out).WithContext(entry.path));
  *label = entry.label;
  return Status::Ok();
}

Status ImageFolderDataset::GetOnDevice(int64_t index, uint64_t augmentation_seed, float* out,
                                       int64_t* label, DeviceDecoder& decoder,
                                       std::vector<float>* host_scratch) const {
  std::string bytes;
  ImageInfo info;
  RETORT_RETURN_IF_ERROR(Read(index, &bytes, &info));
  if (!ForDeviceDecoder(info)) {
    return FinishOnDevice(index, bytes, info, augmentation_seed, out, label, nullptr, decoder,
                          host_scratch);
  }
  const JpegDecodeRequest r = DeviceRequest(bytes, info, augmentation_seed, out);
  const Status device = decoder.DecodeJpeg(r.bytes, r.size, r.geometry, r.out_size, r.norm, r.out);
  return FinishOnDevice(index, bytes, info, augmentation_seed, out, label, &device, decoder,
                        host_scratch);
}

void ImageFolderDataset::GetChunkOnDevice(const std::vector<DeviceSample>& samples,
                                          DeviceDecoder& decoder, std::vector<float>* host_scratch,
                                          std::vector<Status>* statuses) const {
  const size_t n = samples.size();
  statuses->assign(n, Status::Ok());
  std::vector<std::string> bytes(n);
  std::vector<ImageInfo> infos(n);
  std::vector<JpegDecodeRequest> requests;
  std::vector<size_t> requested;  // the sample of each request
  for (size_t i = 0; i < n; ++i) {
    const DeviceSample& s = samples[i];
    Status read = Read(s.index, &bytes[i], &infos[i]);
    if (!read.ok()) {
      (*statuses)[i] = std::move(read);
    } else if (ForDeviceDecoder(infos[i])) {
      requests.push_back(DeviceRequest(bytes[i], infos[i], s.augmentation_seed, s.out));
      requested.push_back(i);
    } else {
      (*statuses)[i] = FinishOnDevice(s.index, bytes[i], infos[i], s.augmentation_seed, s.out,
                                      s.label, nullptr, decoder, host_scratch);
    }
  }
  if (requests.empty()) return;
  std::vector<Status> results;
  decoder.DecodeJpegBatch(requests, &results);
  for (size_t k = 0; k < requests.size(); ++k) {
    const size_t i = requested[k];
    const DeviceSample& s = samples[i];
    const Status device =
        k < results.size()
            ? results[k]
            : InternalError("device decoder answered " + std::to_string(results.size()) + " of " +
                            std::to_string(requests.size()) + " JPEGs");
    (*statuses)[i] = FinishOnDevice(s.index, bytes[i], infos[i], s.augmentation_seed, s.out,
                                    s.label, &device, decoder, host_scratch);
  }
}

}  // namespace retort::trainer::data
