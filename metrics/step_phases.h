// The phases of a training step, in the order a step runs them: the one list behind every view
// of a step (the worker's retort_worker_step_phase_seconds{phase=...}, the step log's
// "<phase>_s" keys, the step trace's phase events, `retortctl top`'s phase shares and the run
// report's step logs). Header-only, std-only; constants.
#pragma once

#include <array>

namespace retort::metrics {

// Indices into kStepPhaseNames (and into every per-phase array ordered like it).
enum StepPhase : int {
  kDataWait = 0,
  kTeacherForward,
  kStudentForward,
  kBackward,
  kCommExposed,
  kOptimizer,
  kCheckpoint,
};
inline constexpr int kStepPhaseCount = kCheckpoint + 1;
inline constexpr std::array<const char*, kStepPhaseCount> kStepPhaseNames = {
    "data_wait",    "teacher_forward", "student_forward", "backward",
    "comm_exposed", "optimizer",       "checkpoint"};

}  // namespace retort::metrics
