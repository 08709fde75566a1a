// NcclCommunicator: the Communicator over NCCL for GPU buffers of one device (intra-node,
// normally the `intra` level of a HierarchicalCommunicator).
//
// Buffers are device pointers. Operations are enqueued on the issuing thread onto this
// communicator's own stream, after an event recorded on the caller's stream
// (NcclCommunicatorOptions::caller_stream), so they see the caller's earlier kernels; the
// caller must not touch the buffers until the Work completes (or make its stream wait on
// completion_stream()). A watchdog thread completes Works by polling CUDA events and
// ncclCommGetAsyncError; on an NCCL error or a passed deadline it calls ncclCommAbort, so a
// dead peer becomes an error within the deadline, and the communicator is broken.
//
// Generation fencing happens at bootstrap: the unique id is published under a key of this
// generation together with the generation, and a communicator never outlives its
// generation. ReduceScatterV / AllGatherV with uneven counts are grouped ncclReduce /
// ncclBroadcast calls; equal counts use ncclReduceScatter / ncclAllGather.
// Threading: issuing methods from one thread at a time; Work from any thread.
#pragma once

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "collectives/communicator.h"
#include "collectives/nccl/nccl_handles.h"
#include "collectives/store.h"

namespace retort::collectives::nccl {

struct NcclCommunicatorOptions {
  int device = 0;
  // Stream the caller produces the buffers on; nullptr: the legacy default stream.
  cudaStream_t caller_stream = nullptr;
  std::string key_prefix;  // store key "<key_prefix>/unique_id"; empty: "g<generation>/nccl"
  std::chrono::milliseconds default_timeout{30000};
  std::chrono::milliseconds bootstrap_timeout{60000};
};

// Number of CUDA devices visible; 0 when there is no GPU or no driver.
int CudaDeviceCount();

class NcclCommunicator final : public Communicator {
 public:
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      Store* store, int rank, int size, uint64_t generation,
      const NcclCommunicatorOptions& options = {});
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t generation() const override { return generation_; }
  std::chrono::milliseconds default_timeout() const override { return options_.default_timeout; }
  std::string name() const override { return "nccl"; }
  // Stream the operations run on (make another stream wait on it instead of on the Work).
  cudaStream_t completion_stream() const { return stream_.get(); }

  WorkPtr ReduceScatterV(ConstBuffer input, MutableBuffer output, const std::vector<size_t>& counts,
                         ReduceOp op, const CollectiveOptions& options = {}) override;
  WorkPtr AllGatherV(ConstBuffer input, MutableBuffer output, const std::vector<size_t>& counts,
                     const CollectiveOptions& options = {}) override;
  WorkPtr AllReduce(MutableBuffer data, ReduceOp op,
                    const CollectiveOptions& options = {}) override;
  WorkPtr Broadcast(MutableBuffer data, int root, const CollectiveOptions& options = {}) override;
  WorkPtr Barrier(const CollectiveOptions& options = {}) override;
  WorkPtr Send(ConstBuffer data, int peer, uint32_t tag,
               const CollectiveOptions& options = {}) override;
  WorkPtr Recv(MutableBuffer data, int peer, uint32_t tag,
               const CollectiveOptions& options = {}) override;
  WorkPtr AllToAllV(ConstBuffer input, const std::vector<size_t>& send_counts, MutableBuffer output,
                    const std::vector<size_t>& recv_counts,
                    const CollectiveOptions& options = {}) override;
  void Abort(const std::string& reason) override;

 private:
  struct Pending {
    WorkPtr work;
    CudaEvent done;
  };
  NcclCommunicator(int rank, int size, uint64_t generation, const NcclCommunicatorOptions& o);
  // Makes the stream wait for the caller's stream, runs `enqueue` (NCCL calls), records the
  // completion event and hands the Work to the watchdog.
  WorkPtr Enqueue(const std::string& description, const CollectiveOptions& options,
                  const std::function<Status()>& enqueue);
  void Watchdog();
  void Break(const Status& reason);  // requires mu_

  const int rank_;
  const int size_;
  const uint64_t generation_;
  const NcclCommunicatorOptions options_;
  CudaStream stream_;
  CudaEvent caller_ready_;
  DeviceBuffer barrier_scratch_;
  NcclComm comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;  // guarded by mu_
  Status broken_;                // guarded by mu_
  bool stopping_ = false;        // guarded by mu_
  std::thread watchdog_;
};

}  // namespace retort::collectives::nccl
