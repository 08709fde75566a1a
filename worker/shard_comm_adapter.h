// trainer::ShardComm over a collectives::Communicator (fp32 host buffers): the small adapter
// through which the trainer reaches the data plane. Borrows the communicator, which must
// outlive the adapter and every handle it returned. Threading: as trainer/shard_comm.h.
#pragma once

#include "collectives/communicator.h"
#include "trainer/shard_comm.h"

namespace retort::worker {

class CommunicatorShardComm final : public trainer::ShardComm {
 public:
  explicit CommunicatorShardComm(collectives::Communicator* comm) : comm_(comm) {}
  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }
  std::unique_ptr<trainer::CommHandle> ReduceScatterV(const float* in, float* out,
                                                      std::vector<int64_t> counts) override;
  std::unique_ptr<trainer::CommHandle> AllGatherV(const float* in, float* out,
                                                  std::vector<int64_t> counts) override;
  std::unique_ptr<trainer::CommHandle> AllReduce(float* data, int64_t count) override;

 private:
  collectives::Communicator* const comm_;
};

}  // namespace retort::worker
