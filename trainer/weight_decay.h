// Which parameters AdamW decays. timm's and DeiT's rule (timm's param_groups_weight_decay with
// VisionTransformer.no_weight_decay()): no decay for parameters with at most one dimension
// (biases, LayerNorm/BatchNorm weights), for any "*.bias", and for the learned tokens and
// position embeddings (cls_token, dist_token, reg_token, pos_embed). Everything else, i.e. the
// weight matrices and convolution kernels, decays.
//
// The flat buffer keeps the model's parameter order (checkpoints and shard plans depend on it),
// so a rank's range mixes both kinds; DecayedSpans() lists the parts of a range that decay.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "trainer/flat_parameters.h"
#include "trainer/shard_plan.h"

namespace retort::trainer {

// True when AdamW applies weight decay to the parameter named `name` with `dim` dimensions.
bool DecaysWeight(std::string_view name, int64_t dim);

// The parts of `range` (flat-buffer coordinates) whose parameters decay, in order, adjacent
// parts merged. `slots` tile the flat buffer (FlatParameters::slots()).
std::vector<ShardRange> DecayedSpans(const std::vector<ParamSlot>& slots, ShardRange range);

}  // namespace retort::trainer
