// Communicator start-up gives up as soon as its cancellation check fires (a newer generation was
// published): ABORTED in well under a second, not after bootstrap_timeout. Covers both waits of
// the UCX bootstrap: a peer's store record that never appears, and a hello that never comes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "collectives/bootstrap_store.h"
#include "collectives/ucx/ucx_communicator.h"

namespace retort::collectives::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Long enough that only the cancellation can end the bootstrap within the test's bounds.
constexpr milliseconds kBootstrapTimeout{30000};
// How long after the cancellation Create must return; generous for a loaded machine (the check
// is polled every 20 ms).
constexpr milliseconds kCancelBound{2000};

ucx::UcxCommunicatorOptions Options(const std::atomic<bool>* cancelled) {
  ucx::UcxCommunicatorOptions o;
  o.default_timeout = milliseconds(5000);
  o.bootstrap_timeout = kBootstrapTimeout;
  o.cancelled = [cancelled] { return cancelled->load(); };
  return o;
}

// Publishes like its base but never finds a key: a rank that uses it announces its address and
// then never reaches its hello (as a rank that moved on to a newer generation).
class PublishOnlyStore final : public BootstrapStore {
 public:
  explicit PublishOnlyStore(BootstrapStore* base) : base_(base) {}
  Status Set(const std::string& key, const std::string& value, Deadline deadline) override {
    return base_->Set(key, value, deadline);
  }
  StatusOr<std::string> Get(const std::string& key, Deadline deadline) override {
    std::this_thread::sleep_until(deadline.when());
    return DeadlineExceededError("store key '" + key + "' withheld by the test");
  }

 private:
  BootstrapStore* base_;
};

TEST(UcxBootstrapCancelTest, WaitForAPeersRecordEndsWhenCancelled) {
  InMemoryStore store;  // rank 1 never publishes
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(300));
    cancelled = true;
  });
  const auto t0 = Clock::now();
  auto comm = ucx::UcxCommunicator::Create(&store, 0, 2, /*generation=*/30, Options(&cancelled));
  const auto took = Clock::now() - t0;
  canceller.join();
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kAborted) << comm.status();
  EXPECT_NE(comm.status().message().find("bootstrap of generation 30"), std::string::npos)
      << comm.status();
  EXPECT_NE(comm.status().message().find("store key 'g30/ucx/rank1'"), std::string::npos)
      << comm.status();
  EXPECT_LT(took, milliseconds(300) + kCancelBound);
  EXPECT_GE(took, milliseconds(300)) << "returned before the cancellation";
}

TEST(UcxBootstrapCancelTest, HelloExchangeEndsWhenCancelled) {
  InMemoryStore store;
  PublishOnlyStore publish_only(&store);
  std::atomic<bool> cancelled0{false}, cancelled1{false};
  Status result1;
  // Rank 1 publishes its address, then waits (until cancelled) for rank 0's: rank 0 reaches
  // its hello exchange and waits there for rank 1's hello.
  std::thread rank1([&] {
    auto comm = ucx::UcxCommunicator::Create(&publish_only, 1, 2, 30, Options(&cancelled1));
    result1 = comm.ok() ? Status::Ok() : comm.status();
  });
  // Cancel once rank 0 has had rank 1's address for a while (it is then in its hello wait).
  Clock::time_point cancelled_at;
  std::thread canceller([&] {
    (void)store.Get("g30/ucx/rank1", Deadline::AfterMs(20000));
    std::this_thread::sleep_for(milliseconds(300));
    cancelled_at = Clock::now();
    cancelled0 = true;
  });
  auto comm = ucx::UcxCommunicator::Create(&store, 0, 2, 30, Options(&cancelled0));
  const auto returned_at = Clock::now();
  canceller.join();
  cancelled1 = true;
  rank1.join();
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kAborted) << comm.status();
  EXPECT_NE(comm.status().message().find("the hello of every peer"), std::string::npos)
      << comm.status();
  EXPECT_GE(returned_at, cancelled_at) << "returned before the cancellation";
  EXPECT_LT(returned_at - cancelled_at, kCancelBound);
  EXPECT_EQ(result1.code(), StatusCode::kAborted) << result1;
}

TEST(UcxBootstrapCancelTest, ACheckThatNeverFiresLeavesBootstrapAlone) {
  InMemoryStore store;
  std::atomic<bool> never{false};
  Status results[2];
  float sums[2] = {0, 0};
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      auto comm = ucx::UcxCommunicator::Create(&store, r, 2, 7, Options(&never));
      if (!comm.ok()) {
        results[r] = comm.status();
        return;
      }
      sums[r] = static_cast<float>(r + 1);
      results[r] = (*comm)->AllReduce({&sums[r], 1, DataType::kFloat32}, ReduceOp::kSum)->Wait();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    EXPECT_EQ(sums[r], 3.0f);
  }
}

}  // namespace
}  // namespace retort::collectives::testing
