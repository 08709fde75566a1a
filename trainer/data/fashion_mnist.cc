#include "trainer/data/fashion_mnist.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>

#include "trainer/data/image_transforms.h"
#include "trainer/data/random.h"

namespace retort::trainer::data {
namespace {

// Reads a whole (optionally gzip-compressed) file through zlib.
StatusOr<std::vector<uint8_t>> ReadGzipFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFoundError(path + ": no such file");
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError(path + ": not a regular file");
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return NotFoundError(path + ": cannot open");
  gzbuffer(file, 1 << 20);
  std::vector<uint8_t> data;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    const int n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) break;
    data.insert(data.end(), chunk.begin(), chunk.begin() + n);
    if (n < static_cast<int>(chunk.size())) break;
  }
  int errnum = Z_OK;
  const char* message = gzerror(file, &errnum);
  std::string error = (errnum != Z_OK && message != nullptr) ? message : "";
  gzclose(file);
  if (errnum != Z_OK) {
    return DataLossError(path + ": corrupt or truncated gzip stream (" + error + ") after " +
                         std::to_string(data.size()) + " bytes");
  }
  return data;
}

uint32_t ReadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

StatusOr<IdxArray> ReadIdxFile(const std::string& path, int expected_rank) {
  RETORT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadGzipFile(path));
  if (bytes.size() < 4) {
    return DataLossError(path + ": truncated IDX header (" + std::to_string(bytes.size()) +
                         " bytes)");
  }
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] != expected_rank) {
    char magic[16];
    std::snprintf(magic, sizeof(magic), "%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
    char want[16];
    std::snprintf(want, sizeof(want), "000008%02x", expected_rank);
    return InvalidArgumentError(path + ": wrong IDX magic 0x" + magic + ", expected 0x" + want +
                                " (unsigned bytes, rank " + std::to_string(expected_rank) + ")");
  }
  const size_t header = 4 + 4 * static_cast<size_t>(expected_rank);
  if (bytes.size() < header) {
    return DataLossError(path + ": truncated IDX header (" + std::to_string(bytes.size()) +
                         " bytes, need " + std::to_string(header) + ")");
  }
  IdxArray array;
  uint64_t total = 1;
  for (int d = 0; d < expected_rank; ++d) {
    const uint32_t dim = ReadBigEndian32(bytes.data() + 4 + 4 * d);
    if (dim == 0 || dim > (1u << 30)) {
      return InvalidArgumentError(path + ": implausible IDX dimension " + std::to_string(d) +
                                  " = " + std::to_string(dim));
    }
    array.dims.push_back(dim);
    total *= dim;
  }
  const size_t have = bytes.size() - header;
  if (have < total) {
    return DataLossError(path + ": truncated IDX data: header announces " + std::to_string(total) +
                         " bytes, file has " + std::to_string(have));
  }
  if (have > total) {
    return InvalidArgumentError(path + ": " + std::to_string(have - total) +
                                " unexpected trailing bytes after the IDX data");
  }
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

StatusOr<std::unique_ptr<FashionMnistDataset>> FashionMnistDataset::Load(
    const FashionMnistOptions& options) {
  const std::string prefix = options.root + "/" + (options.train ? "train" : "t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  if (options.padding < 0) return InvalidArgumentError("fashion-mnist: padding must be >= 0");
  RETORT_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path, 3));
  RETORT_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path, 1));
  if (images.dims[0] != labels.dims[0]) {
    return InvalidArgumentError(images_path + " has " + std::to_string(images.dims[0]) +
                                " images but " + labels_path + " has " +
                                std::to_string(labels.dims[0]) + " labels");
  }
  if (images.dims[1] != 28 || images.dims[2] != 28) {
    return InvalidArgumentError(images_path + ": images are " + std::to_string(images.dims[1]) +
                                "x" + std::to_string(images.dims[2]) + ", expected 28x28");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kNumClasses) {
      return InvalidArgumentError(labels_path + ": label " + std::to_string(labels.data[i]) +
                                  " of sample " + std::to_string(i) + " is not in [0, 10)");
    }
  }
  std::unique_ptr<FashionMnistDataset> dataset(new FashionMnistDataset());
  dataset->options_ = options;
  dataset->images_path_ = images_path;
  dataset->count_ = images.dims[0];
  dataset->rows_ = static_cast<int>(images.dims[1]);
  dataset->cols_ = static_cast<int>(images.dims[2]);
  dataset->images_ = std::move(images.data);
  dataset->labels_ = std::move(labels.data);
  return dataset;
}

Status FashionMnistDataset::Get(int64_t index, uint64_t augmentation_seed, float* out,
                                int64_t* label) const {
  if (index < 0 || index >= count_) {
    return OutOfRangeError(SampleName(index) + ": index out of range [0, " +
                           std::to_string(count_) + ")");
  }
  static const Normalization kNorm = FashionMnistNormalization();
  if (augmentation_seed == 0) {
    PadCropFlipNormalize(raw_pixels(index), cols_, rows_, 0, false, kNorm, nullptr, out);
  } else {
    SplitMix64 rng(augmentation_seed);
    PadCropFlipNormalize(raw_pixels(index), cols_, rows_, options_.padding,
                         options_.horizontal_flip, kNorm, &rng, out);
  }
  *label = labels_[static_cast<size_t>(index)];
  return Status::Ok();
}

std::string FashionMnistDataset::SampleName(int64_t index) const {
  return images_path_ + "[" + std::to_string(index) + "]";
}

}  // namespace retort::trainer::data
