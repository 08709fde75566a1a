#include "models/vit_presets.h"

#include <algorithm>

namespace retort::models {
namespace {

#define RETORT_VIT_PRESET(name, image, channels, patch, dim, depth, heads, classes) \
  VitPresetShape{name, image, channels, patch, dim, depth, heads, classes},
constexpr VitPresetShape kVitPresetShapes[] = {
#include "models/vit_presets.inc"
};
#undef RETORT_VIT_PRESET

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
