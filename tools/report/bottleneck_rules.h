// Rules that name what slowed a run, from every rank's step log (step_logs.h). Each rule
// states its threshold in its finding's text:
// - data_loader: the mean data wait over all ranks and steps is > data_fraction of the mean
//   step time;
// - communication: even the rank that waits least on exposed communication (the one the others
//   wait for) spends > comm_fraction of its step time in it: the link, not a slow rank, is the
//   bottleneck;
// - straggler: a rank whose busy time (step time minus exposed communication: what it does
//   itself, data wait included) exceeds the median of the other ranks' by > straggler_margin
//   in >= straggler_step_share of the steps it ran (at least min_steps steps); the finding
//   names the phase that makes up most of the excess;
// - outliers: steps whose time (slowest rank) is more than outlier_sigmas robust sigmas
//   (1.4826 x median absolute deviation, floored at 1% of the median) above the median and
//   more than outlier_min_ratio x the median (steps that wrote a checkpoint are the
//   checkpoint rule's);
// - checkpoint_stall: steps whose checkpoint snapshot took > checkpoint_fraction of the median
//   step time on the slowest rank;
// - rebalanced: straggler rebalancing changed the ranks' shares of the global batch (their
//   local_batch) within a generation; the finding names the first change and each worker's
//   share at its last step (information, not a bottleneck: `bottleneck` is unaffected).
// A clean run has no findings; `bottleneck` then names the largest compute phase.
#pragma once

#include <string>
#include <vector>

#include "tools/report/step_logs.h"

namespace retort::report {

struct RuleOptions {
  double data_fraction = 0.2;
  double comm_fraction = 0.2;
  double straggler_margin = 0.15;
  double straggler_step_share = 0.5;
  double outlier_sigmas = 5.0;
  double outlier_min_ratio = 1.5;
  double checkpoint_fraction = 0.5;
  int min_steps = 5;
};

struct Finding {
  std::string rule;  // data_loader, communication, straggler, outliers, checkpoint_stall,
                     // rebalanced
  std::string text;  // one sentence for people
  std::vector<std::string> workers;  // the workers it names (straggler, rebalanced)
  std::vector<int> ranks;            // their ranks (straggler)
  std::vector<int64_t> steps;  // the steps it names (outliers, checkpoint_stall; rebalanced: the
                               // first change)
};

struct Analysis {
  std::vector<Finding> findings;
  // "data_loader", "communication", "straggler", or "compute:<phase>" (the largest mean
  // compute phase) when no rule fired.
  std::string bottleneck;
  int64_t steps = 0;                      // distinct steps seen
  double median_step_s = 0;               // of the per-step slowest rank
  double mean_phase_s[kPhaseCount] = {};  // over all ranks and steps
};

Analysis Analyze(const RunLogs& run, const RuleOptions& options = {});

}  // namespace retort::report
