// Checks on a job's metrics.jsonl for the elasticity scenarios: which steps completed, whether
// steps were redone after an event, and how far the loss curve is from an uninterrupted
// reference run of the same job. Pure functions; each returns a description of what is wrong
// (empty when nothing is) so tests can print it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "elastic/elastic_cluster.h"

namespace retort::elastic_testing {

// Relative loss tolerance for a run whose membership changed in place, against the
// uninterrupted reference. World-size invariance makes 1, 2 and 3 workers agree to ~1e-6
// relative (floating-point reassociation of the gradient sums); over the 120 steps of the
// scenarios that noise grows to at most ~1.4e-4 (measured: a join 2 -> 3 stays below 1e-6, a
// 3 -> 2 change peaks at 1.4e-4 at one step near the end). Losing state moves the loss much
// more: optimizer moments restarting from zero after a kill -9 gave 5e-2, a zombie's stale
// rank 1.8e-2. 1e-3 sits between the two with a margin of ~7x on one side and ~18x on the other.
constexpr double kLossRelTolerance = 1e-3;

// Steps in [1, total] that appear on no line ("" when all do), e.g. "17, 18, 19".
std::string MissingSteps(const std::vector<MetricLine>& lines, int64_t total);

// Lines at index >= first_after_event whose step is below last_step_before_event: steps that had
// completed before the event and were run again after it (lost progress). "" when none.
std::string RedoneSteps(const std::vector<MetricLine>& lines, size_t first_after_event,
                        int64_t last_step_before_event);

// Steps on more than one line, each with the generations of its lines in file order, e.g.
// {57: {3, 4}}. A failure (kill -9, an eviction) may leave the step in flight completed by the
// old generation's rank 0 and run again by the next generation from state one step older: that
// step appears twice, in two generations. Empty when every step appears once.
std::map<int64_t, std::vector<uint64_t>> RepeatedSteps(const std::vector<MetricLine>& lines);

struct CurveComparison {
  double worst_relative = 0;
  int64_t worst_step = 0;
  int violations = 0;    // lines above the tolerance
  std::string problems;  // the first few violations, readable
};

// Compares every line's loss with reference[step - 1].
CurveComparison CompareToReference(const std::vector<MetricLine>& lines,
                                   const std::vector<double>& reference, double tolerance);

// The world sizes of consecutive runs of lines, e.g. {2, 3} for 2,2,2,3,3.
std::vector<int> WorldSizeSequence(const std::vector<MetricLine>& lines);

// Text of a sequence, e.g. "2 -> 3".
std::string SequenceText(const std::vector<int>& seq);

}  // namespace retort::elastic_testing
