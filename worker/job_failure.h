// Which training failures fail the job and which are retried.
//
// A failure is *recurring* when trying again with the same job spec and data fails the same way:
// the job is then failed once (the member reports it in LeaveRequest.failure and the coordinator
// moves the job to FAILED) instead of leaving, re-joining and failing again forever. It is
// *transient* when something outside this member went away (a peer, the network, the
// coordinator) or a newer generation superseded this one: the member retries with backoff.
//
// The decision uses where the failure happened and its status code:
//   - kCommunication (communicator bootstrap, collectives outside the step's compute, state
//     recovery, replicas): always transient.
//   - kSetup (building models, opening datasets), kData (loading a batch), kStep (forward,
//     backward, optimizer): recurring, except for the codes that mean "someone else went away or
//     gave up" (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, CANCELLED, RESOURCE_EXHAUSTED, UNKNOWN),
//     and except when the caller saw the data plane disturbed during the step (a failed peer, a
//     newer generation): a step's collectives share its status with its compute.
//   - A generation start (communicator bootstrap, state recovery) counts as kCommunication, but
//     the same non-transient code in GenerationStartFailures::kTries starts in a row is this
//     member's own (a build without the CUDA data plane, two ranks given one GPU): recurring.
// Torch-free; thread-compatible.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::worker {

enum class FailurePhase { kSetup, kData, kStep, kCommunication };

// "setup", "data", "step", "communication".
const char* FailurePhaseName(FailurePhase phase);

// `data_plane_disturbed`: a peer failed or a newer generation was published while the failing
// work ran (only consulted for kStep).
v1::FailureKind ClassifyFailure(FailurePhase phase, const Status& status,
                                bool data_plane_disturbed = false);

// A JobFailure for `status` (kind from ClassifyFailure; message "<CODE>: <message>"; unix_ms
// now). The caller fills member_id, node and local_rank when it knows them.
v1::JobFailure MakeJobFailure(FailurePhase phase, const Status& status, int64_t step,
                              bool data_plane_disturbed = false);

// Failed generation starts in a row. A start also bootstraps the communicator and moves state,
// so one failure is retried as a communication failure is; the same code that is not a
// "someone else went away" code in kTries starts in a row fails the job instead of re-joining
// for ever. Transient codes neither count nor reset the count; a start that succeeds or a
// different code resets it.
class GenerationStartFailures {
 public:
  static constexpr int kTries = 3;

  // After a failed start: true when the job should fail with `status` (as kSetup).
  bool Failed(const Status& status);
  void Started() { in_a_row_ = 0; }
  int in_a_row() const { return in_a_row_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  int in_a_row_ = 0;
};

}  // namespace retort::worker
