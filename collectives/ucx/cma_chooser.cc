#include "collectives/ucx/cma_chooser.h"

#include <algorithm>
#include <bit>

namespace retort::collectives::ucx {

int CmaChooser::ClassOf(size_t bytes) {
  const int log2 = bytes == 0 ? 0 : std::bit_width(bytes) - 1;
  return log2 < kClasses ? log2 : kClasses - 1;
}

bool CmaChooser::UseCmaFor(size_t largest_message) {
  if (policy_ != CmaPolicy::kAdaptive) return policy_ == CmaPolicy::kAlways;
  SizeClass& c = classes_[ClassOf(largest_message)];
  const uint64_t decision = c.decisions++;
  // Warm-up: alternate until each protocol has its samples.
  if (c.cma.samples < kWarmup || c.fifo.samples < kWarmup) {
    if (c.cma.samples != c.fifo.samples) return c.cma.samples < c.fifo.samples;
    return decision % 2 == 0;
  }
  const bool cma_faster = *PrefersCma(largest_message);
  const bool explore = decision % kExploreEvery == kExploreEvery - 1;
  return explore ? !cma_faster : cma_faster;
}

void CmaChooser::Record(size_t largest_message, bool cma, size_t bytes,
                        std::chrono::nanoseconds elapsed) {
  if (policy_ != CmaPolicy::kAdaptive || bytes == 0 || elapsed.count() <= 0) return;
  SizeClass& c = classes_[ClassOf(largest_message)];
  Protocol& p = cma ? c.cma : c.fifo;
  const double rate = static_cast<double>(bytes) * 1e9 / static_cast<double>(elapsed.count());
  p.recent[p.samples % kWindow] = rate;
  ++p.samples;
  p.rate =
      *std::max_element(p.recent.begin(), p.recent.begin() + std::min<int64_t>(p.samples, kWindow));
}

std::optional<bool> CmaChooser::PrefersCma(size_t largest_message) const {
  const SizeClass& c = classes_[ClassOf(largest_message)];
  if (policy_ != CmaPolicy::kAdaptive || c.cma.samples < kWarmup || c.fifo.samples < kWarmup) {
    return std::nullopt;
  }
  return c.cma.rate >= c.fifo.rate;
}

double CmaChooser::RateFor(size_t largest_message, bool cma) const {
  const SizeClass& c = classes_[ClassOf(largest_message)];
  return cma ? c.cma.rate : c.fifo.rate;
}

}  // namespace retort::collectives::ucx
