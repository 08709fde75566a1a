// The hierarchical composition on CPU: 2 "nodes" x 2 local ranks (and other layouts), every
// level over UCX on loopback, checked against the same references as the flat backends.
#include <gtest/gtest.h>

#include "collectives/ucx/ucx_hierarchical.h"
#include "tests/collectives/collective_checks.h"

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

TEST(HierarchicalTest, TwoNodesOfTwoNodeMajor) {
  RunThreadRanks(4, HierarchicalFactory({0, 0, 1, 1}), RunAllChecks);
}

TEST(HierarchicalTest, TwoNodesOfTwoInterleavedNeedsPacking) {
  RunThreadRanks(4, HierarchicalFactory({0, 1, 0, 1}), RunAllChecks);
}

TEST(HierarchicalTest, DegenerateLayouts) {
  RunThreadRanks(3, HierarchicalFactory({0, 1, 2}), RunAllChecks);  // one rank per node
  RunThreadRanks(2, HierarchicalFactory({0, 0}), RunAllChecks);     // one node
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
