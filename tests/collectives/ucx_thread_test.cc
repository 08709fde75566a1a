// Thread-per-rank tests of the UCX communicator over an InMemoryStore: every collective,
// dtype and op against the reference for 1..4 ranks and awkward sizes.
#include <gtest/gtest.h>

#include "collectives/ucx/ucx_communicator.h"
#include "tests/collectives/collective_checks.h"

namespace retort::collectives::testing {
namespace {

CommunicatorFactory UcxFactory(size_t chunk_bytes = 64 << 10,
                               ProgressMode progress = ProgressMode::kBackgroundThread) {
  return [chunk_bytes, progress](BootstrapStore* store, int rank, int size, uint64_t generation) {
    ucx::UcxCommunicatorOptions options;
    options.chunk_bytes = chunk_bytes;
    options.progress = progress;
    options.default_timeout = std::chrono::milliseconds(20000);
    options.bootstrap_timeout = std::chrono::milliseconds(20000);
    return ucx::CreateUcxCommunicator(store, rank, size, generation, options);
  };
}

const DataType kDtypes[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage};
// 0, 1, primes, not divisible by 2..4, and one that spans many 64 KiB chunks.
const size_t kSizes[] = {0, 1, 7, 131, 4099, 100003};

class UcxWorldTest : public ::testing::TestWithParam<int> {};

TEST_P(UcxWorldTest, ReduceScatterAllDtypesOpsSizes) {
  RunThreadRanks(GetParam(), UcxFactory(), [](Communicator& comm) {
    for (DataType dtype : kDtypes) {
      for (ReduceOp op : kOps) {
        for (size_t c : kSizes) {
          CheckReduceScatterV(comm, dtype, op, std::vector<size_t>(comm.size(), c));
        }
      }
    }
  });
}

TEST_P(UcxWorldTest, ReduceScatterVUnevenWithZerosAndInPlace) {
  RunThreadRanks(GetParam(), UcxFactory(), [](Communicator& comm) {
    for (DataType dtype : kDtypes) {
      for (size_t base : {size_t{0}, size_t{5}, size_t{40009}}) {
        CheckReduceScatterV(comm, dtype, ReduceOp::kSum, UnevenCounts(comm.size(), base));
        CheckReduceScatterV(comm, dtype, ReduceOp::kAverage, UnevenCounts(comm.size(), base),
                            /*in_place=*/true);
      }
    }
  });
}

TEST_P(UcxWorldTest, AllGatherAndAllGatherV) {
  RunThreadRanks(GetParam(), UcxFactory(), [](Communicator& comm) {
    for (DataType dtype : kDtypes) {
      for (size_t c : kSizes) CheckAllGatherV(comm, dtype, std::vector<size_t>(comm.size(), c));
      CheckAllGatherV(comm, dtype, UnevenCounts(comm.size(), 40009));
      CheckAllGatherV(comm, dtype, UnevenCounts(comm.size(), 13), /*in_place=*/true);
      // One rank holds everything (two ranks: the local copy is paced by the peer's chunks,
      // and one side has no chunks or no own data).
      for (int holder : {0, comm.size() - 1}) {
        std::vector<size_t> lopsided(comm.size(), 0);
        lopsided[holder] = 70001;
        CheckAllGatherV(comm, dtype, lopsided);
      }
    }
  });
}

TEST_P(UcxWorldTest, AllReduceAllDtypesOpsSizes) {
  RunThreadRanks(GetParam(), UcxFactory(), [](Communicator& comm) {
    for (DataType dtype : kDtypes) {
      for (ReduceOp op : kOps) {
        for (size_t c : kSizes) CheckAllReduce(comm, dtype, op, c);
      }
    }
  });
}

TEST_P(UcxWorldTest, BroadcastBarrierAllToAllVSendRecv) {
  RunThreadRanks(GetParam(), UcxFactory(), [](Communicator& comm) {
    for (size_t c : kSizes) CheckBroadcast(comm, DataType::kBFloat16, c, comm.size() - 1);
    ASSERT_TRUE(WaitFor(comm.Barrier()).ok());
    CheckAllToAllV(comm, 0);
    CheckAllToAllV(comm, 30011);
    CheckSendRecvRing(comm, 1);
    CheckSendRecvRing(comm, 200003);  // large enough for the rendezvous protocol
    ASSERT_TRUE(WaitFor(comm.Barrier()).ok());
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, UcxWorldTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "ranks" + std::to_string(info.param); });

TEST(UcxCommunicatorTest, ManyOutstandingOperationsCompleteInOrder) {
  RunThreadRanks(3, UcxFactory(4096), [](Communicator& comm) {
    std::vector<TypedBuffer> buffers;
    for (int i = 0; i < 8; ++i) buffers.push_back(MakeInput(comm.rank(), DataType::kFloat32, 9001));
    std::vector<WorkPtr> works;
    for (auto& b : buffers) works.push_back(comm.AllReduce(b.mutable_buffer(), ReduceOp::kSum));
    for (auto& w : works) ASSERT_TRUE(WaitFor(w).ok());
    for (auto& b : buffers)
      EXPECT_TRUE(MatchesReduction(b, 0, 3, ReduceOp::kSum, DataType::kFloat32));
  });
}

TEST(UcxCommunicatorTest, CallerDrivenProgressRunsOperationsInsideWait) {
  RunThreadRanks(3, UcxFactory(16 << 10, ProgressMode::kCallerThread), [](Communicator& comm) {
    for (DataType dtype : kDtypes) {
      CheckAllReduce(comm, dtype, ReduceOp::kAverage, 100003);
      CheckReduceScatterV(comm, dtype, ReduceOp::kSum, UnevenCounts(comm.size(), 30011));
      CheckAllGatherV(comm, dtype, UnevenCounts(comm.size(), 20011));
    }
    CheckBroadcast(comm, DataType::kFloat32, 7919, 1);
    CheckAllToAllV(comm, 4099);
    CheckSendRecvRing(comm, 200003);  // both posted before either is waited on
    // Nothing runs until someone waits: a queued operation is not complete by itself.
    TypedBuffer data = MakeInput(comm.rank(), DataType::kFloat32, 64);
    WorkPtr queued = comm.AllReduce(data.mutable_buffer(), ReduceOp::kSum);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(queued->IsCompleted());
    ASSERT_TRUE(WaitFor(queued).ok());
    EXPECT_TRUE(MatchesReduction(data, 0, comm.size(), ReduceOp::kSum, DataType::kFloat32));
  });
}

TEST(UcxCommunicatorTest, InvalidArgumentsAreRejectedWithPreciseErrors) {
  RunThreadRanks(2, UcxFactory(), [](Communicator& comm) {
    TypedBuffer in(DataType::kFloat32, 10);
    TypedBuffer out(DataType::kFloat32, 4);
    Status s = comm.ReduceScatterV(in.const_buffer(), out.mutable_buffer(), {5, 5}, ReduceOp::kSum)
                   ->Wait();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("output count 4 != counts[rank"), std::string::npos) << s;
    s = comm.AllGatherV(in.const_buffer(), out.mutable_buffer(), {1, 2, 3})->Wait();
    EXPECT_NE(s.message().find("counts has 3 entries, the communicator has 2"), std::string::npos)
        << s;
    TypedBuffer half(DataType::kFloat16, 5);
    s = comm.ReduceScatterV(in.const_buffer(), half.mutable_buffer(), {5, 5}, ReduceOp::kSum)
            ->Wait();
    EXPECT_NE(s.message().find("input dtype fp32 != output dtype fp16"), std::string::npos) << s;
    s = comm.Send(in.const_buffer(), comm.rank(), 0)->Wait();
    EXPECT_NE(s.message().find("is this rank"), std::string::npos) << s;
    s = comm.Broadcast(in.mutable_buffer(), 2)->Wait();
    EXPECT_NE(s.message().find("root 2 outside [0, 2)"), std::string::npos) << s;
    // The communicator is still usable: invalid calls never reached the peers.
    CheckAllReduce(comm, DataType::kFloat32, ReduceOp::kSum, 33);
  });
}

TEST(UcxCommunicatorTest, MismatchedMessageLengthIsAnErrorNotATruncation) {
  RunThreadRanks(2, UcxFactory(), [](Communicator& comm) {
    TypedBuffer buf(DataType::kFloat32, comm.rank() == 0 ? 100 : 60);
    Status s = comm.rank() == 0 ? comm.Send(buf.const_buffer(), 1, 3)->Wait()
                                : comm.Recv(buf.mutable_buffer(), 0, 3)->Wait();
    if (comm.rank() == 1) {
      EXPECT_FALSE(s.ok());
      EXPECT_NE(s.ToString().find("receive from rank 0 of 240 bytes"), std::string::npos) << s;
    }
  });
}

}  // namespace
}  // namespace retort::collectives::testing
