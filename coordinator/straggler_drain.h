// StragglerDrain: when to drain a member that stays far slower than the others
// (elastic.straggler.drain_below, drain_after_steps). A member whose compute throughput (its
// StepMetrics.compute_samples_per_second: samples per second of its own forward and backward,
// whatever its share of the batch) stays below `below` x the median of the other members' for
// `after_steps` steps of its own progress is drained: it leaves at its next step boundary and
// the next generation forms without it. A launcher that restarts it (retort-run, a Kubernetes
// Job) re-admits it as a new member, judged afresh. The coordinator never drains below the
// job's min_workers (its caller checks). Pure and std-only; the coordinator calls it under its
// lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace retort::coordinator {

class StragglerDrain {
 public:
  StragglerDrain(double below, int64_t after_steps) : below_(below), after_steps_(after_steps) {}

  bool enabled() const { return below_ > 0 && after_steps_ > 0; }

  // One report of `member` at `step`, its compute throughput and the median of the others'
  // (<= 0: none known). Returns how many steps it has been below when that reaches
  // after_steps (drain it now), else nullopt.
  std::optional<int64_t> Observe(const std::string& member, int64_t step, double compute_sps,
                                 double others_median) {
    if (!enabled() || !(compute_sps > 0) || !(others_median > 0)) return std::nullopt;
    if (compute_sps >= below_ * others_median) {
      below_since_.erase(member);
      return std::nullopt;
    }
    const int64_t since = below_since_.emplace(member, step).first->second;
    if (step - since < after_steps_) return std::nullopt;
    below_since_.erase(member);
    return step - since;
  }
  void Forget(const std::string& member) { below_since_.erase(member); }

 private:
  double below_;
  int64_t after_steps_;
  std::map<std::string, int64_t> below_since_;  // member -> first step seen below
};

}  // namespace retort::coordinator
