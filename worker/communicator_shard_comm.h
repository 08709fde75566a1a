// trainer::ShardComm over a collectives::Communicator (fp32 buffers, host or device): the small
// adapter through which the trainer reaches the data plane. Borrows the communicator, which must
// outlive the adapter and every handle it returned. Threading: as trainer/shard_comm.h.
#pragma once

#include "collectives/communicator.h"
#include "trainer/shard_comm.h"

namespace retort::worker {

// Told of every collective the trainer issued through the adapter, once the trainer's wait for
// it returned: the operation, its element count, launch and wait-return wall times (us since the
// Unix epoch). Called on the thread that waited; must be thread-safe and not block.
class CollectiveListener {
 public:
  virtual ~CollectiveListener() = default;
  virtual void OnCollective(const char* op, int64_t elements, int64_t start_us, int64_t end_us) = 0;
};

class CommunicatorShardComm final : public trainer::ShardComm {
 public:
  // `listener` (borrowed, may be null) must outlive the adapter and its handles. `trainer_memory`
  // is where the trainer's tensors live: with kCudaDevice and a communicator that takes device
  // memory, the trainer hands its device buffers straight through; otherwise it stages them
  // through host memory (trainer/host_staging.h) and the buffers here are host memory.
  // `events` (borrowed, may be null; must outlive the adapter) is the trainer's stream: with
  // device buffers, every operation carries a ready event recorded on it when the trainer
  // issues the operation (on the issuing thread: a backward hook for gradient buckets), and
  // handles' StreamWait orders that stream after the operation's done event (device-side) when
  // the Work has one. Without `events`, backends order after their caller's stream when they
  // enqueue, and StreamWait is a host wait.
  explicit CommunicatorShardComm(
      collectives::Communicator* comm, CollectiveListener* listener = nullptr,
      collectives::MemoryKind trainer_memory = collectives::MemoryKind::kHost,
      collectives::DeviceEvents* events = nullptr)
      : comm_(comm),
        listener_(listener),
        events_(events),
        buffers_(trainer_memory == collectives::MemoryKind::kCudaDevice &&
                         comm->AcceptsMemory(collectives::MemoryKind::kCudaDevice)
                     ? collectives::MemoryKind::kCudaDevice
                     : collectives::MemoryKind::kHost) {}
  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }
  bool TakesDeviceMemory() const override {
    return buffers_ == collectives::MemoryKind::kCudaDevice;
  }
  std::unique_ptr<trainer::CommHandle> ReduceScatterV(const float* in, float* out,
                                                      std::vector<int64_t> counts) override;
  std::unique_ptr<trainer::CommHandle> AllGatherV(const float* in, float* out,
                                                  std::vector<int64_t> counts) override;
  std::unique_ptr<trainer::CommHandle> AllReduce(float* data, int64_t count) override;

 private:
  std::unique_ptr<trainer::CommHandle> Wrap(collectives::WorkPtr work, const char* op,
                                            int64_t elements);
  // The options of an operation issued now: a ready event on the trainer's stream when the
  // buffers are device memory and there is an `events`; an error recording it is returned as
  // a completed Work's status by the caller.
  StatusOr<collectives::CollectiveOptions> IssueOptions();
  collectives::Communicator* const comm_;
  CollectiveListener* const listener_;
  collectives::DeviceEvents* const events_;
  const collectives::MemoryKind buffers_;  // the kind of every buffer this adapter passes on
};

}  // namespace retort::worker
