// When a job evaluates during training (the spec's `evaluation`), and on how much of the test
// split. Pure functions of the spec and the step, so every rank decides alike without talking.
#pragma once

#include <algorithm>
#include <cstdint>

#include "retort/v1/retort.pb.h"

namespace retort::worker {

// True after completed step `step` (>= 1) when it is a multiple of evaluation.every_steps, or
// of every_epochs epochs of `steps_per_epoch` steps.
inline bool EvaluationDue(const v1::EvaluationSpec& e, int64_t step, int64_t steps_per_epoch) {
  if (step <= 0) return false;
  if (e.every_steps() > 0 && step % e.every_steps() == 0) return true;
  return e.every_epochs() > 0 && steps_per_epoch > 0 &&
         step % (e.every_epochs() * steps_per_epoch) == 0;
}

// Test samples evaluated: the first max_samples (0: all) of `test_size`.
inline int64_t EvaluationSamples(const v1::EvaluationSpec& e, int64_t test_size) {
  return e.max_samples() > 0 ? std::min(e.max_samples(), test_size) : test_size;
}

}  // namespace retort::worker
