// GradReducer: reduce-scatters the flat gradient buffer in buckets while backward runs.
//
// Buckets are contiguous spans of whole parameters, formed from the END of the flat buffer
// (backward produces the last layers' gradients first), each at most `bucket_elements` long
// (a single larger parameter forms a bucket of its own). A post-hook on every parameter's
// AccumulateGrad node (the autograd node that writes .grad, i.e. the flat buffer) marks the
// parameter ready; when all parameters of a bucket are ready the bucket is ready, and ready buckets
// are launched strictly in bucket order (so every rank issues the same collectives in the same
// order, whatever the hook order) as ShardComm::ReduceScatterV(grads + bucket_start, reduced + ...,
// counts), where counts are the bucket's intersections with the plan's ranges. Finish() launches
// whatever is left (parameters unused in this forward, or a rank with an empty slice) and waits.
//
// A single rank has nothing to exchange: buckets are still tracked (and counted as launched),
// no collective runs, and reduced() is the flat gradient buffer itself.
// Ready events: on a ShardComm that takes device memory, each bucket's collective is ordered
// after the gradient kernels enqueued when the hook launched it (ShardComm records the event at
// issue, on the hook's thread), so later buckets do not wait for the rest of backward.
// Device gradients with a ShardComm that takes host memory only (or `stage_through_host`) go
// through host buffers: each bucket is copied to the host when it is ready, without a host
// wait (a non-blocking copy to pinned memory on the current stream and an event after it), and
// its collective is issued once that copy is done (checked at the next hook, waited for in
// Finish()), still in bucket order; the reduced range is copied back in Finish().
//
// Threading: hooks run on the thread that executes backward (the caller's thread on CPU, the
// autograd device thread on CUDA, while the caller is blocked in backward(); with concurrent
// parts, several threads) and launch under the reducer's mutex, so ShardComm is never used
// from two threads at once. The hooks hold only a weak reference: destroying the
// reducer disarms them.
#pragma once

#include <torch/types.h>

#include <memory>

#include "common/deadline.h"
#include "common/status.h"
#include "trainer/shard_comm.h"
#include "trainer/shard_plan.h"

namespace retort::trainer {

class FlatParameters;
class StepWaits;

class GradReducer {
 public:
  // `flat` and `comm` must outlive the reducer. `plan` must be valid for flat->numel().
  static StatusOr<std::unique_ptr<GradReducer>> Create(FlatParameters* flat, ShardComm* comm,
                                                       ShardPlan plan, int64_t bucket_elements,
                                                       bool stage_through_host = false);
  ~GradReducer();

  // Arms the hooks for one step of `passes` backward passes (a rank may split its slice into
  // parts that run backward concurrently; a parameter is ready after its gradient was
  // accumulated `passes` times). Call after FlatParameters::ZeroGrads().
  void BeginBackward(int passes = 1);
  // Launches the buckets not launched yet, then orders the trainer's stream after all of them
  // through `waits` (StepWaits::Order: device-side where the collectives complete on a device
  // stream, else a host wait per bucket). Then the work the trainer enqueues reads in
  // reduced() the sum over ranks of this rank's range of the gradient buffer; the buckets'
  // statuses come from waits->Confirm() after the step's host read. With host staging the
  // buckets are waited for on the host and copied back here.
  // `exposed_seconds` receives the host time spent here (communication not hidden).
  Status Finish(Deadline deadline, double* exposed_seconds, StepWaits* waits);

  const torch::Tensor& reduced() const;  // float32 [plan.ranges[rank].count]
  int num_buckets() const;
  // Buckets launched from hooks during the last backward (before Finish); for tests/profiling.
  int launched_during_backward() const;
  // True when collectives run on host copies of the gradients (see above).
  bool stages_through_host() const;

  struct State;

 private:
  explicit GradReducer(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace retort::trainer
