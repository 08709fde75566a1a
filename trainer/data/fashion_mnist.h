// Fashion-MNIST from its IDX files (gzip-compressed or plain; zlib reads both):
//   <root>/train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz   (60000 samples)
//   <root>/t10k-images-idx3-ubyte.gz,  t10k-labels-idx1-ubyte.gz    (10000 samples)
// Samples are 1 x 28 x 28 floats normalised with the Fashion-MNIST mean/std (0.2860, 0.3530).
// With a non-zero augmentation seed: random crop with `padding` zero pixels + horizontal flip
// (p = 1/2), driven only by that seed. The raw uint8 data stays in memory (47 MB for train).
// Thread-safety: immutable after Load(); Get() is safe from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/data/dataset.h"

namespace retort::trainer::data {

// An unsigned-byte IDX array (magic 0x00 0x00 0x08 <rank>).
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Reads and validates one IDX file. Every error names the file: NotFound when missing,
// InvalidArgument for a wrong magic or rank, DataLoss for a truncated file or gzip stream.
StatusOr<IdxArray> ReadIdxFile(const std::string& path, int expected_rank);

struct FashionMnistOptions {
  std::string root = "/usr/share/datasets/fashion-mnist";
  bool train = true;  // train-* (60000) or t10k-* (10000)
  int padding = 2;    // random-crop padding of the augmentation
  bool horizontal_flip = true;
};

class FashionMnistDataset final : public Dataset {
 public:
  static constexpr int kNumClasses = 10;

  // Reads both files of the split. Errors name the file (missing, wrong magic, image/label
  // count mismatch, truncated, label >= 10, images not 28x28).
  static StatusOr<std::unique_ptr<FashionMnistDataset>> Load(const FashionMnistOptions& options);

  int64_t size() const override { return count_; }
  SampleShape shape() const override { return SampleShape{1, rows_, cols_}; }
  int num_classes() const override { return kNumClasses; }
  Status Get(int64_t index, uint64_t augmentation_seed, float* out, int64_t* label) const override;
  std::string SampleName(int64_t index) const override;

  // Raw pixels of sample `index` (rows x cols bytes) and its label, for tests.
  const uint8_t* raw_pixels(int64_t index) const {
    return images_.data() + static_cast<size_t>(index) * rows_ * cols_;
  }
  int64_t raw_label(int64_t index) const { return labels_[static_cast<size_t>(index)]; }

 private:
  FashionMnistDataset() = default;

  FashionMnistOptions options_;
  std::string images_path_;
  int64_t count_ = 0;
  int rows_ = 0;
  int cols_ = 0;
  std::vector<uint8_t> images_;
  std::vector<uint8_t> labels_;
};

}  // namespace retort::trainer::data
