// The hierarchical composition on CPU: 2 "nodes" x 2 local ranks (and other layouts), every
// level over UCX on loopback, checked against the same references as the flat backends; and
// the same hierarchy on "device" memory (host memory labelled CUDA device: fake_device.h),
// with a device intra-node level and the UCX levels staged through copiers, as GPU workers
// build it with NCCL and the CUDA copier.
#include <gtest/gtest.h>

#include "collectives/host_memory_device.h"
#include "collectives/staged.h"
#include "collectives/ucx/ucx_hierarchical.h"
#include "tests/collectives/collective_checks.h"
#include "tests/collectives/fake_device.h"

namespace retort::collectives::testing {
namespace {

CommunicatorFactory HierarchicalFactory(std::vector<int> node_of_rank) {
  return [node_of_rank](BootstrapStore* store, int rank, int size, uint64_t generation) {
    ucx::UcxCommunicatorOptions options;
    options.chunk_bytes = 32 << 10;
    options.default_timeout = std::chrono::milliseconds(20000);
    options.bootstrap_timeout = std::chrono::milliseconds(20000);
    return ucx::CreateHierarchicalUcxCommunicator(store, rank, size, generation,
                                                  NodeLayout{node_of_rank}, options);
  };
}

void RunAllChecks(Communicator& comm) {
  const int n = comm.size();
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (size_t c : {size_t{0}, size_t{1}, size_t{13}, size_t{30011}}) {
        CheckReduceScatterV(comm, dtype, op, std::vector<size_t>(n, c));
        CheckAllReduce(comm, dtype, op, c * 3 + 1);
      }
      CheckReduceScatterV(comm, dtype, op, UnevenCounts(n, 1001), /*in_place=*/true);
    }
    for (size_t c : {size_t{0}, size_t{7}, size_t{20011}}) {
      CheckAllGatherV(comm, dtype, std::vector<size_t>(n, c));
    }
    CheckAllGatherV(comm, dtype, UnevenCounts(n, 333), /*in_place=*/true);
  }
  for (int root = 0; root < n; ++root) CheckBroadcast(comm, DataType::kFloat32, 5003, root);
  ASSERT_TRUE(WaitFor(comm.Barrier()).ok());
  CheckAllToAllV(comm, 101);
  CheckSendRecvRing(comm, 4097);
}

TEST(HierarchicalTest, TwoNodesOfTwoNodeMajorNeedsPacking) {
  RunThreadRanks(4, HierarchicalFactory({0, 0, 1, 1}), RunAllChecks);
}

// Node-major buffers of HierarchicalCommunicator::kMinNodeSliceBytes and more per node: the
// intra level runs once per node's slice (no packing copy), skipping slices that are empty,
// with uneven and zero counts inside a slice; smaller buffers of the same layout pack.
TEST(HierarchicalTest, NodeMajorLargeBuffersRunTheIntraLevelPerNodeSlice) {
  RunThreadRanks(6, HierarchicalFactory({0, 0, 1, 1, 2, 2}), [](Communicator& comm) {
    const std::vector<size_t> zero1_like{40000, 0, 0, 0, 25000, 30001};  // node 1 empty
    const std::vector<size_t> every_node{30000, 20001, 17, 40000, 33333, 1};
    const std::vector<size_t> below_threshold{5, 0, 0, 300, 7, 9};
    for (const auto& counts : {zero1_like, every_node, below_threshold}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        CheckReduceScatterV(comm, DataType::kFloat32, op, counts);
        CheckReduceScatterV(comm, DataType::kBFloat16, op, counts, /*in_place=*/true);
      }
      CheckAllGatherV(comm, DataType::kFloat32, counts);
      CheckAllGatherV(comm, DataType::kBFloat16, counts, /*in_place=*/true);
    }
  });
}

// Regression: large operations move through the levels in single-copy (CMA) messages, each
// acknowledged by its receiver. A receiver whose acknowledgements were still queued in UCX
// when its intra-node operation ended went on to the inter-node level, leaving a sender of its
// node waiting for them: every rank then waited on another (a hang in about half the 64 MiB
// all-reduces of the benchmark). With the production chunk size (1 MiB pieces, all CMA) and a
// deadline, a deadlock fails here instead of hanging.
TEST(HierarchicalTest, LargeOperationsDoNotDeadlockAcrossTheLevels) {
  const CommunicatorFactory factory = [](BootstrapStore* store, int rank, int size,
                                         uint64_t generation) {
    ucx::UcxCommunicatorOptions options;  // production chunking and CMA threshold
    options.default_timeout = std::chrono::milliseconds(10000);
    options.bootstrap_timeout = std::chrono::milliseconds(20000);
    return ucx::CreateHierarchicalUcxCommunicator(store, rank, size, generation,
                                                  NodeLayout{{0, 0, 1, 1}}, options);
  };
  RunThreadRanks(4, factory, [](Communicator& comm) {
    const size_t count = size_t{16} << 20;  // 64 MiB of fp32
    std::vector<float> data(count, 1.0f);
    std::vector<float> part(count / comm.size());
    for (int i = 0; i < 6; ++i) {
      MutableBuffer all{data.data(), count, DataType::kFloat32};
      ASSERT_TRUE(WaitFor(comm.AllReduce(all, ReduceOp::kAverage)).ok()) << "all-reduce " << i;
      ConstBuffer in{data.data(), count, DataType::kFloat32};
      MutableBuffer out{part.data(), part.size(), DataType::kFloat32};
      ASSERT_TRUE(WaitFor(comm.ReduceScatter(in, out, ReduceOp::kAverage)).ok())
          << "reduce-scatter " << i;
    }
    EXPECT_EQ(data.front(), 1.0f);
    EXPECT_EQ(part.back(), 1.0f);
  });
}

TEST(HierarchicalTest, TwoNodesOfTwoInterleavedPacksNothing) {
  RunThreadRanks(4, HierarchicalFactory({0, 1, 0, 1}), RunAllChecks);
}

TEST(HierarchicalTest, DegenerateLayouts) {
  RunThreadRanks(3, HierarchicalFactory({0, 1, 2}), RunAllChecks);  // one rank per node
  RunThreadRanks(2, HierarchicalFactory({0, 0}), RunAllChecks);     // one node
}

// The device hierarchy: intra-node level a staged UCX communicator standing in for NCCL (it
// takes device memory), inter-node and global levels staged, scratch in "device" memory.
CommunicatorFactory DeviceHierarchicalFactory(std::vector<int> node_of_rank) {
  return [node_of_rank](BootstrapStore* store, int rank, int size,
                        uint64_t generation) -> StatusOr<std::unique_ptr<Communicator>> {
    ucx::UcxCommunicatorOptions options;
    options.default_timeout = std::chrono::milliseconds(20000);
    options.bootstrap_timeout = std::chrono::milliseconds(20000);
    ucx::HierarchicalDeviceLevels device;
    device.staging.chunk_bytes = 4096;
    device.copier = []() -> StatusOr<std::unique_ptr<DeviceCopier>> {
      return std::unique_ptr<DeviceCopier>(std::make_unique<ThreadCopier>(ThreadCopier::Options{}));
    };
    device.scratch = []() -> StatusOr<std::unique_ptr<DeviceScratch>> {
      return std::unique_ptr<DeviceScratch>(std::make_unique<HostMemoryScratch>());
    };
    device.intra = [&](BootstrapStore* s, int r, int n, uint64_t g,
                       const std::string& prefix) -> StatusOr<std::unique_ptr<Communicator>> {
      ucx::UcxCommunicatorOptions level = options;
      level.key_prefix = prefix;
      RETORT_ASSIGN_OR_RETURN(auto ucx, ucx::CreateUcxCommunicator(s, r, n, g, level));
      RETORT_ASSIGN_OR_RETURN(auto copier, device.copier());
      RETORT_ASSIGN_OR_RETURN(auto staged,
                              StagedCommunicator::Create(std::move(ucx), std::move(copier)));
      return std::unique_ptr<Communicator>(std::move(staged));
    };
    RETORT_ASSIGN_OR_RETURN(
        auto comm, ucx::CreateHierarchicalUcxCommunicator(
                       store, rank, size, generation, NodeLayout{node_of_rank}, options, &device));
    if (!comm->AcceptsMemory(MemoryKind::kCudaDevice))
      return InternalError("the device hierarchy does not take device memory");
    return std::unique_ptr<Communicator>(std::make_unique<AsDeviceMemory>(std::move(comm)));
  };
}

void RunDeviceChecks(Communicator& comm) {
  const int n = comm.size();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    CheckReduceScatterV(comm, DataType::kFloat32, op, std::vector<size_t>(n, 3001));
    CheckReduceScatterV(comm, DataType::kBFloat16, op, UnevenCounts(n, 1001), /*in_place=*/true);
    CheckAllReduce(comm, DataType::kFloat32, op, 7001);
  }
  CheckAllGatherV(comm, DataType::kFloat32, std::vector<size_t>(n, 2003));
  CheckAllGatherV(comm, DataType::kFloat16, UnevenCounts(n, 333), /*in_place=*/true);
  for (int root = 0; root < n; ++root) CheckBroadcast(comm, DataType::kFloat32, 1003, root);
  CheckAllToAllV(comm, 51);
  CheckSendRecvRing(comm, 777);
}

TEST(HierarchicalTest, OnDeviceMemoryNodeMajorPacksOnTheDevice) {
  RunThreadRanks(4, DeviceHierarchicalFactory({0, 0, 1, 1}), RunDeviceChecks);
}

TEST(HierarchicalTest, OnDeviceMemoryInterleaved) {
  RunThreadRanks(4, DeviceHierarchicalFactory({0, 1, 0, 1}), RunDeviceChecks);
}

TEST(HierarchicalTest, WithoutDeviceScratchDeviceMemoryIsRefused) {
  RunThreadRanks(2, HierarchicalFactory({0, 1}), [](Communicator& comm) {
    EXPECT_FALSE(comm.AcceptsMemory(MemoryKind::kCudaDevice));
    std::vector<float> data(4, 1.f);
    Status s = WaitFor(comm.AllReduce(
        {data.data(), data.size(), DataType::kFloat32, MemoryKind::kCudaDevice}, ReduceOp::kSum));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  });
}

TEST(HierarchicalTest, UnevenNodesAreRejected) {
  auto position = LocateRank(NodeLayout{{0, 0, 1}}, 2);
  ASSERT_FALSE(position.ok());
  EXPECT_NE(position.status().message().find("every node must hold the same number of ranks"),
            std::string::npos)
      << position.status();
}

}  // namespace
}  // namespace retort::collectives::testing
