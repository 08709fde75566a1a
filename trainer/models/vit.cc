#include "trainer/models/vit.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/_transformer_encoder_layer_fwd.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/autograd.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <map>
#include <memory>

#include "models/vit_presets.h"

namespace retort::trainer {
namespace {

namespace nn = torch::nn;

struct AttentionImpl : nn::Module {
  AttentionImpl(int64_t dim, int64_t heads, VitAttention kind)
      : heads(heads), head_dim(dim / heads), kind(kind) {
    qkv = register_module("qkv", nn::Linear(dim, 3 * dim));
    proj = register_module("proj", nn::Linear(dim, dim));
  }
  torch::Tensor forward(const torch::Tensor& x) { return proj(mix(qkv(x), x.size(0), x.size(1))); }
  // Multi-head attention from the qkv projection ([b, n, 3d] or [b*n, 3d]) to the heads'
  // concatenated outputs [b, n, d], before the output projection.
  torch::Tensor mix(const torch::Tensor& qkv_out, int64_t b, int64_t n) const {
    if (uses_sdpa(qkv_out)) {
      auto parts = head_views(qkv_out, b, n, 3);
      return sdpa(parts[0], parts[1], parts[2], b, n);
    }
    auto split = split_heads(qkv_out, b, n, 3);
    return attend(split[0], split[1], split[2], b, n);
  }
  bool uses_sdpa(const torch::Tensor& x) const {
    return kind == VitAttention::kScaledDotProduct || (kind == VitAttention::kAuto && x.is_cuda());
  }
  // `parts` projections side by side ([b, n, parts*d] or [b*n, parts*d]) as strided views
  // [parts, b, heads, n, hd], no copy: scaled_dot_product_attention takes them as they are
  // (its kernels need only the head dimension contiguous), as timm's attention does.
  torch::Tensor head_views(const torch::Tensor& projected, int64_t b, int64_t n,
                           int64_t parts) const {
    return projected.reshape({b, n, parts, heads, head_dim}).permute({2, 0, 3, 1, 4});
  }
  // at::scaled_dot_product_attention of q [b, heads, m, hd] over k, v [b, heads, n, hd] (any
  // strides with a contiguous head dimension); the heads' outputs concatenated, [b, m, d].
  torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     int64_t b, int64_t m) const {
    return at::scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(
        {b, m, heads * head_dim});
  }
  // `parts` projections side by side ([b, n, parts*d] or [b*n, parts*d]) as
  // [parts, b*heads, n, hd]: [b, n, parts, heads, hd] -> [parts, b, heads, n, hd] in one layout
  // copy, so each part is a contiguous 3-d view and the batched GEMMs in attend() run without
  // the hidden copies 4-d matmul makes of permuted inputs.
  torch::Tensor split_heads(const torch::Tensor& projected, int64_t b, int64_t n,
                            int64_t parts) const {
    return projected.reshape({b, n, parts, heads, head_dim})
        .permute({2, 0, 3, 1, 4})
        .contiguous()
        .view({parts, b * heads, n, head_dim});
  }
  // Attention by batched matmuls of queries q [b*heads, m, hd] over k, v [b*heads, n, hd]
  // (split_heads' layout); returns the heads' outputs concatenated, [b, m, d].
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       int64_t b, int64_t m) const {
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    auto weights = torch::bmm(q * scale, k.transpose(1, 2)).softmax(-1);
    return torch::bmm(weights, v)
        .view({b, heads, m, head_dim})
        .transpose(1, 2)
        .reshape({b, m, heads * head_dim});
  }
  int64_t heads, head_dim;
  VitAttention kind;
  nn::Linear qkv{nullptr}, proj{nullptr};
};
TORCH_MODULE(Attention);

struct MlpImpl : nn::Module {
  MlpImpl(int64_t dim, int64_t hidden) {
    fc1 = register_module("fc1", nn::Linear(dim, hidden));
    fc2 = register_module("fc2", nn::Linear(hidden, dim));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::gelu(fc1(x))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

nn::LayerNorm MakeNorm(int64_t dim, double eps) {
  return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(eps));
}

struct BlockImpl : nn::Module {
  BlockImpl(const VitConfig& c) {
    norm1 = register_module("norm1", MakeNorm(c.dim, c.layer_norm_eps));
    attn = register_module("attn", Attention(c.dim, c.heads, c.attention));
    norm2 = register_module("norm2", MakeNorm(c.dim, c.layer_norm_eps));
    mlp = register_module("mlp", Mlp(c.dim, c.dim * c.mlp_ratio));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = x + attn(norm1(x));
    return x + mlp(norm2(x));
  }
  // The same block through ATen's fused encoder-layer kernel (pre-norm, exact GELU): fewer
  // layout copies in attention. Inference only (no autograd formula), used for frozen teachers.
  torch::Tensor forward_fused(const torch::Tensor& x) {
    return at::_transformer_encoder_layer_fwd(
        x, x.size(2), attn->heads, attn->qkv->weight, attn->qkv->bias, attn->proj->weight,
        attn->proj->bias, /*use_gelu=*/true, /*norm_first=*/true, norm1->options.eps(),
        norm1->weight, norm1->bias, norm2->weight, norm2->bias, mlp->fc1->weight, mlp->fc1->bias,
        mlp->fc2->weight, mlp->fc2->bias);
  }
  // The class-token row of forward(x), [b, 1, d], computing only what that row depends on:
  // keys and values for every token, but the query, attention, projection and MLP for the
  // class token alone. Same math as forward(x).narrow(1, 0, 1); differentiable. The model's
  // last block runs this way because the head reads nothing else (for fm-teacher it skips
  // about 14% of the forward's multiply-adds; 21% of fm-student's forward and backward).
  torch::Tensor forward_class_token(const torch::Tensor& x) {
    const int64_t b = x.size(0), n = x.size(1), d = x.size(2);
    const int64_t heads = attn->heads, head_dim = attn->head_dim;
    auto h = norm1(x);
    const auto& w = attn->qkv->weight;
    const auto& bias = attn->qkv->bias;
    auto q = torch::linear(h.narrow(1, 0, 1), w.narrow(0, 0, d), bias.narrow(0, 0, d));
    auto kv_out = torch::linear(h, w.narrow(0, d, 2 * d), bias.narrow(0, d, 2 * d));
    torch::Tensor mixed;
    if (attn->uses_sdpa(x)) {
      // Strided views, no copies: q [b, heads, 1, hd], k and v [b, heads, n, hd].
      auto kv = attn->head_views(kv_out, b, n, 2);
      mixed = attn->sdpa(q.view({b, 1, heads, head_dim}).transpose(1, 2), kv[0], kv[1], b, 1);
    } else {
      auto kv = attn->split_heads(kv_out, b, n, 2);
      mixed = attn->attend(q.view({b * heads, 1, head_dim}), kv[0], kv[1], b, 1);
    }
    auto y = x.narrow(1, 0, 1) + attn->proj(mixed);
    return y + mlp(norm2(y));
  }
  nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

struct PatchEmbedImpl : nn::Module {
  PatchEmbedImpl(const VitConfig& c) : patch(c.patch_size) {
    proj = register_module(
        "proj",
        nn::Conv2d(nn::Conv2dOptions(c.in_channels, c.dim, c.patch_size).stride(c.patch_size)));
  }
  // Non-overlapping patches as one GEMM: [b, C, H, W] -> [b, N, C*p*p] x W^T (same math and
  // weight layout as the strided Conv2d, which is slower on CPU for these shapes).
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), c = x.size(1), gh = x.size(2) / patch, gw = x.size(3) / patch;
    auto patches = x.reshape({b, c, gh, patch, gw, patch})
                       .permute({0, 2, 4, 1, 3, 5})
                       .reshape({b, gh * gw, c * patch * patch});
    auto w = proj->weight.reshape({proj->weight.size(0), -1});
    return torch::linear(patches, w, proj->bias);
  }
  int64_t patch;
  nn::Conv2d proj{nullptr};
};
TORCH_MODULE(PatchEmbed);

struct VitImpl : nn::Module {
  explicit VitImpl(const VitConfig& c) : config(c) {
    const int64_t num_patches = (c.image_size / c.patch_size) * (c.image_size / c.patch_size);
    cls_token = register_parameter("cls_token", torch::zeros({1, 1, c.dim}));
    pos_embed = register_parameter("pos_embed", torch::zeros({1, num_patches + 1, c.dim}));
    patch_embed = register_module("patch_embed", PatchEmbed(c));
    blocks = register_module("blocks", nn::ModuleList());
    for (int64_t i = 0; i < c.depth; ++i) blocks->push_back(Block(c));
    norm = register_module("norm", MakeNorm(c.dim, c.layer_norm_eps));
    head = register_module("head", nn::Linear(c.dim, c.num_classes));
  }
  torch::Tensor forward(const torch::Tensor& images) {
    auto x = patch_embed(images);
    x = torch::cat({cls_token.expand({x.size(0), 1, x.size(2)}), x}, 1) + pos_embed;
    // Frozen forward on CPU (eval mode, no autograd) takes the fused kernel; training, and CUDA
    // (where bf16 autocast covers the plain path's GEMMs but not the fused op), the plain path.
    const bool fused = x.is_cpu() && !is_training() && !torch::GradMode::is_enabled();
    const size_t last = blocks->size() - 1;
    for (size_t i = 0; i < blocks->size(); ++i) {
      auto* b = (*blocks)[i]->as<BlockImpl>();
      if (i == last && config.last_block_class_token_only)
        x = b->forward_class_token(x);
      else
        x = fused ? b->forward_fused(x) : b->forward(x);
    }
    x = norm(x.narrow(1, 0, 1));
    return head(x.select(1, 0));
  }
  VitConfig config;
  torch::Tensor cls_token, pos_embed;
  PatchEmbed patch_embed{nullptr};
  nn::ModuleList blocks{nullptr};
  nn::LayerNorm norm{nullptr};
  nn::Linear head{nullptr};
};
TORCH_MODULE(Vit);

void TruncNormal(torch::Tensor t, double std, at::Generator& gen) {
  t.normal_(0.0, std, gen);
  for (int i = 0; i < 8; ++i) {
    auto outside = t.abs() > 2 * std;
    if (!outside.any().item<bool>()) return;
    t.masked_scatter_(outside, torch::empty_like(t).normal_(0.0, std, gen).masked_select(outside));
  }
  t.clamp_(-2 * std, 2 * std);
}

class VitModel final : public Model {
 public:
  VitModel(const VitConfig& config, uint64_t seed) : vit_(config) {
    torch::NoGradGuard no_grad;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (auto& item : vit_->named_parameters()) {
      const std::string& name = item.key();
      torch::Tensor p = item.value();
      const bool is_norm = name.find("norm") != std::string::npos;
      const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
      if (is_norm) {
        p.fill_(is_bias ? 0.0 : 1.0);
      } else if (is_bias) {
        p.zero_();
      } else {
        TruncNormal(p, 0.02, gen);
      }
    }
  }
  torch::Tensor Forward(const torch::Tensor& images) override { return vit_->forward(images); }
  std::vector<std::pair<std::string, torch::Tensor>> NamedParameters() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (auto& item : vit_->named_parameters()) out.emplace_back(item.key(), item.value());
    return out;
  }
  void SetTraining(bool training) override { vit_->train(training); }
  bool IsTraining() const override { return vit_->is_training(); }
  void To(torch::Device device) override { vit_->to(device); }
  std::string Describe() const override { return "vit:" + vit_->config.name; }

 private:
  Vit vit_;
};

const std::map<std::string, VitConfig>& Presets() {
  static const auto* presets = [] {
    auto* m = new std::map<std::string, VitConfig>();
    for (const models::VitPresetShape& p : models::VitPresetShapes()) {
      VitConfig c;
      c.name = std::string(p.name);
      c.image_size = p.image_size;
      c.in_channels = p.in_channels;
      c.patch_size = p.patch_size;
      c.dim = p.dim;
      c.depth = p.depth;
      c.heads = p.heads;
      c.num_classes = p.num_classes;
      (*m)[c.name] = c;
    }
    return m;
  }();
  return *presets;
}

}  // namespace

StatusOr<VitConfig> VitPreset(const std::string& name) {
  auto it = Presets().find(name);
  if (it == Presets().end()) {
    return NotFoundError("unknown ViT preset '" + name +
                         "' (known presets: " + models::VitPresetNameList() + ")");
  }
  return it->second;
}

Status ValidateVitConfig(const VitConfig& c) {
  auto positive = [](const char* field, int64_t v) -> Status {
    if (v > 0) return Status::Ok();
    return InvalidArgumentError(std::string("ViT config: ") + field + " must be > 0, got " +
                                std::to_string(v));
  };
  RETORT_RETURN_IF_ERROR(positive("image_size", c.image_size));
  RETORT_RETURN_IF_ERROR(positive("in_channels", c.in_channels));
  RETORT_RETURN_IF_ERROR(positive("patch_size", c.patch_size));
  RETORT_RETURN_IF_ERROR(positive("dim", c.dim));
  RETORT_RETURN_IF_ERROR(positive("depth", c.depth));
  RETORT_RETURN_IF_ERROR(positive("heads", c.heads));
  RETORT_RETURN_IF_ERROR(positive("mlp_ratio", c.mlp_ratio));
  RETORT_RETURN_IF_ERROR(positive("num_classes", c.num_classes));
  if (c.image_size % c.patch_size != 0)
    return InvalidArgumentError("ViT config: image_size " + std::to_string(c.image_size) +
                                " is not divisible by patch_size " + std::to_string(c.patch_size));
  if (c.dim % c.heads != 0)
    return InvalidArgumentError("ViT config: dim " + std::to_string(c.dim) +
                                " is not divisible by heads " + std::to_string(c.heads));
  return Status::Ok();
}

StatusOr<std::unique_ptr<Model>> MakeVit(const VitConfig& config, uint64_t seed) {
  RETORT_RETURN_IF_ERROR(ValidateVitConfig(config));
  return std::unique_ptr<Model>(std::make_unique<VitModel>(config, seed));
}

StatusOr<std::unique_ptr<Model>> MakeVitPreset(const std::string& preset, uint64_t seed) {
  RETORT_ASSIGN_OR_RETURN(VitConfig config, VitPreset(preset));
  return MakeVit(config, seed);
}

}  // namespace retort::trainer
