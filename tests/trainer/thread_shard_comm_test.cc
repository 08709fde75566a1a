#include "trainer/testing/thread_shard_comm.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>
#include <vector>

namespace retort::trainer::testing {
namespace {

void RunRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

TEST(ThreadShardCommTest, ReduceScatterVSumsEachSegmentIntoItsRank) {
  const std::vector<int64_t> counts = {3, 0, 2};
  auto group = std::make_shared<ThreadShardGroup>(3);
  std::vector<std::vector<float>> outs(3);
  RunRanks(3, [&](int rank) {
    ThreadShardComm comm(group, rank);
    std::vector<float> in(5);
    for (int i = 0; i < 5; ++i) in[i] = static_cast<float>((rank + 1) * (i + 1));
    outs[rank].assign(counts[rank], -1.0f);
    auto h = comm.ReduceScatterV(in.data(), outs[rank].data(), counts);
    ASSERT_TRUE(h->Wait(Deadline::AfterMs(5000)).ok());
  });
  // sum over ranks of (r+1)*(i+1) = 6*(i+1)
  EXPECT_EQ(outs[0], (std::vector<float>{6, 12, 18}));
  EXPECT_TRUE(outs[1].empty());
  EXPECT_EQ(outs[2], (std::vector<float>{24, 30}));
}

TEST(ThreadShardCommTest, AllGatherVInPlaceAndAllReduce) {
  const std::vector<int64_t> counts = {2, 1, 3};
  auto group = std::make_shared<ThreadShardGroup>(3);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(6, 0.0f));
  std::vector<float> reduced(3);
  RunRanks(3, [&](int rank) {
    ThreadShardComm comm(group, rank);
    const int64_t displ = std::accumulate(counts.begin(), counts.begin() + rank, int64_t{0});
    for (int64_t i = 0; i < counts[rank]; ++i) bufs[rank][displ + i] = 10.0f * rank + i;
    auto h = comm.AllGatherV(bufs[rank].data() + displ, bufs[rank].data(), counts);
    ASSERT_TRUE(h->Wait(Deadline::AfterMs(5000)).ok());
    float x = static_cast<float>(rank + 1);
    ASSERT_TRUE(comm.AllReduce(&x, 1)->Wait(Deadline::AfterMs(5000)).ok());
    reduced[rank] = x;
  });
  const std::vector<float> expected = {0, 1, 10, 20, 21, 22};
  for (int r = 0; r < 3; ++r) EXPECT_EQ(bufs[r], expected) << "rank " << r;
  EXPECT_EQ(reduced, (std::vector<float>{6, 6, 6}));
}

TEST(ThreadShardCommTest, MissingRankIsADeadlineErrorNotAHang) {
  auto group = std::make_shared<ThreadShardGroup>(2);
  ThreadShardComm comm(group, 0);
  float x = 1;
  Status s = comm.AllReduce(&x, 1)->Wait(Deadline::AfterMs(100));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("1 of 2 ranks"), std::string::npos) << s;
}

TEST(ThreadShardCommTest, MismatchedCountsFailOnEveryRank) {
  auto group = std::make_shared<ThreadShardGroup>(2);
  std::vector<Status> results(2);
  RunRanks(2, [&](int rank) {
    ThreadShardComm comm(group, rank);
    std::vector<float> in(4, 1.0f), out(2);
    std::vector<int64_t> counts =
        rank == 0 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{1, 3};
    results[rank] =
        comm.ReduceScatterV(in.data(), out.data(), counts)->Wait(Deadline::AfterMs(5000));
  });
  EXPECT_EQ(results[0].code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(results[1].code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace retort::trainer::testing
