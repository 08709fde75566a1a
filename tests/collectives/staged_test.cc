// StagedCommunicator over UCX with a copier that moves host memory on a thread of its own, the
// "device" buffers being host memory labelled kCudaDevice: every collective equals the simple
// reference with many chunks (uneven counts, zeros, in place); a backend refuses memory it does
// not take, naming it; chunk k+1 is staged in before chunk k is copied back (pipelining); a
// failed copy and a stalled copy end the operation with an error within its deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "collectives/staged.h"
#include "collectives/ucx/ucx_communicator.h"
#include "tests/collectives/collective_checks.h"
#include "tests/collectives/fake_device.h"

namespace retort::collectives::testing {
namespace {

ucx::UcxCommunicatorOptions UcxOptions() {
  ucx::UcxCommunicatorOptions o;
  o.default_timeout = std::chrono::milliseconds(20000);
  o.bootstrap_timeout = std::chrono::milliseconds(20000);
  return o;
}

// A staged UCX communicator per rank with the copier options `copier_options(rank)`, chunks of
// `chunk_bytes`.
CommunicatorFactory StagedFactory(size_t chunk_bytes,
                                  std::function<ThreadCopier::Options(int rank)> copier_options,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  return [=](BootstrapStore* store, int rank, int size,
             uint64_t generation) -> StatusOr<std::unique_ptr<Communicator>> {
    ucx::UcxCommunicatorOptions o = UcxOptions();
    o.default_timeout = timeout;
    RETORT_ASSIGN_OR_RETURN(auto ucx, ucx::CreateUcxCommunicator(store, rank, size, generation, o));
    StagedCommunicatorOptions so;
    so.chunk_bytes = chunk_bytes;
    RETORT_ASSIGN_OR_RETURN(
        auto staged, StagedCommunicator::Create(
                         std::move(ucx), std::make_unique<ThreadCopier>(copier_options(rank)), so));
    return std::unique_ptr<Communicator>(std::make_unique<AsDeviceMemory>(std::move(staged)));
  };
}

CommunicatorFactory StagedFactory(size_t chunk_bytes, ThreadCopier::Options copier_options = {},
                                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  return StagedFactory(
      chunk_bytes, [copier_options](int) { return copier_options; }, timeout);
}

TEST(StagedCommunicatorTest, EveryCollectiveMatchesTheReferenceInManyChunks) {
  // 96-byte chunks: a 3-rank reduce-scatter of ~1,000 floats runs in ~40 chunks.
  RunThreadRanks(3, StagedFactory(96), [](Communicator& comm) {
    const std::vector<size_t> uneven = UnevenCounts(3, 301);
    CheckReduceScatterV(comm, DataType::kFloat32, ReduceOp::kSum, uneven);
    CheckReduceScatterV(comm, DataType::kBFloat16, ReduceOp::kAverage, {100, 0, 57});
    CheckReduceScatterV(comm, DataType::kFloat32, ReduceOp::kSum, uneven, /*in_place=*/true);
    CheckAllGatherV(comm, DataType::kFloat32, uneven);
    CheckAllGatherV(comm, DataType::kFloat16, {5, 200, 0}, /*in_place=*/true);
    CheckAllReduce(comm, DataType::kFloat32, ReduceOp::kAverage, 1001);
    CheckAllReduce(comm, DataType::kFloat32, ReduceOp::kSum, 0);
    CheckBroadcast(comm, DataType::kFloat32, 777, /*root=*/2);
    CheckAllToAllV(comm, 40);
    CheckSendRecvRing(comm, 333);
    ASSERT_TRUE(WaitFor(comm.Barrier()).ok());
  });
}

TEST(StagedCommunicatorTest, HostBuffersGoStraightThroughInIssueOrder) {
  RunThreadRanks(2, StagedFactory(64), [](Communicator& device_view) {
    // The staged communicator itself, given host buffers, interleaved with device ones.
    Communicator& staged = dynamic_cast<AsDeviceMemory&>(device_view).inner();
    CheckAllReduce(staged, DataType::kFloat32, ReduceOp::kSum, 500);
    CheckAllReduce(device_view, DataType::kFloat32, ReduceOp::kSum, 500);
    CheckReduceScatterV(staged, DataType::kFloat32, ReduceOp::kSum, {40, 41});
  });
}

// As the peer replicas exchange state: every rank sends 4 MB to its successor, then receives
// from its predecessor, and waits for its send first. A Send that held up the Recv queued
// behind it would deadlock (rendezvous sends complete only once the receive is posted).
TEST(StagedCommunicatorTest, ASendAndTheRecvAfterItAreBothInFlight) {
  RunThreadRanks(3, StagedFactory(1 << 20), [](Communicator& device_view) {
    Communicator& staged = dynamic_cast<AsDeviceMemory&>(device_view).inner();
    const int n = staged.size(), r = staged.rank();
    for (MemoryKind kind : {MemoryKind::kCudaDevice, MemoryKind::kHost}) {
      std::vector<float> out(1 << 20, static_cast<float>(r)), in(1 << 20, -1.f);
      WorkPtr send =
          staged.Send({out.data(), out.size(), DataType::kFloat32, kind}, (r + 1) % n, 7);
      WorkPtr recv =
          staged.Recv({in.data(), in.size(), DataType::kFloat32, kind}, (r + n - 1) % n, 7);
      Status sent = send->Wait(Deadline::AfterMs(10000));
      ASSERT_TRUE(sent.ok()) << MemoryKindName(kind) << ": " << sent;
      Status received = recv->Wait(Deadline::AfterMs(10000));
      ASSERT_TRUE(received.ok()) << MemoryKindName(kind) << ": " << received;
      for (float v : in) ASSERT_EQ(v, static_cast<float>((r + n - 1) % n));
    }
  });
}

TEST(StagedCommunicatorTest, DestroyingItAnswersAPointToPointStillInFlight) {
  InMemoryStore store;
  std::atomic<bool> rank0_done{false};
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = std::thread([&, r] {
      auto comm = StagedFactory(4096)(&store, r, 2, 1);
      ASSERT_TRUE(comm.ok()) << comm.status();
      if (r == 1) {  // never sends; stays until rank 0 is done
        const Deadline limit = Deadline::AfterMs(20000);
        while (!rank0_done.load() && !limit.Expired())
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return;
      }
      std::vector<float> in(1024, 0.f);
      WorkPtr recv = (*comm)->Recv({in.data(), in.size(), DataType::kFloat32}, 1, 3);
      EXPECT_EQ(recv->Wait(Deadline::AfterMs(200)).code(), StatusCode::kDeadlineExceeded);
      const auto start = SteadyClock::now();
      comm->reset();
      Status s = recv->Wait(Deadline::AfterMs(10000));
      EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
      EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(8));
      rank0_done = true;
    });
  }
  for (auto& t : ranks) t.join();
}

TEST(StagedCommunicatorTest, ABackendRefusesMemoryItDoesNotTakeNamingIt) {
  RunThreadRanks(
      1,
      [](BootstrapStore* store, int rank, int size, uint64_t generation) {
        return ucx::CreateUcxCommunicator(store, rank, size, generation, UcxOptions());
      },
      [](Communicator& ucx) {
        std::vector<float> data(8, 1.f);
        MutableBuffer device{data.data(), data.size(), DataType::kFloat32, MemoryKind::kCudaDevice};
        Status s = ucx.AllReduce(device, ReduceOp::kSum)->Wait(Deadline::AfterMs(1000));
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
        EXPECT_NE(s.message().find("all_reduce data is CUDA device memory"), std::string::npos)
            << s;
        EXPECT_NE(s.message().find("the ucx communicator does not take"), std::string::npos) << s;
        EXPECT_NE(s.message().find("takes host, pinned host"), std::string::npos) << s;
        for (float v : data) EXPECT_EQ(v, 1.f);
        // The refusal changed nothing: the communicator still works.
        MutableBuffer host{data.data(), data.size(), DataType::kFloat32, MemoryKind::kPinnedHost};
        EXPECT_TRUE(ucx.AllReduce(host, ReduceOp::kSum)->Wait(Deadline::AfterMs(5000)).ok());
      });
}

TEST(StagedCommunicatorTest, MixedInputAndOutputKindsAreRefused) {
  RunThreadRanks(1, StagedFactory(64), [](Communicator& device_view) {
    Communicator& staged = dynamic_cast<AsDeviceMemory&>(device_view).inner();
    std::vector<float> in(4, 1.f), out(4, 0.f);
    Status s = staged
                   .ReduceScatterV({in.data(), 4, DataType::kFloat32, MemoryKind::kCudaDevice},
                                   {out.data(), 4, DataType::kFloat32, MemoryKind::kHost}, {4},
                                   ReduceOp::kSum)
                   ->Wait(Deadline::AfterMs(1000));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("input is CUDA device memory and output host memory"),
              std::string::npos)
        << s;
  });
}

TEST(StagedCommunicatorTest, TheNextChunkIsStagedInBeforeThePreviousIsCopiedBack) {
  InMemoryStore store;
  std::vector<std::string> logs(2);
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = std::thread([&, r] {
      auto ucx = ucx::CreateUcxCommunicator(&store, r, 2, 1, UcxOptions());
      ASSERT_TRUE(ucx.ok()) << ucx.status();
      auto owned = std::make_unique<ThreadCopier>(ThreadCopier::Options{});
      ThreadCopier* copier = owned.get();
      StagedCommunicatorOptions so;
      so.chunk_bytes = 400;  // 100 floats: 10 chunks of an all-reduce of 1,000
      auto staged = StagedCommunicator::Create(std::move(*ucx), std::move(owned), so);
      ASSERT_TRUE(staged.ok()) << staged.status();
      std::vector<float> data(1000, static_cast<float>(r + 1));
      MutableBuffer device{data.data(), data.size(), DataType::kFloat32, MemoryKind::kCudaDevice};
      ASSERT_TRUE(
          (*staged)->AllReduce(device, ReduceOp::kSum)->Wait(Deadline::AfterMs(20000)).ok());
      for (float v : data) ASSERT_EQ(v, 3.f);
      logs[r] = copier->issue_log();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    // Ordered after the caller ("C": no ready event given); 10 chunks, one copy in and one
    // back each; chunk k+1 goes in before chunk k comes back.
    std::string expected = "CHHD";
    for (int k = 1; k < 9; ++k) expected += "HD";
    expected += "D";
    EXPECT_EQ(logs[r], expected) << "rank " << r;
  }
}

// Rank 0's third copy fails: rank 0's operation fails naming it; rank 1, whose peer stopped,
// fails too within the deadline (however it learns of it); both communicators are broken.
TEST(StagedCommunicatorTest, AFailedCopyFailsTheOperationAndBreaksTheCommunicator) {
  auto failing_on_rank0 = [](int rank) {
    ThreadCopier::Options o;
    if (rank == 0) o.fail_at = 3;
    return o;
  };
  RunThreadRanks(
      2, StagedFactory(64, failing_on_rank0, std::chrono::seconds(5)), [](Communicator& comm) {
        std::vector<float> data(200, 1.f);
        Status s = comm.AllReduce({data.data(), data.size(), DataType::kFloat32}, ReduceOp::kSum)
                       ->Wait(Deadline::AfterMs(15000));
        EXPECT_FALSE(s.ok()) << "rank " << comm.rank();
        if (comm.rank() == 0) {
          EXPECT_EQ(s.code(), StatusCode::kInternal) << s;
          EXPECT_NE(s.message().find("copy 3 failed"), std::string::npos) << s;
        }
        EXPECT_EQ(comm.Barrier()->Wait(Deadline::AfterMs(5000)).code(), StatusCode::kAborted);
      });
}

TEST(StagedCommunicatorTest, AStalledCopyEndsAtTheOperationsDeadline) {
  ThreadCopier::Options o;
  o.stall_at = 2;
  RunThreadRanks(2, StagedFactory(64, o, std::chrono::milliseconds(1500)), [](Communicator& comm) {
    std::vector<float> data(200, 1.f);
    const auto start = SteadyClock::now();
    Status s = comm.AllReduce({data.data(), data.size(), DataType::kFloat32}, ReduceOp::kSum)
                   ->Wait(Deadline::AfterMs(15000));
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    EXPECT_LT(SteadyClock::now() - start, std::chrono::milliseconds(1500 + 5000 + 2000))
        << "the operation outlived its deadline plus the drain of its copies";
  });
}

}  // namespace
}  // namespace retort::collectives::testing
