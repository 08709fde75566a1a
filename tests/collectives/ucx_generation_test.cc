// Generation fencing: a peer at another generation is refused at bootstrap, and a message
// tagged with a stale generation is never delivered (the receive ends at its deadline).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "collectives/ucx/ucx_communicator.h"
#include "tests/collectives/collective_checks.h"

namespace retort::collectives::testing {
namespace {

ucx::UcxCommunicatorOptions ShortOptions() {
  ucx::UcxCommunicatorOptions options;
  options.key_prefix = "shared";  // both generations meet under the same keys on purpose
  options.default_timeout = std::chrono::milliseconds(5000);
  options.bootstrap_timeout = std::chrono::milliseconds(5000);
  return options;
}

TEST(UcxGenerationTest, PeerAtAnotherGenerationIsRefusedAtBootstrap) {
  InMemoryStore store;
  Status results[2];
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      auto comm =
          ucx::UcxCommunicator::Create(&store, r, 2, /*generation=*/r == 0 ? 5 : 4, ShortOptions());
      results[r] = comm.ok() ? Status::Ok() : comm.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), StatusCode::kFailedPrecondition) << results[r];
    EXPECT_NE(results[r].message().find("refusing to connect to another generation"),
              std::string::npos)
        << results[r];
  }
  EXPECT_NE(results[0].message().find("rank 1 published generation 4"), std::string::npos)
      << results[0];
}

TEST(UcxGenerationTest, StaleGenerationMessageIsNeverDelivered) {
  std::atomic<bool> rank0_done{false};
  RunThreadRanks(
      2,
      [](BootstrapStore* store, int rank, int size, uint64_t generation) {
        return ucx::CreateUcxCommunicator(store, rank, size, generation, ShortOptions());
      },
      [&](Communicator& comm) {
        auto& ucx_comm = dynamic_cast<ucx::UcxCommunicator&>(comm);
        TypedBuffer payload = MakeInput(comm.rank(), DataType::kFloat32, 16);
        if (comm.rank() == 1) {
          // A straggler of generation 41 talks to the generation-42 world.
          Status sent =
              ucx_comm.SendWithGenerationForTesting(payload.const_buffer(), 0, 9, 41)->Wait();
          EXPECT_TRUE(sent.ok()) << sent;
          // Stays alive (a closing peer would end rank 0's receive early) until rank 0 is done.
          const Deadline limit = Deadline::AfterMs(10000);
          while (!rank0_done.load() && !limit.Expired()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          return;
        }
        TypedBuffer received(DataType::kFloat32, 16);
        WorkPtr recv = comm.Recv(received.mutable_buffer(), 1, 9);
        Status s = recv->Wait(Deadline::AfterMs(1500));
        EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
        for (size_t i = 0; i < 16; ++i) ASSERT_EQ(received.Get(i), 0.0f) << "stale data leaked";
        recv->Abort();
        EXPECT_EQ(recv->Wait(Deadline::AfterMs(3000)).code(), StatusCode::kAborted);
        rank0_done = true;
      },
      /*generation=*/42);
}

TEST(UcxGenerationTest, AbortCompletesRunningAndQueuedWork) {
  std::atomic<bool> rank0_done{false};
  RunThreadRanks(
      2,
      [](BootstrapStore* store, int rank, int size, uint64_t generation) {
        return ucx::CreateUcxCommunicator(store, rank, size, generation, ShortOptions());
      },
      [&](Communicator& comm) {
        if (comm.rank() == 1) {  // stays alive but never sends: rank 0's receive waits
          const Deadline limit = Deadline::AfterMs(10000);
          while (!rank0_done.load() && !limit.Expired()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          return;
        }
        TypedBuffer buf(DataType::kFloat32, 64);
        WorkPtr recv = comm.Recv(buf.mutable_buffer(), 1, 1);
        WorkPtr queued = comm.AllReduce(buf.mutable_buffer(), ReduceOp::kSum);
        EXPECT_EQ(recv->Wait(Deadline::AfterMs(100)).code(), StatusCode::kDeadlineExceeded);
        EXPECT_FALSE(recv->IsCompleted());
        recv->Abort();
        EXPECT_EQ(recv->Wait(Deadline::AfterMs(3000)).code(), StatusCode::kAborted);
        EXPECT_EQ(queued->Wait(Deadline::AfterMs(3000)).code(), StatusCode::kAborted);
        rank0_done = true;
      },
      /*generation=*/3);
}

}  // namespace
}  // namespace retort::collectives::testing
