#include "trainer/testing/thread_shard_comm.h"

#include <cstring>
#include <numeric>
#include <string>

namespace retort::trainer::testing {

struct ThreadShardGroup::Op {
  int64_t seq = 0;
  std::vector<Post> posts;  // indexed by rank
  std::vector<bool> posted;
  int num_posted = 0;
  bool done = false;
  Status status;
};

ThreadShardGroup::ThreadShardGroup(int world_size)
    : world_size_(world_size), next_seq_(world_size, 0) {}

std::shared_ptr<ThreadShardGroup::Op> ThreadShardGroup::Submit(int rank, Post post) {
  MutexLock lock(mu_);
  const int64_t seq = next_seq_[rank]++;
  auto& slot = pending_[seq];
  if (!slot) {
    slot = std::make_shared<Op>();
    slot->seq = seq;
    slot->posts.resize(world_size_);
    slot->posted.assign(world_size_, false);
  }
  std::shared_ptr<Op> op = slot;
  op->posts[rank] = std::move(post);
  op->posted[rank] = true;
  if (++op->num_posted == world_size_) {
    Execute(*op);
    op->done = true;
    pending_.erase(seq);
    cv_.NotifyAll();
  }
  return op;
}

void ThreadShardGroup::Execute(Op& op) {
  const Post& first = op.posts[0];
  for (int r = 1; r < world_size_; ++r) {
    const Post& p = op.posts[r];
    if (p.kind != first.kind || p.counts != first.counts) {
      op.status = InvalidArgumentError("collective #" + std::to_string(op.seq) + ": rank " +
                                       std::to_string(r) +
                                       " posted a different kind or counts "
                                       "than rank 0");
      return;
    }
  }
  const std::vector<int64_t>& counts = first.counts;
  switch (first.kind) {
    case Kind::kAllReduce: {
      const int64_t n = counts[0];
      std::vector<float> sum(n, 0.0f);
      for (int r = 0; r < world_size_; ++r)
        for (int64_t i = 0; i < n; ++i) sum[i] += op.posts[r].out[i];
      for (int r = 0; r < world_size_; ++r) std::memcpy(op.posts[r].out, sum.data(), n * 4);
      break;
    }
    case Kind::kReduceScatter: {
      if (static_cast<int>(counts.size()) != world_size_) {
        op.status =
            InvalidArgumentError("ReduceScatterV: counts has " + std::to_string(counts.size()) +
                                 " entries, world size " + std::to_string(world_size_));
        return;
      }
      int64_t displ = 0;
      for (int d = 0; d < world_size_; ++d) {
        float* out = op.posts[d].out;
        for (int64_t i = 0; i < counts[d]; ++i) {
          float acc = 0.0f;
          for (int r = 0; r < world_size_; ++r) acc += op.posts[r].in[displ + i];
          out[i] = acc;
        }
        displ += counts[d];
      }
      break;
    }
    case Kind::kAllGather: {
      if (static_cast<int>(counts.size()) != world_size_) {
        op.status = InvalidArgumentError("AllGatherV: counts has " + std::to_string(counts.size()) +
                                         " entries, world size " + std::to_string(world_size_));
        return;
      }
      int64_t displ = 0;
      for (int s = 0; s < world_size_; ++s) {
        for (int d = 0; d < world_size_; ++d) {
          float* dst = op.posts[d].out + displ;
          if (dst != op.posts[s].in && counts[s] > 0)
            std::memmove(dst, op.posts[s].in, counts[s] * sizeof(float));
        }
        displ += counts[s];
      }
      break;
    }
  }
}

Status ThreadShardGroup::Wait(const std::shared_ptr<Op>& op, Deadline deadline) {
  MutexLock lock(mu_);
  if (!cv_.WaitUntil(mu_, deadline.when(), [&] { return op->done; })) {
    return DeadlineExceededError("collective #" + std::to_string(op->seq) + ": only " +
                                 std::to_string(op->num_posted) + " of " +
                                 std::to_string(world_size_) + " ranks posted before the deadline");
  }
  return op->status;
}

namespace {
class ThreadHandle final : public CommHandle {
 public:
  ThreadHandle(ThreadShardGroup* group, std::shared_ptr<ThreadShardGroup::Op> op)
      : group_(group), op_(std::move(op)) {}
  Status Wait(Deadline deadline) override { return group_->Wait(op_, deadline); }

 private:
  ThreadShardGroup* group_;
  std::shared_ptr<ThreadShardGroup::Op> op_;
};
}  // namespace

std::unique_ptr<CommHandle> ThreadShardComm::ReduceScatterV(const float* in, float* out,
                                                            std::vector<int64_t> counts) {
  auto op =
      group_->Submit(rank_, {ThreadShardGroup::Kind::kReduceScatter, in, out, std::move(counts)});
  return std::make_unique<ThreadHandle>(group_.get(), std::move(op));
}

std::unique_ptr<CommHandle> ThreadShardComm::AllGatherV(const float* in, float* out,
                                                        std::vector<int64_t> counts) {
  auto op = group_->Submit(rank_, {ThreadShardGroup::Kind::kAllGather, in, out, std::move(counts)});
  return std::make_unique<ThreadHandle>(group_.get(), std::move(op));
}

std::unique_ptr<CommHandle> ThreadShardComm::AllReduce(float* data, int64_t count) {
  auto op = group_->Submit(rank_, {ThreadShardGroup::Kind::kAllReduce, data, data, {count}});
  return std::make_unique<ThreadHandle>(group_.get(), std::move(op));
}

}  // namespace retort::trainer::testing
