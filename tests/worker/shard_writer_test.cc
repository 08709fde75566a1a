// ShardWriter: tasks run off the caller's thread, in order; the queue is bounded; Drain waits.
#include "worker/shard_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace retort::worker {
namespace {

TEST(ShardWriterTest, RunsTasksInOrderOffTheCallersThreadAndDrains) {
  ShardWriter writer(4);
  std::vector<int> order;
  std::mutex mu;
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> off_thread{true};
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(writer.Submit([&, i] {
      if (std::this_thread::get_id() == caller) off_thread = false;
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    }));
  ASSERT_TRUE(writer.Drain(Deadline::AfterMs(10000)));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(off_thread.load());
  EXPECT_EQ(writer.pending(), 0u);
}

TEST(ShardWriterTest, RefusesMoreThanItsBoundAndDrainHonoursItsDeadline) {
  ShardWriter writer(2);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  ASSERT_TRUE(writer.Submit([gate] { gate.wait(); }));  // running
  ASSERT_TRUE(writer.Submit([] {}));                    // waiting
  EXPECT_FALSE(writer.Submit([] {})) << "a third snapshot must not pile up behind a slow disk";
  EXPECT_EQ(writer.pending(), 2u);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(writer.Drain(Deadline::AfterMs(100)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  release.set_value();
  EXPECT_TRUE(writer.Drain(Deadline::AfterMs(10000)));
  EXPECT_TRUE(writer.Submit([] {})) << "room again once the writer caught up";
}

TEST(ShardWriterTest, MessagesQueueBehindAFullSnapshotBoundUpToTheirOwn) {
  ShardWriter writer(1);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::vector<int> order;
  ASSERT_TRUE(writer.Submit([gate, &order] {
    gate.wait();
    order.push_back(0);
  }));
  EXPECT_FALSE(writer.Submit([] {})) << "the snapshot bound is full";
  // A checkpoint's coordinator calls (a refusal's ack) still queue: they hold no snapshot.
  for (size_t i = 1; i <= ShardWriter::kMaxMessages; ++i)
    ASSERT_TRUE(writer.Submit([&order, i] { order.push_back(static_cast<int>(i)); },
                              ShardWriter::TaskKind::kMessage))
        << i;
  EXPECT_FALSE(writer.Submit([] {}, ShardWriter::TaskKind::kMessage)) << "messages are bounded";
  release.set_value();
  ASSERT_TRUE(writer.Drain(Deadline::AfterMs(10000)));
  ASSERT_EQ(order.size(), ShardWriter::kMaxMessages + 1);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i));
  EXPECT_TRUE(writer.Submit([] {})) << "the snapshot's place is free once it ran";
}

TEST(ShardWriterTest, DestructorRunsWhatWasQueued) {
  std::atomic<int> ran{0};
  {
    ShardWriter writer(3);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(writer.Submit([&] { ++ran; }));
  }
  EXPECT_EQ(ran.load(), 3);
}

}  // namespace
}  // namespace retort::worker
