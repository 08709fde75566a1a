// How a KD step waits for its collectives (trainer/step_waits.h): on a comm whose collectives
// complete on a device stream, no host wait before the step's one host read; the stream is
// ordered after every collective before the work that reads its result is issued; the statuses
// are collected after the read. On a host comm every wait is a host wait.
#include "trainer/step_waits.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/trainer/kd_step_cluster.h"
#include "trainer/grad_reducer.h"

namespace retort::trainer {
namespace {

using test::KdStepCluster;

std::vector<std::string> Take(test::CallLog& log) {
  std::lock_guard<std::mutex> lock(log.mu);
  return std::exchange(log.calls, {});
}

TEST(StepWaitsTest, AStreamOrderedCommCostsNoHostWaitBeforeTheRead) {
  KdStepCluster ranks(2, test::KdTestOptions(), 7, nullptr, /*stream_ordered=*/true);
  const int buckets = ranks.steps[0]->reducer().num_buckets();
  ASSERT_GT(buckets, 2);
  for (int step = 0; step < 2; ++step) {
    auto results = ranks.Run({6, 6}, step, 1);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].host_waits, 0) << "step " << step;
    // One per bucket, the norm/loss all-reduce and the parameter all-gather.
    EXPECT_EQ(results[0].stream_waits, buckets + 2) << "step " << step;
    const std::vector<std::string> calls = Take(*ranks.logs[0]);
    // Every collective is stream-waited after it was issued and before the next phase issues;
    // the host waits (Wait) come last, after the host read, once per collective.
    std::vector<std::string> expected;
    for (int b = 0; b < buckets; ++b) expected.push_back("issue reduce_scatter");
    for (int b = 0; b < buckets; ++b) expected.push_back("stream_wait reduce_scatter");
    expected.insert(expected.end(), {"issue all_reduce", "stream_wait all_reduce",
                                     "issue all_gather", "stream_wait all_gather"});
    for (int b = 0; b < buckets; ++b) expected.push_back("wait reduce_scatter");
    expected.insert(expected.end(), {"wait all_reduce", "wait all_gather"});
    EXPECT_EQ(calls, expected) << "step " << step;
  }
}

TEST(StepWaitsTest, AHostCommWaitsOnTheHostAndGetsTheSameResult) {
  KdStepCluster ordered(2, test::KdTestOptions(), 7, nullptr, /*stream_ordered=*/true);
  KdStepCluster host(2, test::KdTestOptions());
  auto a = ordered.Run({6, 6}, 0, 2);
  auto b = host.Run({6, 6}, 0, 2);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  const int buckets = host.steps[0]->reducer().num_buckets();
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(b[s].host_waits, buckets + 2);
    EXPECT_EQ(b[s].stream_waits, 0);
    EXPECT_EQ(a[s].loss, b[s].loss);
    EXPECT_EQ(a[s].grad_norm, b[s].grad_norm);
  }
  EXPECT_TRUE(torch::equal(ordered.Params(0), host.Params(0)));
}

// A collective that fails after its stream wait was issued fails the step at the confirmation
// after the read, naming it.
class FailingHandle final : public CommHandle {
 public:
  Status Wait(Deadline) override { return UnavailableError("peer 1 vanished"); }
  Status StreamWait(Deadline, bool* host_waited) override {
    *host_waited = false;
    return Status::Ok();
  }
};

TEST(StepWaitsTest, AnErrorOfAStreamWaitedCollectiveComesFromConfirm) {
  StepWaits waits;
  ASSERT_TRUE(
      waits.Order(std::make_unique<FailingHandle>(), Deadline::AfterMs(1000), "bucket 3").ok());
  EXPECT_EQ(waits.host_waits(), 0);
  EXPECT_EQ(waits.stream_waits(), 1);
  Status s = waits.Confirm(Deadline::AfterMs(1000));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("bucket 3: peer 1 vanished"), std::string::npos) << s;
  EXPECT_TRUE(waits.Confirm(Deadline::AfterMs(1000)).ok());  // forgotten once confirmed
}

}  // namespace
}  // namespace retort::trainer
