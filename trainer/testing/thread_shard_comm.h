// ThreadShardComm: an in-process ShardComm for N ranks running on N threads (tests, benches).
// The k-th collective of every rank is matched with the k-th of the others; the rank that
// posts last executes it for everybody (sums in rank order 0..N-1, so results are
// deterministic) and wakes the waiters. Posting never blocks; Wait() honours its deadline, so
// a rank that never posts shows up as DEADLINE_EXCEEDED on the others, never a hang.
// Mismatched kinds or counts fail the operation on every rank with INVALID_ARGUMENT.
//
// Threading: ThreadShardGroup is shared by all rank threads (internally locked); each
// ThreadShardComm is used by one rank thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "trainer/shard_comm.h"

namespace retort::trainer::testing {

class ThreadShardGroup {
 public:
  explicit ThreadShardGroup(int world_size);
  int world_size() const { return world_size_; }

  enum class Kind { kReduceScatter, kAllGather, kAllReduce };
  struct Post {
    Kind kind;
    const float* in = nullptr;
    float* out = nullptr;
    std::vector<int64_t> counts;
  };
  struct Op;
  // Posts rank's part of its next collective; returns the shared op to wait on.
  std::shared_ptr<Op> Submit(int rank, Post post);
  Status Wait(const std::shared_ptr<Op>& op, Deadline deadline);

 private:
  void Execute(Op& op) RETORT_REQUIRES(mu_);  // all posts present

  const int world_size_;
  Mutex mu_;
  CondVar cv_;
  std::vector<int64_t> next_seq_ RETORT_GUARDED_BY(mu_);  // per rank
  std::map<int64_t, std::shared_ptr<Op>> pending_ RETORT_GUARDED_BY(mu_);
};

class ThreadShardComm final : public ShardComm {
 public:
  ThreadShardComm(std::shared_ptr<ThreadShardGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }
  std::unique_ptr<CommHandle> ReduceScatterV(const float* in, float* out,
                                             std::vector<int64_t> counts) override;
  std::unique_ptr<CommHandle> AllGatherV(const float* in, float* out,
                                         std::vector<int64_t> counts) override;
  std::unique_ptr<CommHandle> AllReduce(float* data, int64_t count) override;

 private:
  std::shared_ptr<ThreadShardGroup> group_;
  int rank_;
};

}  // namespace retort::trainer::testing
