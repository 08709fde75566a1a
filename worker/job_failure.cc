#include "worker/job_failure.h"

#include <chrono>

#include "common/enum_names.h"

namespace retort::worker {
namespace {

// The coordinator refuses longer failure messages; the start of an error names its cause.
constexpr size_t kMaxFailureMessage = 2048;

// Codes that mean another party went away, gave up or is overloaded, not that this member's
// inputs are wrong.
bool TransientCode(StatusCode code) {
  switch (code) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kAborted:
    case StatusCode::kCancelled:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

}  // namespace

const char* FailurePhaseName(FailurePhase phase) {
  static constexpr NamedValue<FailurePhase> kNames[] = {
      {FailurePhase::kSetup, "setup"},
      {FailurePhase::kData, "data"},
      {FailurePhase::kStep, "step"},
      {FailurePhase::kCommunication, "communication"}};
  return NameIn(kNames, phase, "unknown");
}

v1::FailureKind ClassifyFailure(FailurePhase phase, const Status& status,
                                bool data_plane_disturbed) {
  if (status.ok()) return v1::FAILURE_KIND_UNSPECIFIED;
  if (phase == FailurePhase::kCommunication || TransientCode(status.code()))
    return v1::FAILURE_KIND_TRANSIENT;
  if (phase == FailurePhase::kStep && data_plane_disturbed) return v1::FAILURE_KIND_TRANSIENT;
  return v1::FAILURE_KIND_RECURRING;
}

bool GenerationStartFailures::Failed(const Status& status) {
  if (status.ok() || TransientCode(status.code())) return false;
  in_a_row_ = status.code() == code_ ? in_a_row_ + 1 : 1;
  code_ = status.code();
  return in_a_row_ >= kTries;
}

v1::JobFailure MakeJobFailure(FailurePhase phase, const Status& status, int64_t step,
                              bool data_plane_disturbed) {
  v1::JobFailure f;
  f.set_kind(ClassifyFailure(phase, status, data_plane_disturbed));
  f.set_message((std::string(StatusCodeName(status.code())) + ": " + status.message())
                    .substr(0, kMaxFailureMessage));
  f.set_step(step);
  f.set_phase(FailurePhaseName(phase));
  f.set_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count());
  return f;
}

}  // namespace retort::worker
