#include "elastic/metrics_checks.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace retort::elastic_testing {

std::string MissingSteps(const std::vector<MetricLine>& lines, int64_t total) {
  std::set<int64_t> seen;
  for (const auto& l : lines) seen.insert(l.step);
  std::ostringstream out;
  int listed = 0, missing = 0;
  for (int64_t s = 1; s <= total; ++s) {
    if (seen.count(s)) continue;
    ++missing;
    if (listed++ < 30) out << (listed > 1 ? ", " : "") << s;
  }
  if (missing > 30) out << " ... (" << missing << " in all)";
  return out.str();
}

std::string RedoneSteps(const std::vector<MetricLine>& lines, size_t first_after_event,
                        int64_t last_step_before_event) {
  std::ostringstream out;
  int listed = 0;
  for (size_t i = first_after_event; i < lines.size(); ++i) {
    if (lines[i].step >= last_step_before_event) continue;
    if (listed++ < 30)
      out << (listed > 1 ? ", " : "") << lines[i].step << " (generation " << lines[i].generation
          << ")";
  }
  return out.str();
}

std::map<int64_t, std::vector<uint64_t>> RepeatedSteps(const std::vector<MetricLine>& lines) {
  std::map<int64_t, std::vector<uint64_t>> by_step;
  for (const auto& l : lines) by_step[l.step].push_back(l.generation);
  std::erase_if(by_step, [](const auto& entry) { return entry.second.size() < 2; });
  return by_step;
}

CurveComparison CompareToReference(const std::vector<MetricLine>& lines,
                                   const std::vector<double>& reference, double tolerance) {
  CurveComparison c;
  std::ostringstream out;
  for (const auto& l : lines) {
    if (l.step < 1 || l.step > static_cast<int64_t>(reference.size())) {
      ++c.violations;
      out << "step " << l.step << " is outside the reference's 1.." << reference.size() << "; ";
      continue;
    }
    double ref = reference[static_cast<size_t>(l.step - 1)];
    double rel = std::abs(l.loss - ref) / std::max(1e-12, std::abs(ref));
    if (rel > c.worst_relative) {
      c.worst_relative = rel;
      c.worst_step = l.step;
    }
    if (rel > tolerance) {
      if (c.violations < 8)
        out << "step " << l.step << " (generation " << l.generation << ", world " << l.world_size
            << "): loss " << l.loss << " vs reference " << ref << " (relative " << rel << "); ";
      ++c.violations;
    }
  }
  c.problems = out.str();
  return c;
}

std::vector<int> WorldSizeSequence(const std::vector<MetricLine>& lines) {
  std::vector<int> seq;
  for (const auto& l : lines)
    if (seq.empty() || seq.back() != l.world_size) seq.push_back(l.world_size);
  return seq;
}

std::string SequenceText(const std::vector<int>& seq) {
  std::ostringstream out;
  for (size_t i = 0; i < seq.size(); ++i) out << (i ? " -> " : "") << seq[i];
  return out.str();
}

}  // namespace retort::elastic_testing
