// Built-in Vision Transformer (timm-style pre-norm ViT with a class token) and its presets.
// Parameter names match timm's VisionTransformer (cls_token, pos_embed, patch_embed.proj.*,
// blocks.N.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}.*, norm.*, head.*), so exported
// weights load into timm or the reference module in bench/trainer/kd_reference.py.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/models/model.h"

namespace retort::trainer {

// How attention is computed. Same math; kAuto picks per device.
enum class VitAttention {
  kAuto,              // fused scaled-dot-product attention on CUDA, batched matmuls on the CPU
  kBatchedMatmul,     // softmax(q k^T / sqrt(d)) v as two bmm (fastest on the CPU for small models)
  kScaledDotProduct,  // at::scaled_dot_product_attention: flash / memory-efficient kernels
};

struct VitConfig {
  std::string name;
  int64_t image_size = 224;
  int64_t in_channels = 3;
  int64_t patch_size = 16;
  int64_t dim = 192;
  int64_t depth = 12;
  int64_t heads = 3;
  int64_t mlp_ratio = 4;
  int64_t num_classes = 1000;
  double layer_norm_eps = 1e-6;
  // The head reads only the class token, so the last block computes only that token's row
  // (same logits, less work). False runs the last block over every token, as timm does; the
  // tests use it as the reference.
  bool last_block_class_token_only = true;
  VitAttention attention = VitAttention::kAuto;
};

// The built-in preset `name`: its shape comes from the one preset table, models/vit_presets.h
// (which lists them all). Unknown names give NOT_FOUND listing the known ones.
StatusOr<VitConfig> VitPreset(const std::string& name);
// Checks divisibility (image by patch, dim by heads) and positivity, naming the field.
Status ValidateVitConfig(const VitConfig& config);

// Builds a ViT with truncated-normal(0.02) weights, zero biases, unit LayerNorm, drawn from a
// generator seeded with `seed` (so equal seeds give equal weights on every rank).
StatusOr<std::unique_ptr<Model>> MakeVit(const VitConfig& config, uint64_t seed);
StatusOr<std::unique_ptr<Model>> MakeVitPreset(const std::string& preset, uint64_t seed);

}  // namespace retort::trainer
