// The GPU data plane on real device memory (skipped without a GPU):
//  - StagedCommunicator over UCX with the CUDA copier: two ranks (threads) on device 0, device
//    buffers from cudaMalloc, many chunks; results equal the reference;
//  - RoutedCommunicator (NCCL for device buffers, UCX for host ones) on two GPUs (skipped with
//    fewer).
#include <gtest/gtest.h>

#include "collectives/cuda_data_plane.h"
#include "collectives/nccl/nccl_communicator.h"
#include "collectives/routed.h"
#include "collectives/staged.h"
#include "collectives/ucx/ucx_communicator.h"
#include "tests/collectives/collective_checks.h"
#include "tests/collectives/device_copy.h"

namespace retort::collectives::testing {
namespace {

constexpr MemoryKind kDevice = MemoryKind::kCudaDevice;

ucx::UcxCommunicatorOptions UcxOptions() {
  ucx::UcxCommunicatorOptions o;
  o.default_timeout = std::chrono::milliseconds(30000);
  return o;
}

// Device all-reduce and reduce-scatter-v of `comm` against the references.
void CheckOnDevice(Communicator& comm, int device) {
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  const int n = comm.size();
  TypedBuffer data = MakeInput(comm.rank(), DataType::kFloat32, 1000003);
  DeviceCopy d(data.count() * 4);
  d.From(data.data());
  ASSERT_TRUE(WaitFor(comm.AllReduce({d.get(), data.count(), DataType::kFloat32, kDevice},
                                     ReduceOp::kAverage))
                  .ok());
  d.To(data.data());
  EXPECT_TRUE(MatchesReduction(data, 0, n, ReduceOp::kAverage, DataType::kFloat32));
  const auto counts = UnevenCounts(n, 300007);
  const auto offsets = Offsets(counts);
  TypedBuffer input = MakeInput(comm.rank(), DataType::kBFloat16, TotalCount(counts));
  DeviceCopy din(input.count() * 2);
  din.From(input.data());
  TypedBuffer out(DataType::kBFloat16, counts[comm.rank()]);
  DeviceCopy dout(out.count() * 2);
  ASSERT_TRUE(WaitFor(comm.ReduceScatterV({din.get(), input.count(), DataType::kBFloat16, kDevice},
                                          {dout.get(), out.count(), DataType::kBFloat16, kDevice},
                                          counts, ReduceOp::kSum))
                  .ok());
  dout.To(out.data());
  EXPECT_TRUE(MatchesReduction(out, offsets[comm.rank()], n, ReduceOp::kSum, DataType::kBFloat16));
}

TEST(StagedCudaTest, UcxWithTheCudaCopierOnDeviceBuffers) {
  if (nccl::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible";
  RunThreadRanks(
      2,
      [](BootstrapStore* store, int rank, int size,
         uint64_t generation) -> StatusOr<std::unique_ptr<Communicator>> {
        RETORT_ASSIGN_OR_RETURN(
            auto ucx, ucx::CreateUcxCommunicator(store, rank, size, generation, UcxOptions()));
        RETORT_ASSIGN_OR_RETURN(auto copier, CreateCudaCopier(0));
        StagedCommunicatorOptions so;
        so.chunk_bytes = size_t{256} << 10;  // ~16 chunks of the 4 MB all-reduce
        RETORT_ASSIGN_OR_RETURN(auto staged,
                                StagedCommunicator::Create(std::move(ucx), std::move(copier), so));
        return std::unique_ptr<Communicator>(std::move(staged));
      },
      [](Communicator& comm) {
        CheckOnDevice(comm, 0);
        CheckAllReduce(comm, DataType::kFloat32, ReduceOp::kSum, 5000);  // host: straight to UCX
      });
}

TEST(StagedCudaTest, RoutedNcclForDeviceBuffersUcxForHostBuffers) {
  if (nccl::CudaDeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices (NCCL: one per rank)";
  RunThreadRanks(
      2,
      [](BootstrapStore* store, int rank, int size,
         uint64_t generation) -> StatusOr<std::unique_ptr<Communicator>> {
        CudaCommunicatorOptions no;
        no.device = rank;
        RETORT_ASSIGN_OR_RETURN(auto nccl,
                                CreateNcclCommunicator(store, rank, size, generation, no));
        RETORT_ASSIGN_OR_RETURN(
            auto ucx, ucx::CreateUcxCommunicator(store, rank, size, generation, UcxOptions()));
        RETORT_ASSIGN_OR_RETURN(
            auto routed, RoutedCommunicator::Create(std::move(nccl), std::move(ucx), kDevice));
        return std::unique_ptr<Communicator>(std::move(routed));
      },
      [](Communicator& comm) {
        CheckOnDevice(comm, comm.rank());
        CheckReduceScatterV(comm, DataType::kFloat32, ReduceOp::kSum, UnevenCounts(2, 1001));
      });
}

}  // namespace
}  // namespace retort::collectives::testing
