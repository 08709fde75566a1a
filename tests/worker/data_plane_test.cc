// The worker's choice of data plane per generation (worker/data_plane.h), on this machine's CPU:
// one node -> flat UCX; equal groups on several nodes -> hierarchical UCX; a CUDA device with
// one rank -> UCX, the trainer staging through host memory; a CUDA device with several ranks
// where no GPU is visible (or the build has no CUDA data plane) -> FAILED_PRECONDITION saying
// why, never a crash.
#include "worker/data_plane.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "collectives/cuda_data_plane.h"

namespace retort::worker {
namespace {

// A generation of `per_node` ranks on each of `nodes` nodes, ranks node-major.
v1::Generation Layout(int nodes, int per_node) {
  v1::Generation g;
  g.set_number(3);
  int rank = 0;
  for (int n = 0; n < nodes; ++n) {
    v1::NodeGroup* group = g.add_nodes();
    group->set_node("node" + std::to_string(n));
    for (int l = 0; l < per_node; ++l) {
      g.add_members()->set_member_id("m" + std::to_string(rank));
      group->add_ranks(rank++);
    }
  }
  return g;
}

// Creates every rank's data plane on a thread of its own; their results in rank order.
std::vector<StatusOr<DataPlane>> CreateAll(const v1::Generation& g, const std::string& device,
                                           bool emulate_device = false) {
  collectives::InMemoryStore store;
  std::vector<StatusOr<DataPlane>> planes;
  for (int r = 0; r < g.members_size(); ++r) planes.emplace_back(InternalError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < g.members_size(); ++r) {
    threads.emplace_back([&, r] {
      DataPlaneOptions o;
      o.device = device;
      o.emulate_device = emulate_device;
      o.ucx.bootstrap_timeout = std::chrono::milliseconds(20000);
      planes[r] = CreateDataPlane(&store, g, r, o);
    });
  }
  for (auto& t : threads) t.join();
  return planes;
}

TEST(DataPlaneTest, CpuRanksOnOneNodeUseFlatUcx) {
  for (auto& plane : CreateAll(Layout(1, 2), "cpu")) {
    ASSERT_TRUE(plane.ok()) << plane.status();
    EXPECT_EQ(plane->comm->name(), "ucx");
    EXPECT_EQ(plane->trainer_memory, collectives::MemoryKind::kHost);
  }
}

TEST(DataPlaneTest, CpuRanksInEqualGroupsOnSeveralNodesUseHierarchicalUcx) {
  EXPECT_TRUE(HierarchicalLayout(Layout(2, 2)).has_value());
  EXPECT_FALSE(HierarchicalLayout(Layout(2, 1)).has_value());
  EXPECT_FALSE(HierarchicalLayout(Layout(1, 4)).has_value());
  for (auto& plane : CreateAll(Layout(2, 2), "cpu")) {
    ASSERT_TRUE(plane.ok()) << plane.status();
    EXPECT_NE(plane->comm->name().find("hierarchical"), std::string::npos) << plane->comm->name();
  }
}

TEST(DataPlaneTest, OneCudaRankNeedsNoDeviceDataPlane) {
  auto planes = CreateAll(Layout(1, 1), "cuda:0");
  ASSERT_TRUE(planes[0].ok()) << planes[0].status();
  EXPECT_EQ(planes[0]->comm->name(), "ucx");
  EXPECT_EQ(planes[0]->trainer_memory, collectives::MemoryKind::kHost);
}

TEST(DataPlaneTest, SeveralCudaRanksWithoutAGpuAreAPreciseError) {
  if (collectives::BuildHasCudaDataPlane() && collectives::CreateCudaCopier(0).ok())
    GTEST_SKIP() << "a CUDA device is visible here";
  for (const auto& g : {Layout(1, 2), Layout(2, 1), Layout(2, 2)}) {
    for (auto& plane : CreateAll(g, "cuda:0")) {
      ASSERT_FALSE(plane.ok());
      EXPECT_EQ(plane.status().code(), StatusCode::kFailedPrecondition) << plane.status();
      const std::string& m = plane.status().message();
      EXPECT_TRUE(m.find("no CUDA device visible") != std::string::npos ||
                  m.find("this build lacks") != std::string::npos)
          << m;
    }
  }
}

// The GPU compositions with host memory standing in for the device: which one each layout
// gets, and that a gradient-like reduce-scatter (device memory) and a host all-reduce go
// through each.
TEST(DataPlaneTest, EmulatedDeviceDataPlanesPerLayoutReduceCorrectly) {
  struct Case {
    v1::Generation g;
    const char* name_part;
  };
  for (const Case& c :
       {Case{Layout(1, 2), "routed(staged(ucx)"},
        Case{Layout(2, 2), "routed(hierarchical(staged(ucx)"}, Case{Layout(3, 1), "staged(ucx)"}}) {
    auto planes = CreateAll(c.g, "cpu", /*emulate_device=*/true);
    const int n = c.g.members_size();
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(planes[r].ok()) << planes[r].status();
      EXPECT_EQ(planes[r]->trainer_memory, collectives::MemoryKind::kCudaDevice);
      EXPECT_NE(planes[r]->comm->name().find(c.name_part), std::string::npos)
          << planes[r]->comm->name();
    }
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        collectives::Communicator& comm = *planes[r]->comm;
        std::vector<float> grads(4 * n, static_cast<float>(r + 1)), mine(4, 0.f);
        Status s = comm.ReduceScatter({grads.data(), grads.size(), collectives::DataType::kFloat32,
                                       collectives::MemoryKind::kCudaDevice},
                                      {mine.data(), mine.size(), collectives::DataType::kFloat32,
                                       collectives::MemoryKind::kCudaDevice},
                                      collectives::ReduceOp::kSum)
                       ->Wait(Deadline::AfterMs(20000));
        ASSERT_TRUE(s.ok()) << s;
        for (float v : mine) EXPECT_EQ(v, n * (n + 1) / 2.f);
        float count = 1.f;
        s = comm.AllReduce({&count, 1, collectives::DataType::kFloat32},
                           collectives::ReduceOp::kSum)
                ->Wait(Deadline::AfterMs(20000));
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(count, static_cast<float>(n));
      });
    }
    for (auto& t : threads) t.join();
  }
}

}  // namespace
}  // namespace retort::worker
