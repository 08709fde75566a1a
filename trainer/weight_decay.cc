#include "trainer/weight_decay.h"

#include <algorithm>
#include <array>

namespace retort::trainer {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The last component of a dotted parameter name ("blocks.0.attn.qkv.bias" -> "bias").
std::string_view LeafName(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

}  // namespace

bool DecaysWeight(std::string_view name, int64_t dim) {
  if (dim <= 1) return false;
  if (EndsWith(name, ".bias") || name == "bias") return false;
  constexpr std::array<std::string_view, 4> kEmbeddings = {"cls_token", "dist_token", "reg_token",
                                                           "pos_embed"};
  const std::string_view leaf = LeafName(name);
  return std::find(kEmbeddings.begin(), kEmbeddings.end(), leaf) == kEmbeddings.end();
}

std::vector<ShardRange> DecayedSpans(const std::vector<ParamSlot>& slots, ShardRange range) {
  std::vector<ShardRange> spans;
  for (const ParamSlot& slot : slots) {
    if (!DecaysWeight(slot.name, slot.dim)) continue;
    const int64_t begin = std::max(slot.offset, range.offset);
    const int64_t end = std::min(slot.offset + slot.numel, range.end());
    if (begin >= end) continue;
    if (!spans.empty() && spans.back().end() == begin)
      spans.back().count += end - begin;
    else
      spans.push_back({begin, end - begin});
  }
  return spans;
}

}  // namespace retort::trainer
