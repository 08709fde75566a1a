// Model FLOPs of training, for model-FLOPs utilisation (MFU = model FLOPs per second / the
// device's peak): the FLOPs the model's math needs (a multiply-add is 2 FLOPs), not what the
// kernels executed. A ViT forward per image counts the patch embedding, each block's qkv,
// attention scores, attention-weighted values, projection and MLP matmuls, and the head (norms,
// softmax and activations are left out, as fvcore and timm's GMAC figures do; every token of
// every block, as timm computes them). Backward is counted as twice the forward.
//
// FlopsCount::kComputed counts instead what retort's ViT actually computes: with
// VitConfig::last_block_class_token_only the last block runs its query, attention, projection
// and MLP for the class token alone (keys and values still for every token), about 7% less than
// the model's FLOPs for ViT-S/16 and ViT-B/16. Benchmarks report utilisation on both bases: model
// FLOPs (the same work for every implementation) and computed FLOPs (each side's real work).
#pragma once

#include <string>

#include "trainer/models/vit.h"

namespace retort::trainer {

enum class FlopsCount {
  kModel,     // every token of every block (timm's figures; the MFU convention)
  kComputed,  // what retort's ViT computes (the class-token-only last block)
};

// Forward FLOPs of one image.
double VitForwardFlops(const VitConfig& config, FlopsCount count = FlopsCount::kModel);

// FLOPs of one training sample of a KD step: forward and backward of the student, plus
// the teacher's forward when `teacher` is given (a teacher served from the logit cache does no
// work).
double KdTrainingFlopsPerSample(const VitConfig& student, const VitConfig* teacher,
                                FlopsCount count = FlopsCount::kModel);

// Dense bf16 tensor-core peak (FLOP/s) of a GPU by its CUDA device name, from NVIDIA's data
// sheets (H100 SXM/PCIe/NVL, H200 SXM/NVL, A100, L40S, L4, A10); 0 when the name is not known.
double PeakBf16FlopsForDevice(const std::string& device_name);

}  // namespace retort::trainer
