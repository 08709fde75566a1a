// The cancellable waits of communicator start-up (collectives/bootstrap_wait.h), on the CPU:
// a store key that never comes and a fake non-blocking initialization (the loop NCCL's
// bootstrap runs around ncclCommGetAsyncError) end as soon as the cancellation check holds,
// long before their deadline; without cancellation they end at the deadline or when done.
#include "collectives/bootstrap_wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace retort::collectives {
namespace {

using std::chrono::milliseconds;

Status Obsolete() { return AbortedError("obsolete: a newer generation was published"); }

TEST(BootstrapWaitTest, StoreWaitEndsWhenCancelledNotAtTheDeadline) {
  InMemoryStore store;
  std::atomic<bool> newer{false};
  std::thread publisher([&] {
    std::this_thread::sleep_for(milliseconds(100));
    newer = true;
  });
  const auto start = SteadyClock::now();
  auto got = GetUnlessCancelled(
      &store, "g1/nccl/unique_id", Deadline::AfterMs(60000), [&] { return newer.load(); },
      Obsolete);
  const auto took = SteadyClock::now() - start;
  publisher.join();
  EXPECT_EQ(got.status().code(), StatusCode::kAborted) << got.status();
  EXPECT_LT(took, std::chrono::seconds(20)) << "waited toward the 60 s deadline";
}

TEST(BootstrapWaitTest, StoreWaitReturnsAKeyThatArrivesAndTimesOutWithoutCancellation) {
  InMemoryStore store;
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(60));
    ASSERT_TRUE(store.Set("k", "v", Deadline::AfterMs(1000)).ok());
  });
  auto got = GetUnlessCancelled(
      &store, "k", Deadline::AfterMs(30000), [] { return false; }, Obsolete, milliseconds(5));
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  auto missing = GetUnlessCancelled(&store, "missing", Deadline::AfterMs(50), {}, Obsolete);
  EXPECT_EQ(missing.status().code(), StatusCode::kDeadlineExceeded) << missing.status();
  auto sliced = GetUnlessCancelled(
      &store, "missing", Deadline::AfterMs(50), [] { return false; }, Obsolete, milliseconds(5));
  EXPECT_EQ(sliced.status().code(), StatusCode::kDeadlineExceeded) << sliced.status();
}

TEST(BootstrapWaitTest, CancelledWhenAlreadyObsoleteDoesNotTouchTheStore) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("k", "v", Deadline::AfterMs(1000)).ok());
  auto got = GetUnlessCancelled(
      &store, "k", Deadline::AfterMs(1000), [] { return true; }, Obsolete);
  EXPECT_EQ(got.status().code(), StatusCode::kAborted);
}

// A fake non-blocking initialization: in progress until `ready_after` polls, or failed.
struct FakeInit {
  int polls = 0;
  int ready_after = -1;  // -1: never ready
  Status error;          // returned from the poll once set
  StatusOr<bool> Poll() {
    ++polls;
    if (!error.ok()) return error;
    return ready_after >= 0 && polls >= ready_after;
  }
};

TEST(BootstrapWaitTest, PolledInitializationEndsWhenDoneFailedTimedOutOrCancelled) {
  FakeInit done{.ready_after = 3};
  EXPECT_TRUE(
      PollUntilDone([&] { return done.Poll(); }, Deadline::AfterMs(10000), {}, Obsolete, "init")
          .ok());
  EXPECT_EQ(done.polls, 3);

  FakeInit failed;
  failed.error = UnavailableError("remote error");
  EXPECT_EQ(
      PollUntilDone([&] { return failed.Poll(); }, Deadline::AfterMs(10000), {}, Obsolete, "init")
          .code(),
      StatusCode::kUnavailable);

  FakeInit stuck;
  Status timed_out = PollUntilDone([&] { return stuck.Poll(); }, Deadline::AfterMs(30), {},
                                   Obsolete, "nccl: communicator initialization");
  EXPECT_EQ(timed_out.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(timed_out.message(), "nccl: communicator initialization: timed out");

  FakeInit obsolete;
  std::atomic<bool> newer{false};
  std::thread publisher([&] {
    std::this_thread::sleep_for(milliseconds(50));
    newer = true;
  });
  const auto start = SteadyClock::now();
  Status cancelled = PollUntilDone([&] { return obsolete.Poll(); }, Deadline::AfterMs(60000),
                                   [&] { return newer.load(); }, Obsolete, "init");
  publisher.join();
  EXPECT_EQ(cancelled.code(), StatusCode::kAborted) << cancelled;
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(20));
  EXPECT_GT(obsolete.polls, 1) << "polled while in progress";
}

}  // namespace
}  // namespace retort::collectives
