// StepProfiler: per-step phase times as JSON lines, and a summary that names the bottleneck.
//
// Rules (thresholds in ProfilerOptions):
// - data-loader bound: mean data wait > 20% of the mean step time;
// - communication bound: mean exposed communication > 20% of the mean step time;
// - step-time outliers: steps whose total time is more than 5 sigma above the median, with
//   sigma estimated robustly as 1.4826 x the median absolute deviation (a plain standard
//   deviation is inflated by the outliers it is meant to find);
// - otherwise compute bound, naming the largest compute phase.
// Std-only header. Not thread-safe: one trainer thread records.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace retort::trainer {

struct StepTiming {
  int64_t step = 0;
  double data_wait = 0;        // seconds waiting for the batch (measured by the caller)
  double teacher_forward = 0;  // 0 when served from the teacher-logit cache
  double student_forward = 0;  // includes the loss
  double backward = 0;         // includes hooks that launch bucket reduce-scatters
  double comm_exposed = 0;     // waiting on collectives after backward and for the all-gather
  double optimizer = 0;        // clipping, AdamW on this rank's range
  double total = 0;            // data_wait + everything the step did
  bool teacher_cached = false;
  bool skipped = false;  // non-finite gradients: the update was skipped
};

// One JSON object, no trailing newline.
std::string StepTimingJson(const StepTiming& t);

struct ProfilerOptions {
  double data_bound_fraction = 0.2;
  double comm_bound_fraction = 0.2;
  double outlier_sigmas = 5.0;
};

struct ProfileSummary {
  int64_t steps = 0;
  StepTiming mean;  // per-phase means (step = number of steps)
  std::vector<int64_t> outlier_steps;
  std::vector<std::string> findings;  // e.g. "data-loader bound: data wait is 35% of step time"
  std::string bottleneck;             // "data_loader", "communication", "compute:<phase>"
  std::string ToJson() const;
};

class StepProfiler {
 public:
  explicit StepProfiler(ProfilerOptions options = {}, std::ostream* json_lines = nullptr)
      : options_(options), out_(json_lines) {}
  // Records one step and, when a stream was given, writes its JSON line.
  void Record(const StepTiming& timing);
  ProfileSummary Summarize() const;
  const std::vector<StepTiming>& steps() const { return steps_; }

 private:
  ProfilerOptions options_;
  std::ostream* out_;
  std::vector<StepTiming> steps_;
};

}  // namespace retort::trainer
