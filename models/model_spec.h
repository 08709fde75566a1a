// ModelSpec: which model to build and which weights it starts from, as plain data. What a job
// spec's retort.v1.ModelSpec says (proto/retort/v1/retort.proto) without the proto, and what
// trainer::BuildModel (trainer/models/model.h) takes. Torch-free.
#pragma once

#include <string>

namespace retort::models {

struct ModelSpec {
  // Exactly one of these two is set.
  std::string preset;            // a built-in ViT preset (the table in vit_presets.h)
  std::string torchscript_path;  // a TorchScript file exported from PyTorch
  // Initial weights (safetensors or a retort checkpoint) under PyTorch's state_dict() names;
  // empty: built-in models are initialised from the seed, TorchScript models keep theirs.
  std::string weights_path;
  // Load weights_path even when it lacks some of the model's tensors or holds extra ones.
  bool allow_partial_weights = false;
};

}  // namespace retort::models
