// ShardedAdamW: ZeRO-1 AdamW over one rank's contiguous range of the flat parameter buffer,
// with linear warmup + cosine decay of the learning rate. Matches torch.optim.AdamW
// (decoupled weight decay, bias-corrected moments, eps added after the square root) with two
// parameter groups: the decayed spans of the range get `weight_decay`, the rest none
// (weight_decay.h: timm's and DeiT's groups).
//
// The optimizer owns fp32 exp_avg/exp_avg_sq for its range only, on the flat buffer's device;
// it updates the parameters in place through the flat buffer. State (range, step, params,
// moments) is exported/imported as plain CPU tensors for checkpoints and for moving ranges
// between ranks on a new plan.
//
// Two kernels, same math: a hand-fused loop over the range (CPU) and ATen's fused multi-tensor
// AdamW (`_fused_adamw_`, CUDA and CPU), which reads the clipping divisor and the skip flag
// from device tensors, so a step needs no host sync between the gradient norm and the update.
// Not thread-safe; on CUDA, kernels go to the current stream.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "trainer/shard_plan.h"

namespace retort::trainer {

struct AdamWOptions {
  double lr = 1e-3;  // peak learning rate
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.05;
  int64_t warmup_steps = 0;  // linear warmup from lr/warmup_steps to lr
  int64_t total_steps = 0;   // cosine decay to min_lr at total_steps; 0: constant after warmup
  double min_lr = 0.0;
  double max_grad_norm = 1.0;  // clip by global L2 norm; <= 0 disables clipping
  // true: every parameter decays (torch.optim.AdamW over model.parameters()); false: biases,
  // norm weights and token/position embeddings do not (weight_decay.h).
  bool decay_all_parameters = false;
};
Status ValidateAdamWOptions(const AdamWOptions& options);

// Learning rate used by update number `step` (1-based).
double LearningRateAt(const AdamWOptions& options, int64_t step);

// One range's optimizer state. Tensors are float32 CPU [count] in exports.
struct OptimizerShardState {
  ShardRange range;
  int64_t step = 0;  // updates applied so far
  torch::Tensor params, exp_avg, exp_avg_sq;
};

enum class AdamWKernel {
  kAuto,   // the loop on CPU, the fused multi-tensor kernel elsewhere
  kLoop,   // CPU only
  kFused,  // any device
};

// How one update is scaled and whether it happens, as float32 [1] tensors on the parameters'
// device, so that they can come straight from a device-side gradient norm.
struct UpdateScalars {
  torch::Tensor grad_divisor;  // gradients are divided by it (clipping: max(1, norm / max_norm))
  torch::Tensor found_inf;     // non-zero: skip the update (non-finite gradients)
};
// grad_divisor = max(1, (norm + 1e-6) / max_norm) (1 when max_norm <= 0), found_inf =
// !isfinite(norm), from a float32 [1] tensor holding the squared global gradient norm. Device
// ops only (no host sync).
UpdateScalars ClipAndSkipScalars(const torch::Tensor& squared_norm, double max_grad_norm);

// A span [begin, end) of an optimizer range in local coordinates, with or without weight decay.
struct AdamWSegment {
  int64_t begin = 0, end = 0;
  bool decays = false;
};

class ShardedAdamW {
 public:
  // `flat_params` is the whole flat buffer (float32 [numel]); the optimizer updates `range`.
  // `decayed` lists the spans of `range` (flat-buffer coordinates, in order, disjoint) that get
  // weight decay; everything else in the range gets none.
  ShardedAdamW(AdamWOptions options, torch::Tensor flat_params, ShardRange range,
               std::vector<ShardRange> decayed, AdamWKernel kernel = AdamWKernel::kAuto);
  // Every element of `range` decays.
  ShardedAdamW(AdamWOptions options, torch::Tensor flat_params, ShardRange range);

  // Applies one update with gradient `grad * grad_scale` (grad: float32 [range.count]).
  void Update(const torch::Tensor& grad, double grad_scale);
  // Applies one update with gradient `grad / scalars.grad_divisor` unless scalars.found_inf is
  // non-zero; decided where the scalars live (no host sync on CUDA). step() counts the update
  // either way: a caller that later reads found_inf != 0 calls ForgetSkippedUpdate(). The fused
  // kernel may leave `grad` divided by the divisor.
  void Update(const torch::Tensor& grad, const UpdateScalars& scalars);
  // Undoes the step count of the last Update(grad, scalars), whose found_inf was non-zero.
  void ForgetSkippedUpdate();

  int64_t step() const { return step_; }
  const ShardRange& range() const { return range_; }
  const AdamWOptions& options() const { return options_; }
  const std::vector<ShardRange>& decayed() const { return decayed_; }
  AdamWKernel kernel() const { return kernel_; }
  const torch::Tensor& exp_avg() const { return exp_avg_; }
  const torch::Tensor& exp_avg_sq() const { return exp_avg_sq_; }

  // State of [sub.offset, sub.end()), which must lie inside range() (default: all of it).
  StatusOr<OptimizerShardState> Export() const { return Export(range_); }
  StatusOr<OptimizerShardState> Export(ShardRange sub) const;
  // Writes a piece exported by any rank under any plan: its range must lie inside range(). The
  // first import sets step(); later imports must carry the same step. To re-shard, import the
  // pieces that cover range() (the caller checks coverage).
  Status Import(const OptimizerShardState& piece);

 private:
  AdamWOptions options_;
  // The loop over [begin, end) of the range (local coordinates) with one decay factor.
  void LoopUpdate(const torch::Tensor& grad, float grad_scale, int64_t begin, int64_t end,
                  float decay, float step_size, float bias2_sqrt) const;
  void FusedUpdate(const torch::Tensor& grad, double lr, const UpdateScalars& scalars);

  torch::Tensor params_;  // view of the flat buffer: [range.count]
  ShardRange range_;
  std::vector<ShardRange> decayed_;
  // The range tiled by decayed_ and the gaps between (fixed at construction).
  std::vector<AdamWSegment> segments_;
  // The fused kernel's tensor lists, one group per weight decay (decayed spans, the rest): views
  // of params_ and the moments, built once; only the gradient views change per update.
  struct FusedGroup {
    bool decays = false;
    std::vector<AdamWSegment> segments;
    std::vector<torch::Tensor> params, exp_avgs, exp_avg_sqs, steps;
  };
  std::vector<FusedGroup> fused_groups_;
  AdamWKernel kernel_ = AdamWKernel::kLoop;
  torch::Tensor step_tensor_;  // float32 [1] on the device: the fused kernel's step count
  torch::Tensor exp_avg_, exp_avg_sq_;
  int64_t step_ = 0;
  bool imported_ = false;
};

}  // namespace retort::trainer
