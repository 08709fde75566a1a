#include "trainer/model_flops.h"

#include <utility>

namespace retort::trainer {

double VitForwardFlops(const VitConfig& c) {
  const double d = static_cast<double>(c.dim);
  const double grid = static_cast<double>(c.image_size / c.patch_size);
  const double patches = grid * grid;
  const double tokens = patches + 1;  // the class token
  const double patch_embed = patches * (c.in_channels * c.patch_size * c.patch_size) * d;
  const double per_block = tokens * d * 3 * d                     // qkv
                           + 2 * tokens * tokens * d              // q k^T and attention x v
                           + tokens * d * d                       // projection
                           + 2 * tokens * d * (c.mlp_ratio * d);  // fc1, fc2
  const double head = d * static_cast<double>(c.num_classes);
  return 2 * (patch_embed + c.depth * per_block + head);  // multiply-adds to FLOPs
}

double KdTrainingFlopsPerSample(const VitConfig& student, const VitConfig* teacher) {
  return 3 * VitForwardFlops(student) + (teacher ? VitForwardFlops(*teacher) : 0.0);
}

double PeakBf16FlopsForDevice(const std::string& name) {
  // Most specific names first ("H100 PCIe" before "H100", "L40S" before "L4", "A100" before
  // "A10").
  static const std::pair<const char*, double> kPeaks[] = {
      {"H100 PCIe", 756e12}, {"H100 NVL", 835e12}, {"H100", 989.4e12}, {"H200", 989.4e12},
      {"A100", 312e12},      {"L40S", 362.05e12},  {"L4", 121e12},     {"A10", 125e12},
  };
  for (const auto& [key, peak] : kPeaks)
    if (name.find(key) != std::string::npos) return peak;
  return 0;
}

}  // namespace retort::trainer
