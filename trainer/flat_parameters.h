// FlatParameters: every parameter of a model becomes a view into one contiguous float32
// buffer, and every parameter's .grad a view into a second one, so collectives and the
// optimizer work on flat ranges without packing copies.
//
// How gradients land in the flat buffer: each parameter's .grad is pre-set to its view.
// Autograd's AccumulateGrad adds into an existing .grad in place (`grad += new_grad`) when
// backward runs without create_graph, so backward writes straight into the flat buffer.
// ZeroGrads() zeroes the buffer before each backward and re-attaches any view that user code
// replaced. Parameters are re-pointed with Tensor::set_data (what nn.Module.to() does), which
// keeps their identity (hooks, optimizer references, TorchScript slots).
//
// Ownership: holds references to the model's parameter tensors; the model must outlive it and
// must not be moved to another device or dtype afterwards. Not thread-safe.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace retort::trainer {

class Model;

struct ParamSlot {
  std::string name;
  int64_t offset = 0;  // first element in the flat buffers
  int64_t numel = 0;
  int64_t dim = 1;  // the parameter's number of dimensions (weight decay rules use it)
};

class FlatParameters {
 public:
  // Copies the current parameter values into the flat buffer once and re-points the
  // parameters. Fails if a parameter is not float32, not on the same device as the others,
  // or does not require grad.
  static StatusOr<std::unique_ptr<FlatParameters>> Create(Model& model);

  int64_t numel() const { return params_.numel(); }
  const torch::Tensor& params() const { return params_; }  // float32 [numel]
  const torch::Tensor& grads() const { return grads_; }    // float32 [numel]
  const std::vector<ParamSlot>& slots() const { return slots_; }
  const std::vector<torch::Tensor>& tensors() const { return tensors_; }

  // Zeroes the gradient buffer and makes sure every .grad is its view again.
  void ZeroGrads();
  // True when every parameter's data and .grad alias the flat buffers (a test hook).
  bool AllViewsAttached() const;

 private:
  FlatParameters() = default;
  torch::Tensor params_, grads_;
  std::vector<ParamSlot> slots_;
  std::vector<torch::Tensor> tensors_;     // the model's parameter tensors
  std::vector<torch::Tensor> grad_views_;  // views into grads_, one per parameter
};

}  // namespace retort::trainer
