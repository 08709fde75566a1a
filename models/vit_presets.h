// The built-in ViT presets' shapes: the one table of them. Torch-free, so that the coordinator
// checks a job spec against it (known name, image size vs patch size) without linking the
// trainer; trainer/models/vit.cc builds its VitConfig presets from it, so the two cannot drift.
// To add a preset, add a row in vit_presets.inc (the Python reference programs read it too).
// Immutable data: safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace retort::models {

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

// Every built-in preset, in the table's order.
std::span<const VitPresetShape> VitPresetShapes();

// The preset named `name`, or nullptr.
const VitPresetShape* FindVitPresetShape(std::string_view name);

// The presets' names, sorted.
std::vector<std::string> VitPresetNames();

// The sorted names joined by ", ": for messages that list the known presets.
std::string VitPresetNameList();

}  // namespace retort::models
