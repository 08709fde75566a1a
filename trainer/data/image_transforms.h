// Image geometry and pixel transforms for the data pipeline, std-only. Inputs are 8-bit
// interleaved (HWC) images; outputs are normalised float CHW, the layout of Batch::images.
// All randomness comes from a SplitMix64 seeded with the sample's augmentation seed, so every
// transform is reproducible bit for bit. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/data/random.h"

namespace retort::trainer::data {

// A rectangle of the source image, in source pixels.
struct CropBox {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// A sub-pixel rectangle (continuous coordinates, pixel centres at +0.5), used when a crop box
// chosen on a full-size image is mapped into a DCT-downscaled decode.
struct CropRegion {
  double x = 0;
  double y = 0;
  double width = 0;
  double height = 0;
  CropRegion() = default;
  CropRegion(double x_, double y_, double w_, double h_) : x(x_), y(y_), width(w_), height(h_) {}
  CropRegion(const CropBox& box)  // NOLINT: implicit by design
      : x(box.x), y(box.y), width(box.width), height(box.height) {}
  // The same region in an image scaled by (sx, sy).
  CropRegion Scaled(double sx, double sy) const {
    return CropRegion(x * sx, y * sy, width * sx, height * sy);
  }
};

struct RandomResizedCropOptions {
  double min_scale = 0.08;
  double max_scale = 1.0;
  double min_ratio = 3.0 / 4.0;
  double max_ratio = 4.0 / 3.0;
};

// torchvision's RandomResizedCrop.get_params: up to 10 tries of an area fraction uniform in
// [min_scale, max_scale] and a log-uniform aspect ratio; falls back to the largest central crop
// with the ratio clamped into range.
CropBox RandomResizedCropBox(int width, int height, const RandomResizedCropOptions& options,
                             SplitMix64& rng);

// Central crop covering `fraction` of each side (the usual eval transform uses 0.875 = 224/256).
CropBox CenterCropBox(int width, int height, double fraction);

// Where one sample's pixels come from: the crop box in the full-size image and whether the
// crop is mirrored. One definition for every decoder (CPU today; a GPU decoder must call it
// too), so a (seed, sample) pair crops the same pixels whichever decoder runs and the
// teacher-logit cache stays exact.
struct SampleGeometry {
  CropBox box;
  bool flip = false;
};
// Training (augmentation_seed != 0): RandomResizedCrop from a SplitMix64 seeded with the seed,
// then a horizontal flip with probability 1/2 (the generator's next top bit) when
// `horizontal_flip`. Evaluation (seed 0): the central crop of `eval_crop_fraction`, no flip.
SampleGeometry ChooseSampleGeometry(int width, int height, uint64_t augmentation_seed,
                                    const RandomResizedCropOptions& crop, bool horizontal_flip,
                                    double eval_crop_fraction);

// Per-channel normalisation: out = (x / 255 - mean[c]) / std[c].
struct Normalization {
  float mean[3] = {0.f, 0.f, 0.f};
  float std[3] = {1.f, 1.f, 1.f};
};
Normalization ImageNetNormalization();
Normalization FashionMnistNormalization();

// Resampling weights of one axis: output o reads source samples start[o] .. start[o]+count[o]-1
// with weights[o * max_taps + k] (normalised to sum 1).
struct ResampleAxis {
  std::vector<int> start;
  std::vector<int> count;
  std::vector<float> weights;
  int max_taps = 0;
};

// PIL's bilinear resampling weights (what torchvision's Resize/RandomResizedCrop use on PIL
// images) for `out_size` outputs from [offset, offset + extent) of an axis of `src_size`
// samples: a triangle filter whose support grows with the downscale factor, so downscaling
// averages (antialiasing) instead of skipping pixels; for upscaling plain bilinear interpolation
// with half-pixel centres. Taps stay inside the region (as after an explicit crop) and the
// image. The one definition of the resampling for the CPU path (CropResizeNormalize) and the
// GPU decoder's kernels.
ResampleAxis ResampleTaps(int out_size, double offset, double extent, int src_size);

// Crops `region` out of `src` (height x width x channels, row-major, 8-bit), resizes it to
// out_height x out_width with PIL's bilinear filter (torchvision's default on PIL images: a
// triangle filter widened by the downscale factor, i.e. antialiased when shrinking, plain
// half-pixel-centred bilinear interpolation when enlarging; taps stay inside the region),
// mirrors it horizontally when `flip`, normalises and writes channels x out_height x out_width
// floats. Precondition: region inside the image, channels <= 3.
void CropResizeNormalize(const uint8_t* src, int width, int height, int channels,
                         const CropRegion& region, int out_width, int out_height, bool flip,
                         const Normalization& norm, float* out);

// How CropResizeNormalize(…, width, height, …, region, out_width, out_height, …) resamples:
// ResampleTaps for each axis, and `source`, the pixels they read (the union of the tap ranges
// on each axis, a box inside the image). Decoding only `source` and passing it to
// CropResizeNormalizeWindow with the plan gives the same output.
struct ResamplePlan {
  ResampleAxis xs;  // out_width outputs
  ResampleAxis ys;  // out_height outputs
  CropBox source;
};
ResamplePlan PlanResample(int width, int height, const CropRegion& region, int out_width,
                          int out_height);

// CropResizeNormalize by `plan` of an image of which only `window` is in memory: `src` holds
// window.height rows of window.width pixels (channels each, row-major, 8-bit), the image's
// pixels at columns window.x.. and rows window.y... The taps are the whole image's, so the
// output is bit-identical to CropResizeNormalize on the whole image. Precondition: `window`
// contains plan.source, channels <= 3.
void CropResizeNormalizeWindow(const uint8_t* src, const CropBox& window, int channels,
                               const ResamplePlan& plan, bool flip, const Normalization& norm,
                               float* out);

// The CIFAR/Fashion-MNIST training augmentation: pads a single-channel width x height image by
// `padding` zero pixels on each side, takes a random width x height window of the padded image
// and, when `allow_flip`, mirrors it with probability 1/2, then normalises into `out`
// (height x width floats). `rng == nullptr` means no augmentation (plain normalisation).
void PadCropFlipNormalize(const uint8_t* src, int width, int height, int padding, bool allow_flip,
                          const Normalization& norm, SplitMix64* rng, float* out);

}  // namespace retort::trainer::data
