// ShardedAdamW: ZeRO-1 AdamW over one rank's contiguous range of the flat parameter buffer,
// with linear warmup + cosine decay of the learning rate. Matches torch.optim.AdamW
// (decoupled weight decay, bias-corrected moments, eps added after the square root).
//
// The optimizer owns fp32 exp_avg/exp_avg_sq for its range only; it updates the parameters in
// place through the flat buffer. State (range, step, params, moments) is exported/imported as
// plain tensors for checkpoints and for moving ranges between ranks on a new plan.
// Not thread-safe.
#pragma once

#include <torch/types.h>

#include <cstdint>

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

class ShardedAdamW {
 public:
  // `flat_params` is the whole flat buffer (float32 [numel]); the optimizer updates `range`.
  ShardedAdamW(AdamWOptions options, torch::Tensor flat_params, ShardRange range);

  // Applies one update with gradient `grad * grad_scale` (grad: float32 [range.count]).
  void Update(const torch::Tensor& grad, double grad_scale);

  int64_t step() const { return step_; }
  const ShardRange& range() const { return range_; }
  const AdamWOptions& options() const { return options_; }
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
  torch::Tensor params_;  // view of the flat buffer: [range.count]
  ShardRange range_;
  torch::Tensor exp_avg_, exp_avg_sq_;
  int64_t step_ = 0;
  bool imported_ = false;
};

}  // namespace retort::trainer
