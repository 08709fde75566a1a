// KD-step ranks on threads for the trainer tests: `world` KdSteps over one ThreadShardGroup,
// each with trainer_test_util.h's tiny ViT teacher and student and the same initial weights,
// training on synthetic global batches split between the ranks. Every rank's ShardComm counts
// the collectives issued through it.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/trainer/trainer_test_util.h"
#include "trainer/kd_step.h"
#include "trainer/testing/thread_shard_comm.h"

namespace retort::trainer::test {

// The options the KD-step tests start from: clipping on, many gradient buckets (some
// straddling rank boundaries), a short warm-up and cosine schedule.
inline KdStepOptions KdTestOptions() {
  KdStepOptions o;
  o.loss.alpha = 0.7;
  o.loss.temperature = 2.0;
  o.optimizer.lr = 2e-3;
  o.optimizer.warmup_steps = 5;
  o.optimizer.total_steps = 40;
  o.optimizer.weight_decay = 0.05;
  o.optimizer.max_grad_norm = 1.0;
  o.bucket_elements = 700;
  o.comm_timeout_ms = 30000;
  return o;
}

// The calls a stream-ordered comm saw, in order: "issue <op>", "stream_wait <op>", "wait <op>".
struct CallLog {
  std::mutex mu;
  std::vector<std::string> calls;
  void Add(std::string call) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(std::move(call));
  }
};

// A handle of a collective that completes "on a device stream" (as NCCL's): StreamWait is
// device-side for its caller (host_waited false, the status deferred to Wait). On the CPU the
// host is the stream, so it blocks here until the operation finished; the log records it as a
// stream wait.
class StreamOrderedHandle final : public CommHandle {
 public:
  StreamOrderedHandle(std::unique_ptr<CommHandle> inner, CallLog* log, std::string op)
      : inner_(std::move(inner)), log_(log), op_(std::move(op)) {}
  Status StreamWait(Deadline deadline, bool* host_waited) override {
    log_->Add("stream_wait " + op_);
    *host_waited = false;
    status_ = inner_->Wait(deadline);
    finished_ = true;
    return Status::Ok();
  }
  Status Wait(Deadline deadline) override {
    log_->Add("wait " + op_);
    return finished_ ? status_ : inner_->Wait(deadline);
  }

 private:
  std::unique_ptr<CommHandle> inner_;
  CallLog* log_;
  const std::string op_;
  bool finished_ = false;
  Status status_;
};

// Forwards to another ShardComm, counting the collectives. With a `log`, it plays a comm whose
// collectives complete on a device stream (StreamOrderedHandle) and logs every call.
class CountingComm final : public ShardComm {
 public:
  explicit CountingComm(ShardComm* inner, CallLog* log = nullptr) : inner_(inner), log_(log) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  bool TakesDeviceMemory() const override { return inner_->TakesDeviceMemory(); }
  std::unique_ptr<CommHandle> ReduceScatterV(const float* in, float* out,
                                             std::vector<int64_t> counts) override {
    ++calls;
    return Logged(inner_->ReduceScatterV(in, out, std::move(counts)), "reduce_scatter");
  }
  std::unique_ptr<CommHandle> AllGatherV(const float* in, float* out,
                                         std::vector<int64_t> counts) override {
    ++calls;
    return Logged(inner_->AllGatherV(in, out, std::move(counts)), "all_gather");
  }
  std::unique_ptr<CommHandle> AllReduce(float* data, int64_t count) override {
    ++calls;
    return Logged(inner_->AllReduce(data, count), "all_reduce");
  }
  std::atomic<int> calls{0};

 private:
  std::unique_ptr<CommHandle> Logged(std::unique_ptr<CommHandle> handle, const std::string& op) {
    if (log_ == nullptr) return handle;
    log_->Add("issue " + op);
    return std::make_unique<StreamOrderedHandle>(std::move(handle), log_, op);
  }
  ShardComm* inner_;
  CallLog* log_;
};

struct KdStepCluster {
  static constexpr int64_t kGlobalBatch = 12;

  std::shared_ptr<testing::ThreadShardGroup> group;
  std::vector<std::unique_ptr<testing::ThreadShardComm>> comms;
  std::vector<std::unique_ptr<CountingComm>> counting;
  std::vector<std::unique_ptr<CallLog>> logs;  // per rank; empty unless stream_ordered
  std::vector<std::unique_ptr<KdStep>> steps;

  // `make_plan` maps the flat parameter count to the plan (default: even, 64-aligned).
  // `stream_ordered`: every rank's comm completes "on a device stream" and logs its calls.
  KdStepCluster(int world, const KdStepOptions& options, uint64_t student_seed = 7,
                const std::function<ShardPlan(int64_t)>& make_plan = nullptr,
                bool stream_ordered = false) {
    group = std::make_shared<testing::ThreadShardGroup>(world);
    for (int r = 0; r < world; ++r) {
      comms.push_back(std::make_unique<testing::ThreadShardComm>(group, r));
      if (stream_ordered) logs.push_back(std::make_unique<CallLog>());
      counting.push_back(std::make_unique<CountingComm>(
          comms.back().get(), stream_ordered ? logs.back().get() : nullptr));
      auto teacher = MustMake(MakeVit(TinyVit(24, 2), 1));
      auto student = MustMake(MakeVit(TinyVit(16, 2), student_seed));
      const int64_t numel = FlatParameterCount(*student);
      const ShardPlan plan = make_plan ? make_plan(numel) : MakeEvenShardPlan(numel, world, 64);
      auto step = KdStep::Create(std::move(teacher), std::move(student), counting.back().get(),
                                 plan, options);
      EXPECT_TRUE(step.ok()) << step.status();
      steps.push_back(std::move(step).value());
    }
  }

  // Runs global batches first_step .. first_step + num_steps - 1, rank r taking sizes[r]
  // samples of each; `mutate` may change a rank's slice first. Returns rank 0's results.
  std::vector<StepResult> Run(const std::vector<int64_t>& sizes, int first_step, int num_steps,
                              const std::function<void(int, int, Batch&)>& mutate = nullptr) {
    std::vector<StepResult> rank0;
    RunRanks(static_cast<int>(steps.size()), [&](int rank) {
      for (int s = first_step; s < first_step + num_steps; ++s) {
        Batch global = SyntheticBatch(kGlobalBatch, 1, 8, 10, 1000 + s, s * kGlobalBatch);
        Batch mine = Slice(global, sizes, rank);
        if (mutate) mutate(rank, s, mine);
        auto result = steps[rank]->Step(mine);
        ASSERT_TRUE(result.ok()) << "rank " << rank << " step " << s << ": " << result.status();
        if (rank == 0) rank0.push_back(*result);
      }
    });
    return rank0;
  }
  // The first `num_steps` global batches in equal shares.
  std::vector<StepResult> Run(int num_steps) {
    const int world = static_cast<int>(steps.size());
    return Run(std::vector<int64_t>(world, kGlobalBatch / world), 0, num_steps);
  }

  torch::Tensor Params(int rank) { return steps[rank]->flat().params().clone(); }
  int collective_calls(int rank) const { return counting[rank]->calls.load(); }
};

}  // namespace retort::trainer::test
