// The evaluations during training that members report in heartbeats (v1::EvaluationResult):
// what is a valid report, and which are kept for `status`, `top` and the metrics (the newest
// by step, and the best by top-1, the earliest on a tie). Pure; the caller holds the lock
// guarding `last` and `best`.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

inline Status ValidateEvaluationResult(const v1::EvaluationResult& e, int64_t max_step) {
  auto rate = [](double v) { return std::isfinite(v) && v >= 0 && v <= 1; };
  if (e.step() <= 0 || e.step() > max_step || e.epoch() < 0 || e.epoch() > max_step)
    return InvalidArgumentError("evaluation: step " + std::to_string(e.step()) + " / epoch " +
                                std::to_string(e.epoch()) + " is out of range");
  if (e.samples() <= 0 || e.samples() > (int64_t{1} << 40))
    return InvalidArgumentError("evaluation: samples must be in [1, 2^40], got " +
                                std::to_string(e.samples()));
  if (!rate(e.top1()) || !rate(e.top5()) || !rate(e.ema_top1()) || !rate(e.ema_top5()))
    return InvalidArgumentError("evaluation: accuracies must be in [0, 1]");
  return Status::Ok();
}

// Keeps `e` as the newest when it is newer than `last` and as the best when its top-1 beats
// `best`'s (an unset message, step 0, is beaten by anything).
inline void RecordEvaluation(const v1::EvaluationResult& e, v1::EvaluationResult* last,
                             v1::EvaluationResult* best) {
  if (e.step() > last->step()) *last = e;
  if (best->step() == 0 || e.top1() > best->top1()) *best = e;
}

}  // namespace retort::coordinator
