#include "collectives/ucx/cma_chooser.h"

#include <algorithm>
#include <bit>

#include "common/enum_names.h"

namespace retort::collectives::ucx {

StatusOr<CmaPolicy> ParseCmaPolicy(const std::string& text) {
  static constexpr NamedValue<CmaPolicy> kNames[] = {{CmaPolicy::kAdaptive, "adaptive"},
                                                     {CmaPolicy::kAlways, "always"},
                                                     {CmaPolicy::kNever, "never"}};
  CmaPolicy policy;
  if (ValueIn(kNames, text, &policy)) return policy;
  return InvalidArgumentError("CMA policy '" + text + "' is not one of adaptive, always, never");
}

const char* OperationKindName(OperationKind kind) {
  static constexpr NamedValue<OperationKind> kNames[] = {
      {OperationKind::kReduceScatter, "reduce_scatter"}, {OperationKind::kAllGather, "all_gather"},
      {OperationKind::kAllReduce, "all_reduce"},         {OperationKind::kBroadcast, "broadcast"},
      {OperationKind::kAllToAll, "all_to_all_v"},        {OperationKind::kBarrier, "barrier"}};
  return NameIn(kNames, kind, "operation");
}

int CmaChooser::ClassOf(size_t bytes) {
  const int log2 = bytes == 0 ? 0 : std::bit_width(bytes) - 1;
  return log2 < kClasses ? log2 : kClasses - 1;
}

CmaChooser::SizeClass& CmaChooser::ClassFor(OperationKind kind, size_t operation_bytes) {
  return classes_[static_cast<int>(kind)][ClassOf(operation_bytes)];
}

const CmaChooser::SizeClass& CmaChooser::ClassFor(OperationKind kind,
                                                  size_t operation_bytes) const {
  return classes_[static_cast<int>(kind)][ClassOf(operation_bytes)];
}

bool CmaChooser::UseCmaFor(OperationKind kind, size_t operation_bytes) {
  if (policy_ != CmaPolicy::kAdaptive) return policy_ == CmaPolicy::kAlways;
  SizeClass& c = ClassFor(kind, operation_bytes);
  const uint64_t decision = c.decisions++;
  // Warm-up: alternate until each protocol has its samples.
  if (c.cma.samples < kWarmup || c.fifo.samples < kWarmup) {
    if (c.cma.samples != c.fifo.samples) return c.cma.samples < c.fifo.samples;
    return decision % 2 == 0;
  }
  const bool cma_faster = *PrefersCma(kind, operation_bytes);
  const bool explore = decision % kExploreEvery == kExploreEvery - 1;
  return explore ? !cma_faster : cma_faster;
}

void CmaChooser::Record(OperationKind kind, size_t operation_bytes, bool cma,
                        size_t same_host_bytes, std::chrono::nanoseconds elapsed) {
  if (policy_ != CmaPolicy::kAdaptive || same_host_bytes == 0 || elapsed.count() <= 0) return;
  SizeClass& c = ClassFor(kind, operation_bytes);
  Protocol& p = cma ? c.cma : c.fifo;
  const double rate =
      static_cast<double>(same_host_bytes) * 1e9 / static_cast<double>(elapsed.count());
  p.recent[p.samples % kWindow] = rate;
  ++p.samples;
}

double CmaChooser::Protocol::Rate() const {
  if (samples == 0) return 0;
  return *std::max_element(recent.begin(), recent.begin() + std::min<int64_t>(samples, kWindow));
}

std::optional<bool> CmaChooser::PrefersCma(OperationKind kind, size_t operation_bytes) const {
  const SizeClass& c = ClassFor(kind, operation_bytes);
  if (policy_ != CmaPolicy::kAdaptive || c.cma.samples < kWarmup || c.fifo.samples < kWarmup) {
    return std::nullopt;
  }
  return c.cma.Rate() >= c.fifo.Rate();
}

double CmaChooser::RateFor(OperationKind kind, size_t operation_bytes, bool cma) const {
  const SizeClass& c = ClassFor(kind, operation_bytes);
  return cma ? c.cma.Rate() : c.fifo.Rate();
}

}  // namespace retort::collectives::ucx
