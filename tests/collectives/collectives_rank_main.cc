// One rank of a multi-process collectives test, started by ucx_multiprocess_test with
// fork/exec and bootstrapped through a FileStore.
//   --mode=correctness  every collective checked against the reference (gtest assertions);
//                       exit 0 when all pass.
//   --mode=loop         all-reduce in a loop (bounded by --loop-seconds); writes
//                       <status_dir>/rank<r>.progress after the first success and, on a failed
//                       operation, <status_dir>/rank<r>.error with the status, then exits 3.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "collectives/ucx/ucx_hierarchical.h"
#include "common/args.h"
#include "tests/collectives/collective_checks.h"

namespace retort::collectives::testing {
namespace {

struct RankOptions {
  int rank = 0;
  int world = 1;
  int64_t generation = 1;
  std::string store_dir;
  std::string status_dir;
  std::string mode = "correctness";
  std::string backend = "ucx";
  int local_size = 1;
  int64_t timeout_ms = 20000;
  int64_t count = 1 << 20;
  int64_t loop_seconds = 30;
  bool big = false;
  int64_t linger_ms = 1000;
};

RankOptions g_options;  // set once by main() before the test runs

StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(FileStore* store) {
  ucx::UcxCommunicatorOptions options;
  options.default_timeout = std::chrono::milliseconds(g_options.timeout_ms);
  options.bootstrap_timeout = std::chrono::milliseconds(30000);
  if (g_options.backend == "hierarchical") {
    NodeLayout layout;
    for (int r = 0; r < g_options.world; ++r)
      layout.node_of_rank.push_back(r / g_options.local_size);
    return ucx::CreateHierarchicalUcxCommunicator(store, g_options.rank, g_options.world,
                                                  g_options.generation, layout, options);
  }
  return ucx::CreateUcxCommunicator(store, g_options.rank, g_options.world, g_options.generation,
                                    options);
}

void WriteStatusFile(const std::string& suffix, const std::string& text) {
  std::ofstream(g_options.status_dir + "/rank" + std::to_string(g_options.rank) + suffix) << text;
}

TEST(RankMain, Run) {
  FileStore store(g_options.store_dir);
  auto comm_or = MakeCommunicator(&store);
  ASSERT_TRUE(comm_or.ok()) << comm_or.status();
  Communicator& comm = **comm_or;
  if (g_options.mode == "loop") {
    TypedBuffer data(DataType::kFloat32, static_cast<size_t>(g_options.count));
    const Deadline stop = Deadline::After(std::chrono::seconds(g_options.loop_seconds));
    bool reported = false;
    while (!stop.Expired()) {
      Status s = comm.AllReduce(data.mutable_buffer(), ReduceOp::kSum)->Wait();
      if (!s.ok()) {
        WriteStatusFile(".error", s.ToString());
        std::string failed;
        for (int r : comm.FailedPeers()) failed += std::to_string(r) + "\n";
        WriteStatusFile(".failed_peers", failed);
        // A worker drops the broken communicator (its peers hear that it left on purpose)
        // and stays up, waiting for the next generation; exiting at once would make this
        // rank look dead to peers still mid-operation.
        comm_or->reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(g_options.linger_ms));
        std::_Exit(3);
      }
      if (!reported) WriteStatusFile(".progress", "ok");
      reported = true;
    }
    return;
  }
  const int n = comm.size();
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (size_t c : {size_t{0}, size_t{1}, size_t{17}, size_t{65537}}) {
        CheckReduceScatterV(comm, dtype, op, std::vector<size_t>(n, c));
        CheckAllReduce(comm, dtype, op, c * 2 + 1);
      }
      CheckReduceScatterV(comm, dtype, op, UnevenCounts(n, 7919), /*in_place=*/true);
    }
    CheckAllGatherV(comm, dtype, std::vector<size_t>(n, 10007));
    CheckAllGatherV(comm, dtype, UnevenCounts(n, 3001));
  }
  CheckBroadcast(comm, DataType::kFloat16, 100003, n - 1);
  CheckAllToAllV(comm, 5003);
  CheckSendRecvRing(comm, 300007);
  if (g_options.big) {  // 64 MiB of fp32
    const size_t big = size_t{16} << 20;
    CheckAllReduce(comm, DataType::kFloat32, ReduceOp::kSum, big);
    CheckReduceScatterV(comm, DataType::kFloat32, ReduceOp::kSum,
                        std::vector<size_t>(n, big / static_cast<size_t>(n)));
    CheckAllGatherV(comm, DataType::kFloat32, std::vector<size_t>(n, big / static_cast<size_t>(n)));
  }
  ASSERT_TRUE(WaitFor(comm.Barrier()).ok());
}

}  // namespace
}  // namespace retort::collectives::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  using retort::collectives::testing::g_options;
  retort::ArgParser parser("collectives_rank_main --rank=R --world=N --store-dir=DIR [...]",
                           "One rank of a multi-process collectives test.");
  parser.AddInt("rank", &g_options.rank, "this process's rank");
  parser.AddInt("world", &g_options.world, "number of ranks");
  parser.AddInt("generation", &g_options.generation, "generation of the communicator");
  parser.AddString("store-dir", &g_options.store_dir, "FileStore directory shared by the ranks");
  parser.AddString("status-dir", &g_options.status_dir, "where --mode=loop reports");
  parser.AddString("mode", &g_options.mode, "correctness | loop");
  parser.AddString("backend", &g_options.backend, "ucx | hierarchical");
  parser.AddInt("local-size", &g_options.local_size, "ranks per node (hierarchical)");
  parser.AddInt("timeout-ms", &g_options.timeout_ms, "per-operation timeout");
  parser.AddInt("count", &g_options.count, "elements per all-reduce (loop)");
  parser.AddInt("loop-seconds", &g_options.loop_seconds, "bound on the loop mode");
  parser.AddBool("big", &g_options.big, "also run the 64 MiB cases");
  parser.AddInt("linger-ms", &g_options.linger_ms,
                "--mode=loop: stay up this long after a failed collective before exiting");
  if (auto code = parser.ParseOrExitCode(argc, argv, "collectives_rank_main")) return *code;
  return RUN_ALL_TESTS();
}
