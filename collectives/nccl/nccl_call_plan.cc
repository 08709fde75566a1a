#include "collectives/nccl/nccl_call_plan.h"

#include <algorithm>

#include "collectives/types.h"
#include "common/enum_names.h"

namespace retort::collectives::nccl {
namespace {

bool AllEqual(const std::vector<size_t>& counts) {
  return std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == counts[0]; });
}

size_t MaxCount(const std::vector<size_t>& counts) {
  return counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
}

// Appends a copy, merged into the previous call when that is a copy whose source and
// destination both end where this one's begin.
void AddCopy(NcclCallPlan* plan, PlanRef from, PlanRef to, size_t count) {
  if (count == 0) return;
  if (!plan->calls.empty()) {
    NcclCall& last = plan->calls.back();
    if (last.kind == NcclCallKind::kCopy && last.send.buffer == from.buffer &&
        last.recv.buffer == to.buffer && last.send.offset + last.count == from.offset &&
        last.recv.offset + last.count == to.offset) {
      last.count += count;
      return;
    }
  }
  plan->calls.push_back(NcclCall{NcclCallKind::kCopy, from, to, count, -1});
}

void AddCall(NcclCallPlan* plan, NcclCallKind kind, PlanRef send, PlanRef recv, size_t count,
             int root = -1) {
  plan->calls.push_back(NcclCall{kind, send, recv, count, root});
}

const char* KindName(NcclCallKind kind) {
  static constexpr NamedValue<NcclCallKind> kNames[] = {
      {NcclCallKind::kCopy, "copy"},
      {NcclCallKind::kReduceScatter, "ncclReduceScatter"},
      {NcclCallKind::kAllGather, "ncclAllGather"},
      {NcclCallKind::kAllReduce, "ncclAllReduce"},
      {NcclCallKind::kReduce, "ncclReduce"},
      {NcclCallKind::kBroadcast, "ncclBroadcast"}};
  return NameIn(kNames, kind, "?");
}

std::string RefName(const PlanRef& ref) {
  const char* buffer = ref.buffer == PlanBuffer::kInput    ? "input"
                       : ref.buffer == PlanBuffer::kOutput ? "output"
                                                           : "scratch";
  return std::string(buffer) + "+" + std::to_string(ref.offset);
}

constexpr PlanRef In(size_t offset) { return {PlanBuffer::kInput, offset}; }
constexpr PlanRef Out(size_t offset) { return {PlanBuffer::kOutput, offset}; }
constexpr PlanRef Scratch(size_t offset) { return {PlanBuffer::kScratch, offset}; }

}  // namespace

bool PadsToEqualCounts(const std::vector<size_t>& counts) {
  if (counts.size() < 2 || AllEqual(counts)) return false;
  const size_t total = TotalCount(counts);
  const size_t padded = counts.size() * MaxCount(counts);
  return total > 0 && 8 * (padded - total) <= total;
}

namespace {

// Where a plan needs no scratch: none at all for no elements, one `kind` call for equal counts.
// True when `plan` is then complete.
bool PlanDirect(const std::vector<size_t>& counts, NcclCallKind kind, NcclCallPlan* plan) {
  if (TotalCount(counts) == 0) return true;
  if (!AllEqual(counts)) return false;
  AddCall(plan, kind, In(0), Out(0), counts[0]);
  return true;
}

}  // namespace

NcclCallPlan PlanReduceScatterV(const std::vector<size_t>& counts, int rank) {
  NcclCallPlan plan;
  if (PlanDirect(counts, NcclCallKind::kReduceScatter, &plan)) return plan;
  const size_t n = counts.size(), m = MaxCount(counts), mine = counts[rank];
  const auto offsets = Offsets(counts);
  if (PadsToEqualCounts(counts)) {
    // [0, n*m): the padded input, rank r's part at r*m; then this rank's padded result when it
    // is shorter than m (else NCCL writes it straight into the output).
    plan.scratch_elements = n * m + (mine < m ? m : 0);
    for (size_t r = 0; r < n; ++r) AddCopy(&plan, In(offsets[r]), Scratch(r * m), counts[r]);
    AddCall(&plan, NcclCallKind::kReduceScatter, Scratch(0), mine < m ? Scratch(n * m) : Out(0), m);
    if (mine < m) AddCopy(&plan, Scratch(n * m), Out(0), mine);
    return plan;
  }
  plan.grouped = true;
  for (size_t r = 0; r < n; ++r) {
    if (counts[r] == 0) continue;
    AddCall(&plan, NcclCallKind::kReduce, In(offsets[r]), Out(0), counts[r], static_cast<int>(r));
  }
  return plan;
}

NcclCallPlan PlanAllGatherV(const std::vector<size_t>& counts, int rank) {
  NcclCallPlan plan;
  if (PlanDirect(counts, NcclCallKind::kAllGather, &plan)) return plan;
  const size_t n = counts.size(), m = MaxCount(counts), mine = counts[rank];
  const auto offsets = Offsets(counts);
  if (PadsToEqualCounts(counts)) {
    // [0, n*m): the padded output, rank r's part at r*m. A part shorter than m is sent from
    // its padded slot (in place, as ncclAllGather allows); a full one straight from the input.
    plan.scratch_elements = n * m;
    const size_t own_slot = static_cast<size_t>(rank) * m;
    if (mine < m) AddCopy(&plan, In(0), Scratch(own_slot), mine);
    AddCall(&plan, NcclCallKind::kAllGather, mine < m ? Scratch(own_slot) : In(0), Scratch(0), m);
    for (size_t r = 0; r < n; ++r) AddCopy(&plan, Scratch(r * m), Out(offsets[r]), counts[r]);
    return plan;
  }
  plan.grouped = true;
  for (size_t r = 0; r < n; ++r) {
    if (counts[r] == 0) continue;
    const int root = static_cast<int>(r);
    AddCall(&plan, NcclCallKind::kBroadcast, root == rank ? In(0) : Out(offsets[r]),
            Out(offsets[r]), counts[r], root);
  }
  return plan;
}

NcclCallPlan PlanWarmUp(int size, int rank, size_t large_elements) {
  NcclCallPlan plan;
  const size_t n = static_cast<size_t>(size), large = std::max<size_t>(large_elements, 1);
  plan.scratch_elements = n * large;
  const std::vector<size_t> counts =
      large > 1 ? std::vector<size_t>{1, large} : std::vector<size_t>{1};
  for (const size_t count : counts) {
    const size_t own = static_cast<size_t>(rank) * count;
    AddCall(&plan, NcclCallKind::kReduceScatter, Scratch(0), Scratch(own), count);
    AddCall(&plan, NcclCallKind::kAllGather, Scratch(own), Scratch(0), count);
    AddCall(&plan, NcclCallKind::kAllReduce, Scratch(0), Scratch(0), count * n);
    AddCall(&plan, NcclCallKind::kBroadcast, Scratch(0), Scratch(0), count * n, /*root=*/0);
  }
  return plan;
}

std::string Describe(const NcclCall& call) {
  std::string s = std::string(KindName(call.kind)) + " " + RefName(call.send) + " -> " +
                  RefName(call.recv) + " x" + std::to_string(call.count);
  if (call.root >= 0) s += " root " + std::to_string(call.root);
  return s;
}

std::vector<std::string> Describe(const NcclCallPlan& plan) {
  std::vector<std::string> out;
  for (const NcclCall& call : plan.calls) out.push_back(Describe(call));
  return out;
}

}  // namespace retort::collectives::nccl
