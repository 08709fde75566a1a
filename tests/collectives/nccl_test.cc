// NCCL communicator tests: thread-per-rank, one GPU per rank, against the same references as
// the CPU backends. Skipped when no GPU is visible (cudaGetDeviceCount).
#include <gtest/gtest.h>

#include "collectives/nccl/cuda_events.h"
#include "collectives/nccl/nccl_communicator.h"
#include "tests/collectives/collective_checks.h"
#include "tests/collectives/device_copy.h"

namespace retort::collectives::testing {
namespace {

constexpr MemoryKind kDevice = MemoryKind::kCudaDevice;

int WorldForThisMachine() { return std::min(nccl::CudaDeviceCount(), 4); }

CommunicatorFactory NcclFactory() {
  return [](BootstrapStore* store, int rank, int size,
            uint64_t generation) -> StatusOr<std::unique_ptr<Communicator>> {
    nccl::NcclCommunicatorOptions options;
    options.device = rank;
    options.default_timeout = std::chrono::milliseconds(30000);
    RETORT_ASSIGN_OR_RETURN(auto comm,
                            nccl::NcclCommunicator::Create(store, rank, size, generation, options));
    return std::unique_ptr<Communicator>(std::move(comm));
  };
}

TEST(NcclCommunicatorTest, AllReduceAndReduceScatterV) {
  const int world = WorldForThisMachine();
  if (world == 0) GTEST_SKIP() << "no CUDA device visible";
  RunThreadRanks(world, NcclFactory(), [](Communicator& comm) {
    ASSERT_EQ(cudaSetDevice(comm.rank()), cudaSuccess);
    const int n = comm.size();
    for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        // all-reduce
        TypedBuffer data = MakeInput(comm.rank(), dtype, 100003);
        DeviceCopy d(data.count() * DataTypeSize(dtype));
        d.From(data.data());
        ASSERT_TRUE(WaitFor(comm.AllReduce({d.get(), data.count(), dtype, kDevice}, op)).ok());
        d.To(data.data());
        EXPECT_TRUE(MatchesReduction(data, 0, n, op, dtype));
        // reduce-scatter-v with uneven counts
        const auto counts = UnevenCounts(n, 4099);
        const auto offsets = Offsets(counts);
        TypedBuffer input = MakeInput(comm.rank(), dtype, TotalCount(counts));
        DeviceCopy din(input.count() * DataTypeSize(dtype));
        din.From(input.data());
        TypedBuffer out(dtype, counts[comm.rank()]);
        DeviceCopy dout(out.count() * DataTypeSize(dtype));
        ASSERT_TRUE(
            WaitFor(comm.ReduceScatterV({din.get(), input.count(), dtype, kDevice},
                                        {dout.get(), out.count(), dtype, kDevice}, counts, op))
                .ok());
        dout.To(out.data());
        EXPECT_TRUE(MatchesReduction(out, offsets[comm.rank()], n, op, dtype));
      }
    }
    ASSERT_TRUE(WaitFor(comm.Barrier()).ok());
  });
}

// The coordinator's aligned plans (nearly even counts) take the padded single-call path of
// nccl_call_plan.h; sparse ones the grouped path. Both against the reference, on the device.
TEST(NcclCommunicatorTest, PaddedAndGroupedCountsGiveTheReference) {
  const int world = WorldForThisMachine();
  if (world < 2)
    GTEST_SKIP() << "needs two CUDA devices (one rank per device); " << world << " visible";
  RunThreadRanks(world, NcclFactory(), [](Communicator& comm) {
    ASSERT_EQ(cudaSetDevice(comm.rank()), cudaSuccess);
    const int n = comm.size();
    const int r = comm.rank();
    std::vector<size_t> padded(n, 4096);
    padded[n - 1] = 4096 - 40;  // the planner's shorter last range
    for (const auto& counts : {padded, UnevenCounts(n, 999)}) {
      const auto offsets = Offsets(counts);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        TypedBuffer input = MakeInput(r, DataType::kFloat32, TotalCount(counts));
        DeviceCopy din(input.count() * sizeof(float));
        din.From(input.data());
        TypedBuffer out(DataType::kFloat32, counts[r]);
        DeviceCopy dout(std::max<size_t>(out.count(), 1) * sizeof(float));
        ASSERT_TRUE(WaitFor(comm.ReduceScatterV(
                                {din.get(), input.count(), DataType::kFloat32, kDevice},
                                {dout.get(), out.count(), DataType::kFloat32, kDevice}, counts, op))
                        .ok());
        if (out.count() > 0) dout.To(out.data());
        EXPECT_TRUE(MatchesReduction(out, offsets[r], n, op, DataType::kFloat32));
      }
      TypedBuffer mine = MakeInput(r, DataType::kFloat32, counts[r], offsets[r]);
      DeviceCopy dmine(std::max<size_t>(mine.count(), 1) * sizeof(float));
      if (mine.count() > 0) dmine.From(mine.data());
      TypedBuffer all(DataType::kFloat32, TotalCount(counts));
      DeviceCopy dall(all.count() * sizeof(float));
      ASSERT_TRUE(
          WaitFor(comm.AllGatherV({dmine.get(), mine.count(), DataType::kFloat32, kDevice},
                                  {dall.get(), all.count(), DataType::kFloat32, kDevice}, counts))
              .ok());
      dall.To(all.data());
      for (int owner = 0; owner < n; ++owner)
        for (size_t i = 0; i < counts[owner]; ++i)
          ASSERT_EQ(all.Get(offsets[owner] + i), InputValue(owner, offsets[owner] + i))
              << "rank " << r << " element " << offsets[owner] + i;
    }
  });
}

// Create runs the warm-up (one reduce-scatter and all-gather) before it returns, on any world
// size, one GPU included; without it the first collective connects the peers.
TEST(NcclCommunicatorTest, CreateWarmsUpAndTheFirstCollectiveFollows) {
  const int world = WorldForThisMachine();
  if (world == 0) GTEST_SKIP() << "no CUDA device visible";
  for (bool warm_up : {true, false}) {
    CommunicatorFactory factory =
        [warm_up](BootstrapStore* store, int rank, int size,
                  uint64_t generation) -> StatusOr<std::unique_ptr<Communicator>> {
      nccl::NcclCommunicatorOptions options;
      options.device = rank;
      options.warm_up = warm_up;
      RETORT_ASSIGN_OR_RETURN(
          auto comm, nccl::NcclCommunicator::Create(store, rank, size, generation, options));
      return std::unique_ptr<Communicator>(std::move(comm));
    };
    RunThreadRanks(world, factory, [](Communicator& comm) {
      ASSERT_EQ(cudaSetDevice(comm.rank()), cudaSuccess);
      TypedBuffer data = MakeInput(comm.rank(), DataType::kFloat32, 1000);
      DeviceCopy d(data.count() * sizeof(float));
      d.From(data.data());
      ASSERT_TRUE(WaitFor(comm.AllReduce({d.get(), data.count(), DataType::kFloat32, kDevice},
                                         ReduceOp::kSum))
                      .ok());
      d.To(data.data());
      EXPECT_TRUE(MatchesReduction(data, 0, comm.size(), ReduceOp::kSum, DataType::kFloat32));
    });
  }
}

// The stream contract (ready_event.h) on a GPU: the operation waits for the ready event
// recorded on the caller's stream at issue (a kernel-free stand-in: an async copy that fills the
// buffer), and the caller's stream waits for the done event without the host waiting; a
// stream-ordered read then sees the result before the Work is confirmed.
TEST(NcclCommunicatorTest, ReadyAndDoneEventsOrderTheCallersStream) {
  const int world = WorldForThisMachine();
  if (world == 0) GTEST_SKIP() << "no CUDA device visible";
  RunThreadRanks(world, NcclFactory(), [](Communicator& comm) {
    ASSERT_EQ(cudaSetDevice(comm.rank()), cudaSuccess);
    nccl::CudaStreamEvents stream(comm.rank(), nullptr);
    const size_t count = 1 << 20;
    std::vector<float> host(count, static_cast<float>(comm.rank() + 1));
    DeviceCopy d(count * sizeof(float));
    ASSERT_EQ(cudaMemcpyAsync(d.get(), host.data(), count * sizeof(float), cudaMemcpyHostToDevice,
                              cudaStreamLegacy),
              cudaSuccess);
    CollectiveOptions o;
    auto ready = stream.RecordReady();
    ASSERT_TRUE(ready.ok()) << ready.status();
    o.ready = *ready;
    WorkPtr work = comm.AllReduce({d.get(), count, DataType::kFloat32, kDevice}, ReduceOp::kSum, o);
    ASSERT_NE(work->done_event(), nullptr);
    bool host_waited = true;
    ASSERT_TRUE(work->StreamWait(stream, Deadline::AfterMs(30000), &host_waited).ok());
    EXPECT_FALSE(host_waited);
    std::vector<float> result(count, 0.f);
    ASSERT_EQ(cudaMemcpyAsync(result.data(), d.get(), count * sizeof(float), cudaMemcpyDeviceToHost,
                              cudaStreamLegacy),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
    const int n = comm.size();
    const float expected = static_cast<float>(n * (n + 1) / 2);
    EXPECT_EQ(result.front(), expected);
    EXPECT_EQ(result.back(), expected);
    EXPECT_TRUE(work->Wait(Deadline::AfterMs(30000)).ok());
  });
}

TEST(NcclCommunicatorTest, HostMemoryIsRefusedNamingIt) {
  if (WorldForThisMachine() == 0) GTEST_SKIP() << "no CUDA device visible";
  RunThreadRanks(1, NcclFactory(), [](Communicator& comm) {
    std::vector<float> host(16, 1.f);
    Status s =
        WaitFor(comm.AllReduce({host.data(), host.size(), DataType::kFloat32}, ReduceOp::kSum));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("all_reduce data is host memory"), std::string::npos) << s;
  });
}

TEST(NcclCommunicatorTest, BootstrapRefusesAnotherGeneration) {
  if (WorldForThisMachine() == 0) GTEST_SKIP() << "no CUDA device visible";
  InMemoryStore store;
  ASSERT_TRUE(store
                  .Set("shared/unique_id",
                       std::string("retort-nccl1 4 2\n") + std::string(128, 'x'),
                       Deadline::AfterMs(100))
                  .ok());
  nccl::NcclCommunicatorOptions options;
  options.key_prefix = "shared";
  auto comm = nccl::NcclCommunicator::Create(&store, 1, 2, 5, options);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kFailedPrecondition) << comm.status();
}

}  // namespace
}  // namespace retort::collectives::testing
