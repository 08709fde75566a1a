// The built-in ViT presets' shapes as plain data. Torch-free and header-only so that the
// coordinator can check a job spec against them (image size vs patch size) without linking the
// trainer; vit.cc builds its VitConfig presets from this table, so the two cannot drift.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace retort::trainer {

struct VitPresetShape {
  std::string_view name;
  int64_t image_size;  // the only input size the model takes: position embeddings fix it
  int64_t in_channels;
  int64_t patch_size;
  int64_t dim;
  int64_t depth;
  int64_t heads;
  int64_t num_classes;
};

inline constexpr std::array<VitPresetShape, 7> kVitPresetShapes = {{
    // Fashion-MNIST: 28x28x1, 10 classes.
    {"fm-teacher", 28, 1, 4, 192, 6, 3, 10},
    {"fm-student", 28, 1, 4, 96, 4, 3, 10},
    // 7x7 patches (16 tokens): ~3x cheaper; what fits the 2-core demo's time budget.
    {"fm-teacher-p7", 28, 1, 7, 192, 6, 3, 10},
    {"fm-student-p7", 28, 1, 7, 96, 4, 3, 10},
    // ImageNet-1k: 224x224x3, 1000 classes, 16x16 patches.
    {"vit-ti16", 224, 3, 16, 192, 12, 3, 1000},
    {"vit-s16", 224, 3, 16, 384, 12, 6, 1000},
    {"vit-b16", 224, 3, 16, 768, 12, 12, 1000},
}};

// The preset named `name`, or nullptr.
inline const VitPresetShape* FindVitPresetShape(std::string_view name) {
  for (const auto& p : kVitPresetShapes)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace retort::trainer
