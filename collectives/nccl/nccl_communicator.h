// NcclCommunicator: the Communicator over NCCL for GPU buffers of one device (intra-node,
// normally the `intra` level of a HierarchicalCommunicator).
//
// Buffers are device pointers. Operations are enqueued on the issuing thread onto this
// communicator's own stream, after the operation's ready event (CollectiveOptions::ready,
// recorded by whoever issued it, e.g. at a backward hook) or, without one, after an event
// recorded now on the caller's stream (NcclCommunicatorOptions::caller_stream), so they see the
// caller's earlier kernels. Each Work carries a done event recorded on this communicator's
// stream after the operation (Work::done_event): the caller may make its stream wait for it
// device-side (Work::StreamWait) and touch the buffers from that stream; from the host, only
// once the Work completed. A watchdog thread completes Works by polling those events (every
// 1 ms) and ncclCommGetAsyncError; on an NCCL error or a passed deadline it calls
// ncclCommAbort, so a dead peer becomes an error within the deadline, and the communicator is
// broken. A caller that ordered its stream after the done event learns the status from Wait()
// after its own host read.
//
// Generation fencing happens at bootstrap: the unique id is published under a key of this
// generation together with the generation, and a communicator never outlives its
// generation; a bootstrap whose generation became obsolete ends at once
// (NcclCommunicatorOptions::cancelled). Which NCCL calls a ReduceScatterV / AllGatherV issues is
// nccl_call_plan.h's: equal counts and nearly even ones (padded in a scratch buffer from this
// communicator's stream-ordered memory pool) are one ncclReduceScatter / ncclAllGather, sparse
// counts grouped ncclReduce / ncclBroadcast. Create warms the communicator up (PlanWarmUp: each
// kind of call a step issues, small and large, waited for) so NCCL connects its peers for every
// algorithm the step uses before the first step instead of inside it.
// Every thread of this class that calls CUDA selects options.device first (the watchdog
// included: a thread's first CUDA call otherwise makes a context on device 0). Threading:
// issuing methods from one thread at a time; Work from any thread.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "collectives/bootstrap_store.h"
#include "collectives/communicator.h"
#include "collectives/cuda_data_plane.h"
#include "collectives/nccl/cuda_events.h"
#include "collectives/nccl/nccl_call_plan.h"
#include "collectives/nccl/nccl_handles.h"
#include "common/mutex.h"

namespace retort::collectives::nccl {

// The CUDA-free options (cuda_data_plane.h: device, key_prefix, timeouts, cancelled) and the
// ones only this header can name. key_prefix: the store key is "<key_prefix>/unique_id".
// cancelled: polled (every ~20 ms, on the creating thread) while bootstrap waits for rank 0's
// unique id and for the non-blocking initialization: true = this communicator is obsolete (e.g.
// a newer generation was published); Create then aborts the half-built NCCL communicator
// (ncclCommAbort) and returns ABORTED at once.
struct NcclCommunicatorOptions : CudaCommunicatorOptions {
  // Stream the caller produces the buffers on; nullptr: the legacy default stream.
  cudaStream_t caller_stream = nullptr;
  // Run nccl_call_plan.h's PlanWarmUp before Create returns (within bootstrap_timeout).
  bool warm_up = true;
};

// Number of CUDA devices visible; 0 when there is no GPU or no driver.
int CudaDeviceCount();

class NcclCommunicator final : public Communicator {
 public:
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      BootstrapStore* store, int rank, int size, uint64_t generation,
      const NcclCommunicatorOptions& options = {});
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t generation() const override { return generation_; }
  std::chrono::milliseconds default_timeout() const override { return options_.default_timeout; }
  std::string name() const override { return "nccl"; }
  // Device buffers of this communicator's device only.
  bool AcceptsMemory(MemoryKind kind) const override { return kind == MemoryKind::kCudaDevice; }
  // Stream the operations run on (make another stream wait on it instead of on the Work).
  cudaStream_t completion_stream() const { return stream_.get(); }

  void Abort(const std::string& reason) override;

 protected:
  RETORT_COMMUNICATOR_OPERATIONS(, override);

 private:
  struct Pending {
    WorkPtr work;
    ReadyEventPtr done;  // also the Work's done event
  };
  NcclCommunicator(int rank, int size, uint64_t generation, const NcclCommunicatorOptions& o);
  // Makes the stream wait for the caller's stream, runs `enqueue` (NCCL calls), records the
  // completion event and hands the Work to the watchdog.
  WorkPtr Enqueue(const std::string& description, const CollectiveOptions& options,
                  const std::function<Status()>& enqueue) RETORT_EXCLUDES(mu_);
  // Issues `plan`'s copies and NCCL calls on stream_ (inside Enqueue's `enqueue`), with its
  // scratch from scratch_pool_, allocated and freed in stream order.
  Status Issue(const NcclCallPlan& plan, const void* input, void* output, DataType dtype,
               ReduceOp op);
  // Runs PlanWarmUp and waits for it until `deadline`.
  Status WarmUp(Deadline deadline);
  void Watchdog() RETORT_EXCLUDES(mu_);
  void Break(const Status& reason) RETORT_REQUIRES(mu_);

  const int rank_;
  const int size_;
  const uint64_t generation_;
  const NcclCommunicatorOptions options_;
  CudaMemPool scratch_pool_;  // keeps what it had: padded collectives recur every step
  CudaStream stream_;
  CudaEvent caller_ready_;
  std::shared_ptr<CudaEventPool> done_events_;  // the operations' done events, reused
  DeviceBuffer barrier_scratch_;
  NcclComm comm_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Pending> pending_ RETORT_GUARDED_BY(mu_);
  uint64_t operations_ RETORT_GUARDED_BY(mu_) = 0;  // serials of the done events
  Status broken_ RETORT_GUARDED_BY(mu_);
  bool stopping_ RETORT_GUARDED_BY(mu_) = false;
  // Set by Abort() before it takes mu_: an Enqueue holding mu_ while it waits for NCCL to accept
  // an operation (ncclInProgress until every peer arrives) stops waiting and breaks the
  // communicator itself, so Abort() never waits out an operation's deadline behind it.
  std::atomic<bool> abort_requested_{false};
  std::thread watchdog_;
};

}  // namespace retort::collectives::nccl
