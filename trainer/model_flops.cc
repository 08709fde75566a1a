#include "trainer/model_flops.h"

#include <utility>

namespace retort::trainer {

double VitForwardFlops(const VitConfig& c, FlopsCount count) {
  const double d = static_cast<double>(c.dim);
  const double grid = static_cast<double>(c.image_size / c.patch_size);
  const double patches = grid * grid;
  const double tokens = patches + 1;             // the class token
  const double mlp = 2 * d * (c.mlp_ratio * d);  // fc1, fc2 per token
  const double patch_embed = patches * (c.in_channels * c.patch_size * c.patch_size) * d;
  const double per_block = tokens * d * 3 * d         // qkv
                           + 2 * tokens * tokens * d  // q k^T and attention x v
                           + tokens * d * d           // projection
                           + tokens * mlp;
  // BlockImpl::forward_class_token: keys and values of every token; the query, its scores over
  // every token, the projection and the MLP of the class token.
  const double class_token_block = tokens * d * 2 * d + d * d  // k, v; q
                                   + 2 * tokens * d            // q k^T and attention x v
                                   + d * d + mlp;              // projection, MLP
  const bool class_token_last = count == FlopsCount::kComputed && c.last_block_class_token_only;
  const double blocks = class_token_last && c.depth > 0
                            ? (c.depth - 1) * per_block + class_token_block
                            : c.depth * per_block;
  const double head = d * static_cast<double>(c.num_classes);
  return 2 * (patch_embed + blocks + head);  // multiply-adds to FLOPs
}

double KdTrainingFlopsPerSample(const VitConfig& student, const VitConfig* teacher,
                                FlopsCount count) {
  return 3 * VitForwardFlops(student, count) + (teacher ? VitForwardFlops(*teacher, count) : 0.0);
}

double PeakBf16FlopsForDevice(const std::string& name) {
  // Most specific names first ("H100 PCIe" before "H100", "L40S" before "L4", "A100" before
  // "A10").
  static const std::pair<const char*, double> kPeaks[] = {
      {"H100 PCIe", 756e12}, {"H100 NVL", 835e12}, {"H100", 989.4e12},
      {"H200 NVL", 835e12},  {"H200", 989.4e12},   {"A100", 312e12},
      {"L40S", 362.05e12},   {"L4", 121e12},       {"A10", 125e12},
  };
  for (const auto& [key, peak] : kPeaks)
    if (name.find(key) != std::string::npos) return peak;
  return 0;
}

}  // namespace retort::trainer
