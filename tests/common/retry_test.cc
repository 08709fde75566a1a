#include "common/retry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "common/backoff_policies.h"

namespace retort {
namespace {

using std::chrono::milliseconds;

// A RetrySleep that does not sleep: records each wait and gives up after `allowed` waits.
struct RecordingSleep {
  explicit RecordingSleep(int allowed = 1000) : allowed(allowed) {}
  RetrySleep AsSleep() {
    return [this](milliseconds wait) {
      waits.push_back(wait);
      return static_cast<int>(waits.size()) <= allowed;
    };
  }
  int allowed;
  std::vector<milliseconds> waits;
};

// Fails with each of `codes` in turn, then succeeds with `value`.
struct ScriptedCall {
  std::vector<StatusCode> codes;
  int value = 42;
  int calls = 0;
  StatusOr<int> operator()() {
    const int i = calls++;
    if (i < static_cast<int>(codes.size())) {
      return Status(codes[i], "attempt " + std::to_string(i));
    }
    return value;
  }
};

TEST(DoublingDelayTest, DoublesFromInitialAndCapsAtMaxForAnyAttempt) {
  using std::chrono::milliseconds;
  EXPECT_EQ(DoublingDelay(milliseconds(50), milliseconds(5000), 1), milliseconds(50));
  EXPECT_EQ(DoublingDelay(milliseconds(50), milliseconds(5000), 2), milliseconds(100));
  EXPECT_EQ(DoublingDelay(milliseconds(50), milliseconds(5000), 7), milliseconds(3200));
  EXPECT_EQ(DoublingDelay(milliseconds(50), milliseconds(5000), 8), milliseconds(5000));
  EXPECT_EQ(DoublingDelay(milliseconds(50), milliseconds(5000), 1 << 30), milliseconds(5000))
      << "no overflow however many failures in a row";
  EXPECT_EQ(backoff_policies::kStuckGenerationRejoin.Nth(1), milliseconds(10000));
  EXPECT_EQ(backoff_policies::kStuckGenerationRejoin.Nth(3), milliseconds(40000));
  EXPECT_EQ(backoff_policies::kStuckGenerationRejoin.Nth(4), milliseconds(60000));
}

TEST(RetryTest, TheRetryableSetIsUnavailableDeadlineExceededAndCancelled) {
  EXPECT_TRUE(IsRetryable(StatusCode::kUnavailable));
  EXPECT_TRUE(IsRetryable(StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(IsRetryable(StatusCode::kCancelled));
  for (StatusCode c :
       {StatusCode::kOk, StatusCode::kUnknown, StatusCode::kInvalidArgument, StatusCode::kNotFound,
        StatusCode::kAlreadyExists, StatusCode::kPermissionDenied, StatusCode::kResourceExhausted,
        StatusCode::kFailedPrecondition, StatusCode::kAborted, StatusCode::kOutOfRange,
        StatusCode::kUnimplemented, StatusCode::kInternal, StatusCode::kDataLoss}) {
    EXPECT_FALSE(IsRetryable(c)) << StatusCodeName(c);
  }
}

TEST(RetryTest, RetriesRetryableFailuresUntilSuccessAndReturnsTheValue) {
  ScriptedCall call{
      {StatusCode::kUnavailable, StatusCode::kDeadlineExceeded, StatusCode::kUnavailable}};
  RecordingSleep sleep;
  Backoff backoff(milliseconds(10), milliseconds(40), /*seed=*/7);
  StatusOr<int> result = RetryUntil(
      Deadline::Never(), backoff, IsRetryable, [&] { return call(); }, sleep.AsSleep());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, 42);
  EXPECT_EQ(call.calls, 4);
  ASSERT_EQ(sleep.waits.size(), 3u);
  // Backoff: uniform in [current/2, current], current 10 -> 20 -> 40 ms.
  EXPECT_GE(sleep.waits[0], milliseconds(5));
  EXPECT_LE(sleep.waits[0], milliseconds(10));
  EXPECT_GE(sleep.waits[2], milliseconds(20));
  EXPECT_LE(sleep.waits[2], milliseconds(40));
}

TEST(RetryTest, AnAnswerIsReturnedAtOnce) {
  ScriptedCall call{{StatusCode::kAborted, StatusCode::kUnavailable}};
  RecordingSleep sleep;
  Backoff backoff(milliseconds(10), milliseconds(40));
  StatusOr<int> result = RetryUntil(
      Deadline::Never(), backoff, IsRetryable, [&] { return call(); }, sleep.AsSleep());
  EXPECT_EQ(result.status().code(), StatusCode::kAborted);
  EXPECT_EQ(result.status().message(), "attempt 0");
  EXPECT_EQ(call.calls, 1);
  EXPECT_TRUE(sleep.waits.empty());
}

TEST(RetryTest, TheCallersPredicateDecides) {
  ScriptedCall call{{StatusCode::kResourceExhausted}};
  RecordingSleep sleep;
  Backoff backoff(milliseconds(1), milliseconds(1));
  auto admission = [](StatusCode c) {
    return IsRetryable(c) || c == StatusCode::kResourceExhausted;
  };
  StatusOr<int> result = RetryUntil(
      Deadline::Never(), backoff, admission, [&] { return call(); }, sleep.AsSleep());
  EXPECT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(call.calls, 2);
}

TEST(RetryTest, AnExpiredDeadlineStillMakesOneAttemptAndReturnsItsError) {
  int calls = 0;
  RecordingSleep sleep;
  Backoff backoff(milliseconds(10), milliseconds(40));
  Status result = RetryUntil(
      Deadline::After(std::chrono::nanoseconds(0)), backoff, IsRetryable,
      [&] {
        ++calls;
        return UnavailableError("coordinator away");
      },
      sleep.AsSleep());
  EXPECT_EQ(result.code(), StatusCode::kUnavailable);
  EXPECT_EQ(result.message(), "coordinator away");
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(sleep.waits.empty());
}

TEST(RetryTest, WaitsNeverReachPastTheDeadline) {
  // Backoff of a minute, deadline an hour away: waits are the backoff's. Deadline 2 s away:
  // every wait is cut to what is left (at most 2 s), whatever the machine's speed.
  RecordingSleep sleep(/*allowed=*/2);
  Backoff backoff(milliseconds(60000), milliseconds(60000));
  Status result = RetryUntil(
      Deadline::After(std::chrono::seconds(2)), backoff, IsRetryable,
      [] { return UnavailableError("away"); }, sleep.AsSleep());
  EXPECT_EQ(result.code(), StatusCode::kUnavailable);
  ASSERT_EQ(sleep.waits.size(), 3u);  // the third wait was refused by the sleep
  for (milliseconds w : sleep.waits) EXPECT_LE(w, milliseconds(2000));
}

TEST(RetryTest, ASleepThatGivesUpEndsTheRetriesWithTheLastError) {
  ScriptedCall call{
      {StatusCode::kUnavailable, StatusCode::kDeadlineExceeded, StatusCode::kUnavailable}};
  RecordingSleep sleep(/*allowed=*/1);
  Backoff backoff(milliseconds(1), milliseconds(1));
  StatusOr<int> result = RetryUntil(
      Deadline::Never(), backoff, IsRetryable, [&] { return call(); }, sleep.AsSleep());
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(call.calls, 2);
}

TEST(RetryTest, WithRealSleepsItGivesUpOnlyOnceTheDeadlinePassed) {
  Backoff backoff(milliseconds(2), milliseconds(2));
  const Deadline deadline = Deadline::AfterMs(30);
  Status result =
      RetryUntil(deadline, backoff, IsRetryable, [&] { return UnavailableError("away"); });
  EXPECT_EQ(result.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(deadline.Expired());
}

}  // namespace
}  // namespace retort
