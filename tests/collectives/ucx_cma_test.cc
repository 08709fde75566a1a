// Thread-per-rank tests of the UCX transport's single-copy (CMA) path for large messages:
// every collective with CMA off and with CMA for every message, in both progress modes, for
// 1..4 ranks and awkward sizes; the per-peer agreement on the threshold; length mismatches
// and a withdrawn send. Ranks are threads of one process, which may read its own memory, so
// the CMA path runs here exactly as between processes (ucx_multiprocess_test covers those).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>

#include "collectives/ucx/ucx_communicator.h"
#include "tests/collectives/collective_checks.h"

namespace retort::collectives::testing {
namespace {

ucx::UcxCommunicatorOptions Options(size_t cma_min_bytes, ProgressMode progress,
                                    ucx::CmaPolicy policy = ucx::CmaPolicy::kAlways,
                                    size_t chunk_bytes = 16 << 10) {
  ucx::UcxCommunicatorOptions options;
  options.chunk_bytes = chunk_bytes;
  options.progress = progress;
  options.ucx.cma_min_bytes = cma_min_bytes;
  options.ucx.cma_policy = policy;
  options.default_timeout = std::chrono::milliseconds(20000);
  options.bootstrap_timeout = std::chrono::milliseconds(20000);
  return options;
}

CommunicatorFactory Factory(size_t cma_min_bytes, ProgressMode progress,
                            ucx::CmaPolicy policy = ucx::CmaPolicy::kAlways) {
  return [=](BootstrapStore* store, int rank, int size, uint64_t generation) {
    return ucx::CreateUcxCommunicator(store, rank, size, generation,
                                      Options(cma_min_bytes, progress, policy));
  };
}

// Per-rank thresholds: rank r gets thresholds[r] (and policies[r], default: always).
using UcxPtr = std::unique_ptr<ucx::UcxCommunicator>;
void RunUcxRanks(const std::vector<size_t>& thresholds,
                 const std::function<void(ucx::UcxCommunicator&)>& body,
                 const std::vector<ucx::CmaPolicy>& policies = {}) {
  InMemoryStore store;
  const int world = static_cast<int>(thresholds.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      const ucx::CmaPolicy policy =
          r < static_cast<int>(policies.size()) ? policies[r] : ucx::CmaPolicy::kAlways;
      auto comm = ucx::UcxCommunicator::Create(
          &store, r, world, 3, Options(thresholds[r], ProgressMode::kBackgroundThread, policy));
      ASSERT_TRUE(comm.ok()) << "rank " << r << ": " << comm.status();
      body(**comm);
    });
  }
  for (auto& t : threads) t.join();
}

const size_t kSizes[] = {0, 1, 7, 131, 4099, 100003};

// (world size, CMA threshold in bytes, caller-driven progress)
class CmaWorldTest : public ::testing::TestWithParam<std::tuple<int, size_t, bool>> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  CommunicatorFactory factory() const {
    return Factory(std::get<1>(GetParam()), std::get<2>(GetParam())
                                                ? ProgressMode::kCallerThread
                                                : ProgressMode::kBackgroundThread);
  }
};

TEST_P(CmaWorldTest, AllGatherEvenUnevenAndInPlace) {
  RunThreadRanks(world(), factory(), [](Communicator& comm) {
    for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
      for (size_t c : kSizes) CheckAllGatherV(comm, dtype, std::vector<size_t>(comm.size(), c));
      CheckAllGatherV(comm, dtype, UnevenCounts(comm.size(), 40009));
      CheckAllGatherV(comm, dtype, UnevenCounts(comm.size(), 13), /*in_place=*/true);
      CheckAllGatherV(comm, dtype, std::vector<size_t>(comm.size(), 65537), /*in_place=*/true);
    }
  });
}

TEST_P(CmaWorldTest, AllReduceAndReduceScatter) {
  RunThreadRanks(world(), factory(), [](Communicator& comm) {
    for (size_t c : kSizes) {
      CheckAllReduce(comm, DataType::kFloat32, ReduceOp::kSum, c);
      CheckAllReduce(comm, DataType::kFloat16, ReduceOp::kAverage, c);
      CheckReduceScatterV(comm, DataType::kBFloat16, ReduceOp::kSum,
                          std::vector<size_t>(comm.size(), c));
    }
    CheckReduceScatterV(comm, DataType::kFloat32, ReduceOp::kAverage,
                        UnevenCounts(comm.size(), 30011), /*in_place=*/true);
  });
}

TEST_P(CmaWorldTest, BroadcastAllToAllAndSendRecv) {
  RunThreadRanks(world(), factory(), [](Communicator& comm) {
    CheckBroadcast(comm, DataType::kFloat32, 100003, 0);
    CheckBroadcast(comm, DataType::kFloat16, 1, comm.size() - 1);
    CheckAllToAllV(comm, 0);
    CheckAllToAllV(comm, 30011);
    for (size_t c : kSizes) CheckSendRecvRing(comm, c);
    ASSERT_TRUE(WaitFor(comm.Barrier()).ok());
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, CmaWorldTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(size_t{0}, size_t{1}),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return "ranks" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == 0 ? "_cma_off" : "_cma_always") +
                                  (std::get<2>(info.param) ? "_caller" : "_thread");
                         });

TEST(CmaAgreementTest, BothRanksUseTheLargerThreshold) {
  RunUcxRanks({1000, 1}, [](ucx::UcxCommunicator& comm) {
    EXPECT_NE(comm.transport_description().find("cma >= 1000 bytes"), std::string::npos)
        << comm.transport_description();
    // Messages just below, at and above the threshold (fp32: 4 bytes per element).
    for (size_t c : {size_t{249}, size_t{250}, size_t{251}}) {
      CheckAllGatherV(comm, DataType::kFloat32, {c, c});
      CheckSendRecvRing(comm, c);
    }
  });
}

TEST(CmaAgreementTest, OneRankRefusingTurnsItOffForBoth) {
  RunUcxRanks({0, 1}, [](ucx::UcxCommunicator& comm) {
    EXPECT_NE(comm.transport_description().find("cma off"), std::string::npos)
        << comm.transport_description();
    CheckAllGatherV(comm, DataType::kFloat32, {100003, 100003});
    CheckAllReduce(comm, DataType::kFloat32, ReduceOp::kSum, 100003);
  });
}

// Each rank sends through one protocol and receives the other's: every receive from a CMA
// peer must take whichever arrives (the sender's choice travels in the tag).
TEST(CmaMixedProtocolTest, ARankSendingThroughCmaAndOneThroughTheFifoUnderstandEachOther) {
  RunUcxRanks({1, 1, 1},
              [](ucx::UcxCommunicator& comm) {
                for (size_t c : {size_t{11}, size_t{4099}, size_t{100003}}) {
                  CheckAllGatherV(comm, DataType::kFloat32, {c, c + 1, c});
                  CheckAllReduce(comm, DataType::kFloat32, ReduceOp::kSum, c);
                  CheckReduceScatterV(comm, DataType::kFloat32, ReduceOp::kSum, {c, c, c + 2});
                  CheckSendRecvRing(comm, c);
                }
              },
              {ucx::CmaPolicy::kAlways, ucx::CmaPolicy::kNever, ucx::CmaPolicy::kAdaptive});
}

// The adaptive policy alternates while it measures, then settles: every operation on the way
// must still be right, in both progress modes.
TEST(CmaMixedProtocolTest, AdaptiveRanksStayCorrectWhileTheyMeasureAndSwitch) {
  for (ProgressMode mode : {ProgressMode::kBackgroundThread, ProgressMode::kCallerThread}) {
    RunThreadRanks(2, Factory(1, mode, ucx::CmaPolicy::kAdaptive), [](Communicator& comm) {
      for (int i = 0; i < 3 * ucx::CmaChooser::kExploreEvery; ++i) {
        CheckAllReduce(comm, DataType::kFloat32, ReduceOp::kSum, 4099 + i % 3);
      }
    });
  }
}

TEST(CmaProtocolTest, LengthMismatchFailsBothSidesWithTheLengths) {
  RunUcxRanks({1, 1}, [](ucx::UcxCommunicator& comm) {
    TypedBuffer buf(DataType::kFloat32, comm.rank() == 0 ? 100 : 60);
    Status s = comm.rank() == 0 ? WaitFor(comm.Send(buf.const_buffer(), 1, 3))
                                : WaitFor(comm.Recv(buf.mutable_buffer(), 0, 3));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    if (comm.rank() == 1) {
      EXPECT_NE(s.ToString().find("receive from rank 0 of 240 bytes: the message was 400 bytes"),
                std::string::npos)
          << s;
    } else {
      EXPECT_NE(s.ToString().find("send to rank 1 of 400 bytes: the receive length differs"),
                std::string::npos)
          << s;
    }
  });
}

TEST(CmaProtocolTest, ReceiverRefusesASendWithdrawnBeforeItWasRead) {
  std::atomic<bool> withdrawn{false};
  RunUcxRanks({1, 1}, [&](ucx::UcxCommunicator& comm) {
    TypedBuffer buf = MakeInput(comm.rank(), DataType::kFloat32, 4099);
    if (comm.rank() == 0) {
      WorkPtr send = comm.Send(buf.const_buffer(), 1, 9);
      // The descriptor is out once the executor posted it; then the sender gives up.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      EXPECT_FALSE(send->IsCompleted());
      comm.Abort("test withdraws the send");
      EXPECT_EQ(WaitFor(send).code(), StatusCode::kAborted);
      withdrawn = true;
      // Keeps `buf` alive (and unchanged) while the receiver looks at it.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    } else {
      while (!withdrawn) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      TypedBuffer in(DataType::kFloat32, 4099);
      Status s = comm.Recv(in.mutable_buffer(), 0, 9)->Wait(Deadline::AfterMs(5000));
      // The descriptor was already queued here: the receiver reads the buffer, then sees
      // the sender's withdrawal and refuses the bytes.
      EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
      EXPECT_NE(s.ToString().find("rank 0 withdrew the message"), std::string::npos) << s;
    }
  });
}

}  // namespace
}  // namespace retort::collectives::testing
