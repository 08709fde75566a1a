// Model: what the trainer needs from a teacher or student, whatever built it (built-in ViT
// presets or a TorchScript file). Header is torch-light (torch/types.h only).
//
// Parameter names follow PyTorch/timm conventions ("blocks.0.attn.qkv.weight"), so a
// state dict written from NamedParameters() loads into the equivalent PyTorch module.
// Threading: a Model is used by one thread at a time, except that Forward without autograd
// (a teacher's) may run concurrently on disjoint inputs.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "models/model_spec.h"

namespace retort::trainer {

class Model {
 public:
  virtual ~Model() = default;
  // images: float32 [n, C, H, W] -> logits [n, num_classes].
  virtual torch::Tensor Forward(const torch::Tensor& images) = 0;
  // All parameters, in registration order (the order of the flat buffer).
  virtual std::vector<std::pair<std::string, torch::Tensor>> NamedParameters() = 0;
  // Buffers that are not parameters (e.g. BatchNorm statistics); empty for ViT.
  virtual std::vector<std::pair<std::string, torch::Tensor>> NamedBuffers() { return {}; }
  // Train mode (dropout on, BatchNorm updating its running statistics) or eval mode.
  virtual void SetTraining(bool training) = 0;
  virtual bool IsTraining() const = 0;
  // Promises that the weights no longer change (a teacher): inference may then use weight
  // layouts prepared once, e.g. GEMM operands packed on the first forward. Irreversible.
  virtual void Freeze() {}
  virtual void To(torch::Device device) = 0;
  // "vit:fm-student", "torchscript:/path/model.pt", ...
  virtual std::string Describe() const = 0;
};

// Builds the model `spec` names: a built-in ViT preset (models/vit_presets.h), initialised from
// `seed`, or a TorchScript file; then loads spec.weights_path when set (e.g. a pretrained
// teacher exported by ExportModelSafetensors or from PyTorch/timm with the same names).
// INVALID_ARGUMENT unless exactly one of preset and torchscript_path is set.
StatusOr<std::unique_ptr<Model>> BuildModel(const models::ModelSpec& spec, uint64_t seed);

// Loads a TorchScript module (torch.jit.trace/script output). Its parameters are trainable.
StatusOr<std::unique_ptr<Model>> LoadTorchScriptModel(const std::string& path);

// Copies values from `src` to `dst` by name; every parameter of dst must be present with the
// same shape. Used to give several ranks identical weights and to load teachers.
Status CopyParameters(Model& src, Model& dst);

}  // namespace retort::trainer
