// A linear layer over frozen weights for inference on CPU (the teacher's forward):
// y = act(x W^T + b) (+ residual). With oneDNN (RETORT_HAVE_DNNL) the weight is packed once
// into the GEMM kernel's layout and the bias, the exact-erf GELU and the residual add are
// fused into the GEMM's output pass; without it, the same math through ATen (addmm + gelu +
// add_). Numerically the two differ only by summation order (~1e-6 relative).
//
// Threading: Forward may be called concurrently from several threads (the KD step's parts);
// the primitive cache is guarded by a mutex and each call brings its own scratch memory.
// Ownership: holds references to the weight and bias tensors (the model's parameters, not
// copies) and repacks when their storage or version counter changes (weights loaded after
// construction, e.g. from a checkpoint).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace retort::trainer {

class FrozenLinear {
 public:
  enum class Activation { kNone, kGeluErf };

  // weight [N, K] and bias [N], fp32 on CPU.
  FrozenLinear(at::Tensor weight, at::Tensor bias, Activation activation);
  ~FrozenLinear();
  FrozenLinear(const FrozenLinear&) = delete;
  FrozenLinear& operator=(const FrozenLinear&) = delete;

  // x: [M, K] fp32 CPU (made contiguous if it is not). Returns act(x W^T + b) as a new [M, N]
  // tensor; or, when `residual` is given ([M, N], contiguous fp32), adds into it in place and
  // returns it. Must run with autograd off (InferenceMode or NoGradGuard).
  at::Tensor Forward(const at::Tensor& x, at::Tensor* residual = nullptr);

  // True when this build routes Forward through oneDNN.
  static bool UsesOneDnn();

 private:
  // Forward after its checks: x contiguous [M, K]; residual null or a valid [M, N].
  at::Tensor Multiply(const at::Tensor& x, at::Tensor* residual);
  struct Kernel;  // one compiled GEMM (per row count and residual mode) with its packed weight
  std::shared_ptr<Kernel> KernelFor(int64_t rows, bool with_residual);

  at::Tensor weight_, bias_;
  Activation activation_;
  std::mutex mu_;
  // Guarded by mu_. Keyed by (rows, with_residual); cleared when the weights change.
  std::map<std::pair<int64_t, bool>, std::shared_ptr<Kernel>> kernels_;
  // What the cache was built from: the weight's and bias's data and version counters.
  const void* packed_weight_data_ = nullptr;
  const void* packed_bias_data_ = nullptr;
  int64_t packed_weight_version_ = -1, packed_bias_version_ = -1;
};

}  // namespace retort::trainer
