#include "models/vit_presets.h"

#include <algorithm>
#include <array>

namespace retort::models {
namespace {

constexpr std::array<VitPresetShape, 7> kVitPresetShapes = {{
    // name, image_size, in_channels, patch_size, dim, depth, heads, num_classes
    // Fashion-MNIST: 28x28x1, 10 classes.
    {"fm-teacher", 28, 1, 4, 192, 6, 3, 10},
    {"fm-student", 28, 1, 4, 96, 4, 3, 10},
    // 7x7 patches (16 tokens): ~3x cheaper; what fits the 2-core demo's time budget.
    {"fm-teacher-p7", 28, 1, 7, 192, 6, 3, 10},
    {"fm-student-p7", 28, 1, 7, 96, 4, 3, 10},
    // ImageNet-1k: 224x224x3, 1000 classes, 16x16 patches (timm vit_*_patch16_224).
    {"vit-ti16", 224, 3, 16, 192, 12, 3, 1000},
    {"vit-s16", 224, 3, 16, 384, 12, 6, 1000},
    {"vit-b16", 224, 3, 16, 768, 12, 12, 1000},
}};

}  // namespace

std::span<const VitPresetShape> VitPresetShapes() { return kVitPresetShapes; }

const VitPresetShape* FindVitPresetShape(std::string_view name) {
  for (const auto& p : kVitPresetShapes)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> VitPresetNames() {
  std::vector<std::string> names;
  for (const auto& p : kVitPresetShapes) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string VitPresetNameList() {
  std::string list;
  for (const auto& name : VitPresetNames()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

}  // namespace retort::models
