// StepRecord: what a worker knows about one completed training step, handed to every
// StepObserver (Prometheus metrics, the per-rank step log, the step trace). Std-only.
//
// Threading: observers are called on the training thread, one step at a time, after the step
// completed (and its checkpoint snapshot, if any, was taken); they must not block for long.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "common/status.h"

#include "metrics/step_phases.h"
#include "trainer/step_profiler.h"

namespace retort::worker {

struct StepRecord {
  int64_t step = 0;  // global step just completed (1-based)
  int64_t epoch = 0;
  uint64_t generation = 0;
  int rank = 0;
  int world_size = 0;
  double loss = 0;
  double learning_rate = 0;
  double grad_norm = 0;
  bool skipped = false;           // non-finite gradients: the update was skipped
  int64_t global_batch = 0;       // samples the step consumed over all ranks
  double samples_per_second = 0;  // global_batch / wall time of the whole step
  double step_seconds = 0;        // wall time of the whole step, control all-reduce included
  // This rank's share of the global batch, and samples per second of its own compute (teacher
  // forward, student forward, backward; its waits excluded): what straggler rebalancing follows.
  int64_t local_batch = 0;
  double compute_samples_per_second = 0;
  // Model FLOPs per second of the job (trainer/model_flops.h) over the bf16 peak of its
  // world_size devices; -1 when unknown (a model that is not a built-in ViT, or a device whose
  // peak is not known, such as any CPU).
  double model_flops_utilization = -1;
  trainer::StepTiming timing;      // phases (trainer/step_profiler.h)
  double checkpoint_seconds = 0;   // snapshotting a checkpoint shard at this step (0 = none)
  int64_t data_start_unix_us = 0;  // wall clock when the step began waiting for its batch
  int64_t end_unix_us = 0;         // wall clock when the step (and its checkpoint) ended
};

// The record's phase times in seconds, indexed like metrics::kStepPhaseNames.
inline std::array<double, metrics::kStepPhaseCount> PhaseSeconds(const StepRecord& r) {
  const trainer::StepTiming& t = r.timing;
  return {t.data_wait,    t.teacher_forward, t.student_forward,   t.backward,
          t.comm_exposed, t.optimizer,       r.checkpoint_seconds};
}

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void OnStep(const StepRecord& record) = 0;
  // This worker started generation `generation` as `rank` of `world_size` at `unix_us`.
  virtual void OnGenerationStarted(uint64_t generation, int rank, int world_size, int64_t unix_us) {
    (void)generation, (void)rank, (void)world_size, (void)unix_us;
  }
};

// Wall clock now, microseconds since the Unix epoch (trace and log time axis).
int64_t UnixMicros();

}  // namespace retort::worker
