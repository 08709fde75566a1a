// The input a benchmark feeds a model, read from its parameters: channels and patch size from
// the patch embedding, image size from the position embedding, classes from the head. Models
// without those parameters (e.g. a TorchScript CNN) keep the given defaults.
#pragma once

#include <cmath>
#include <cstdint>

#include "trainer/models/model.h"

namespace retort::bench {

struct ModelInputShape {
  int64_t channels = 1, image = 28, classes = 10;
};

inline ModelInputShape InputShapeOf(trainer::Model& model, ModelInputShape defaults) {
  ModelInputShape shape = defaults;
  int64_t patch = 0, positions = 0;
  for (auto& [name, p] : model.NamedParameters()) {
    if (name == "patch_embed.proj.weight") {
      shape.channels = p.size(1);
      patch = p.size(2);
    }
    if (name == "pos_embed") positions = p.size(1) - 1;  // without the class token
    if (name == "head.weight") shape.classes = p.size(0);
  }
  if (patch > 0 && positions > 0)
    shape.image =
        static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(positions)))) * patch;
  return shape;
}

}  // namespace retort::bench
