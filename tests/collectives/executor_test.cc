// OpExecutor::Stop: joins the executing thread (no operation or idle hook runs afterwards),
// completes queued operations with ABORTED, and is idempotent (the destructor calls it again).
#include "collectives/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace retort::collectives {
namespace {

TEST(OpExecutorTest, StopJoinsTheThreadAndAbortsWhatIsQueued) {
  std::atomic<int> idle_calls{0};
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  OpExecutor executor("test", [&] {
    ++idle_calls;
    return false;
  });
  // The first operation holds the executing thread until Stop() has been asked for, so the
  // second is still queued when the executor breaks.
  WorkPtr running = executor.Submit("hold", Deadline::AfterMs(10000), [&](Work&) {
    started = true;
    for (int i = 0; i < 1000 && !release.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return Status::Ok();
  });
  WorkPtr queued = executor.Submit("queued", Deadline::AfterMs(10000), [](Work&) {
    ADD_FAILURE() << "an operation queued behind Stop() ran";
    return Status::Ok();
  });
  for (int i = 0; i < 5000 && !started.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(started.load()) << "the executing thread never picked up the first operation";
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release = true;
  });
  executor.Stop();
  releaser.join();
  EXPECT_TRUE(running->Wait(Deadline::AfterMs(1000)).ok());
  Status aborted = queued->Wait(Deadline::AfterMs(1000));
  EXPECT_EQ(aborted.code(), StatusCode::kAborted) << aborted;
  const int idle_after_stop = idle_calls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(idle_calls.load(), idle_after_stop) << "the idle hook ran after Stop() returned";

  executor.Stop();  // idempotent
  WorkPtr late =
      executor.Submit("late", Deadline::AfterMs(1000), [](Work&) { return Status::Ok(); });
  EXPECT_EQ(late->Wait(Deadline::AfterMs(1000)).code(), StatusCode::kAborted);
}

TEST(OpExecutorTest, StopInCallerModeCompletesQueuedOperations) {
  OpExecutor executor("caller", nullptr, ProgressMode::kCallerThread);
  WorkPtr queued = executor.Submit("never driven", Deadline::AfterMs(1000), [](Work&) {
    ADD_FAILURE() << "an operation nobody waited for ran at Stop()";
    return Status::Ok();
  });
  executor.Stop();
  EXPECT_TRUE(queued->IsCompleted());
  EXPECT_EQ(queued->status().code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace retort::collectives
