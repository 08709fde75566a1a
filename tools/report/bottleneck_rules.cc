#include "tools/report/bottleneck_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/format_number.h"

namespace retort::report {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string Pct(double fraction) { return FormatNumber("%.0f%%", 100.0 * fraction); }

std::string Sec(double s) { return FormatNumber("%.3g s", s); }

std::string Num(double v) { return FormatNumber("%.3g", v); }

std::string StepList(const std::vector<int64_t>& steps) {
  std::string out;
  for (size_t i = 0; i < steps.size() && i < 10; ++i)
    out += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > 10) out += ", ...";
  return out;
}

double Busy(const StepLine& l) { return l.step_s - l.phase_s[metrics::kCommExposed]; }

}  // namespace

Analysis Analyze(const RunLogs& run, const RuleOptions& o) {
  Analysis a;
  // step -> (worker index, line)
  std::map<int64_t, std::vector<std::pair<size_t, StepLine>>> by_step;
  std::vector<std::vector<StepLine>> latest;
  for (size_t w = 0; w < run.workers.size(); ++w) {
    latest.push_back(run.workers[w].Latest());
    for (const StepLine& l : latest.back()) by_step[l.step].push_back({w, l});
  }
  a.steps = static_cast<int64_t>(by_step.size());
  if (by_step.empty()) {
    a.bottleneck = "none";
    return a;
  }

  // Means over all ranks and steps.
  double mean_step = 0, n = 0;
  for (const auto& lines : latest)
    for (const StepLine& l : lines) {
      for (int i = 0; i < kPhaseCount; ++i) a.mean_phase_s[i] += l.phase_s[i];
      mean_step += l.step_s;
      ++n;
    }
  for (double& v : a.mean_phase_s) v /= n;
  mean_step /= n;

  // Per step: the slowest rank's time and the largest checkpoint.
  std::vector<int64_t> step_ids;
  std::vector<double> slowest, checkpoint;
  for (const auto& [step, lines] : by_step) {
    double s = 0, c = 0;
    for (const auto& [w, l] : lines) {
      s = std::max(s, l.step_s);
      c = std::max(c, l.phase_s[metrics::kCheckpoint]);
    }
    step_ids.push_back(step);
    slowest.push_back(s);
    checkpoint.push_back(c);
  }
  const double median = Median(slowest);
  a.median_step_s = median;

  // data_loader
  if (mean_step > 0 && a.mean_phase_s[metrics::kDataWait] > o.data_fraction * mean_step) {
    Finding f;
    f.rule = "data_loader";
    f.text = "data-loader bound: waiting for batches is " +
             Pct(a.mean_phase_s[metrics::kDataWait] / mean_step) +
             " of the mean step time (threshold " + Pct(o.data_fraction) +
             "): more loader threads, cheaper decode/augmentation, or a faster disk";
    a.findings.push_back(f);
  }

  // communication: judged on the rank that waits least on it.
  double least_comm_share = 1e300;
  for (const auto& lines : latest) {
    double comm = 0, total = 0;
    for (const StepLine& l : lines) {
      comm += l.phase_s[metrics::kCommExposed];
      total += l.step_s;
    }
    if (total > 0) least_comm_share = std::min(least_comm_share, comm / total);
  }
  if (least_comm_share < 1e300 && least_comm_share > o.comm_fraction) {
    Finding f;
    f.rule = "communication";
    f.text = "communication bound: even the rank that waits least spends " + Pct(least_comm_share) +
             " of its step time in exposed communication (threshold " + Pct(o.comm_fraction) +
             "): larger buckets, more overlap, or a faster link";
    a.findings.push_back(f);
  }

  // straggler
  for (size_t w = 0; w < run.workers.size(); ++w) {
    int slower = 0, compared = 0;
    std::vector<double> excess_ratio;
    double phase_excess[kPhaseCount] = {};
    int rank = -1;
    for (const StepLine& l : latest[w]) {
      const auto& lines = by_step[l.step];
      if (lines.size() < 2) continue;
      std::vector<double> others;
      std::vector<double> other_phase[kPhaseCount];
      for (const auto& [v, ol] : lines) {
        if (v == w) continue;
        others.push_back(Busy(ol));
        for (int i = 0; i < kPhaseCount; ++i) other_phase[i].push_back(ol.phase_s[i]);
      }
      const double med = Median(others);
      ++compared;
      rank = l.rank;
      if (med > 0 && Busy(l) > med * (1 + o.straggler_margin)) {
        ++slower;
        excess_ratio.push_back(Busy(l) / med - 1);
        for (int i = 0; i < kPhaseCount; ++i)
          if (i != metrics::kCommExposed) phase_excess[i] += l.phase_s[i] - Median(other_phase[i]);
      }
    }
    if (compared < o.min_steps || slower < o.straggler_step_share * compared) continue;
    int top = 0;
    for (int i = 1; i < kPhaseCount; ++i)
      if (phase_excess[i] > phase_excess[top]) top = i;
    Finding f;
    f.rule = "straggler";
    f.workers = {run.workers[w].name};
    f.ranks = {rank};
    f.text = "straggler: rank " + std::to_string(rank) + " (" + run.workers[w].name +
             ") is busier than the median of the other ranks by more than " +
             Pct(o.straggler_margin) + " in " + std::to_string(slower) + " of " +
             std::to_string(compared) + " steps (median excess " + Pct(Median(excess_ratio)) +
             ", mostly " + kPhaseNames[top] + ": +" + Sec(phase_excess[top] / slower) +
             " per step); the other ranks wait for it in exposed communication";
    a.findings.push_back(f);
  }

  // outliers (steps with a checkpoint belong to the checkpoint rule)
  {
    std::vector<double> deviations;
    for (double s : slowest) deviations.push_back(std::abs(s - median));
    const double sigma = std::max(1.4826 * Median(deviations), 0.01 * median);
    Finding f;
    f.rule = "outliers";
    for (size_t i = 0; i < slowest.size(); ++i)
      if (checkpoint[i] <= 0 && slowest[i] > median + o.outlier_sigmas * sigma &&
          slowest[i] > o.outlier_min_ratio * median)
        f.steps.push_back(step_ids[i]);
    if (!f.steps.empty() && static_cast<int64_t>(slowest.size()) >= o.min_steps) {
      double worst = 0;
      for (size_t i = 0; i < slowest.size(); ++i)
        for (int64_t s : f.steps)
          if (step_ids[i] == s) worst = std::max(worst, slowest[i]);
      f.text = "step-time outliers: " + std::to_string(f.steps.size()) + " step(s) beyond " +
               Num(o.outlier_sigmas) + " robust sigma and " + Num(o.outlier_min_ratio) +
               "x the median step of " + Sec(median) + " (worst " + Sec(worst) + "; steps " +
               StepList(f.steps) + ")";
      a.findings.push_back(f);
    }
  }

  // checkpoint stalls
  {
    Finding f;
    f.rule = "checkpoint_stall";
    double worst = 0;
    for (size_t i = 0; i < checkpoint.size(); ++i)
      if (median > 0 && checkpoint[i] > o.checkpoint_fraction * median) {
        f.steps.push_back(step_ids[i]);
        worst = std::max(worst, checkpoint[i]);
      }
    if (!f.steps.empty()) {
      f.text = "checkpoint stalls: " + std::to_string(f.steps.size()) +
               " checkpoint step(s) spent more than " + Pct(o.checkpoint_fraction) +
               " of a median step (" + Sec(median) + ") snapshotting (worst " + Sec(worst) +
               "; steps " + StepList(f.steps) + ")";
      a.findings.push_back(f);
    }
  }

  // rebalanced: a worker whose share changed from one step to the next of the same generation
  {
    Finding f;
    f.rule = "rebalanced";
    int64_t first = 0;
    std::string shares;
    for (size_t w = 0; w < run.workers.size(); ++w) {
      const std::vector<StepLine>& lines = latest[w];
      bool changed = false;
      for (size_t i = 1; i < lines.size(); ++i) {
        const StepLine& prev = lines[i - 1];
        const StepLine& cur = lines[i];
        if (cur.generation != prev.generation || cur.local_batch <= 0 || prev.local_batch <= 0 ||
            cur.local_batch == prev.local_batch)
          continue;
        changed = true;
        if (first == 0 || cur.step < first) first = cur.step;
      }
      if (lines.empty()) continue;
      shares += (shares.empty() ? "" : ", ") + run.workers[w].name + " " +
                std::to_string(lines.back().local_batch);
      if (changed) f.workers.push_back(run.workers[w].name);
    }
    if (first > 0) {
      f.steps = {first};
      f.text =
          "rebalanced: straggler rebalancing changed the ranks' shares of the global batch "
          "from step " +
          std::to_string(first) + "; samples per worker at its last step: " + shares;
      a.findings.push_back(f);
    }
  }

  for (const Finding& f : a.findings)
    if (f.rule == "data_loader" || f.rule == "communication" || f.rule == "straggler") {
      a.bottleneck = f.rule;
      break;
    }
  if (a.bottleneck.empty()) {
    int top = metrics::kTeacherForward;
    for (int i : {metrics::kStudentForward, metrics::kBackward, metrics::kOptimizer})
      if (a.mean_phase_s[i] > a.mean_phase_s[top]) top = i;
    a.bottleneck = std::string("compute:") + kPhaseNames[top];
  }
  return a;
}

}  // namespace retort::report
