#include "coordinator/peer_reports.h"

#include <gtest/gtest.h>

namespace retort::coordinator {
namespace {

using std::chrono::milliseconds;
using Time = PeerReports::Time;

// A ring of four: a (rank 0), b, c, d (rank 3); the ids in `left` have left the job since.
PeerReports::Generation Ring(uint64_t number, int64_t step, const std::set<std::string>& left = {},
                             int64_t replicate_every = 0) {
  PeerReports::Generation g{.number = number,
                            .by_rank = {"a", "b", "c", "d"},
                            .step = step,
                            .replicate_every_steps = replicate_every};
  for (std::string& id : g.by_rank)
    if (left.count(id)) id.clear();
  return g;
}
const std::set<std::string> kCGone = {"c"};

TEST(PeerReportsTest, RateIsLimitedPerReporterAndWindow) {
  PeerReports reports({.max_per_window = 2, .window = milliseconds(1000)});
  const Time t0{};
  EXPECT_TRUE(reports.Count("a", t0).ok());
  EXPECT_TRUE(reports.Count("a", t0 + milliseconds(10)).ok());
  const Status third = reports.Count("a", t0 + milliseconds(999));
  EXPECT_EQ(third.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(third.message(),
            "a sent 2 peer-failure reports within 1000 ms (the limit); retry later");
  EXPECT_TRUE(reports.Count("b", t0 + milliseconds(999)).ok()) << "each reporter has its own";
  EXPECT_TRUE(reports.Count("a", t0 + milliseconds(1000)).ok()) << "a new window";
  reports.Forget("b");
  EXPECT_TRUE(reports.Count("b", t0 + milliseconds(1001)).ok());
  EXPECT_TRUE(reports.Count("b", t0 + milliseconds(1002)).ok());
}

TEST(PeerReportsTest, OneEvictionPerReporterPerGeneration) {
  PeerReports reports({});
  EXPECT_TRUE(reports.Decide("a", "c", Ring(5, 100)).ok());
  const Status again = reports.Decide("a", "b", Ring(5, 100, kCGone));
  EXPECT_EQ(again.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(again.message().find("already had a peer evicted in generation 5"), std::string::npos)
      << again.message();
  EXPECT_TRUE(reports.Decide("a", "d", Ring(6, 200, kCGone)).ok())
      << "the next generation gives the reporter its eviction back";
}

TEST(PeerReportsTest, TheEvictedMembersRingNeighboursNeedTwoReporters) {
  PeerReports reports({});
  // d (rank 3) reports c (rank 2): b and d now hold the only copies; a is not a neighbour.
  ASSERT_TRUE(reports.Decide("d", "c", Ring(5, 100)).ok());
  EXPECT_TRUE(reports.Protected("b"));
  EXPECT_TRUE(reports.Protected("d"));
  EXPECT_FALSE(reports.Protected("a"));
  const Status first = reports.Decide("a", "b", Ring(5, 100, kCGone));
  EXPECT_EQ(first.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(first.message().find("b holds the only in-memory copy"), std::string::npos)
      << first.message();
  EXPECT_EQ(reports.Decide("a", "b", Ring(5, 100, kCGone)).code(), StatusCode::kFailedPrecondition)
      << "the same reporter twice is still one member";
  EXPECT_TRUE(reports.Decide("d", "b", Ring(5, 100, kCGone)).code() ==
              StatusCode::kResourceExhausted)
      << "d already evicted in generation 5";
  // In the next generation, before the survivors replicated again, a second reporter is needed
  // again and the count starts over.
  EXPECT_EQ(reports.Decide("a", "b", Ring(6, 101, kCGone)).code(), StatusCode::kFailedPrecondition);
}

TEST(PeerReportsTest, TwoDifferentReportersEvictASoleHolder) {
  PeerReports reports({});
  ASSERT_TRUE(reports.Decide("d", "c", Ring(5, 100)).ok());
  EXPECT_EQ(reports.Decide("a", "b", Ring(6, 100, kCGone)).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(reports.Decide("d", "b", Ring(6, 100, kCGone)).ok());
}

TEST(PeerReportsTest, ProtectionEndsOnceALaterGenerationReplicatedAgain) {
  PeerReports reports({});
  // Replicas every 10 steps: protected until step 100 + 10 + 1 in a later generation.
  ASSERT_TRUE(reports.Decide("d", "c", Ring(5, 100, {}, 10)).ok());
  EXPECT_EQ(reports.Decide("a", "b", Ring(5, 200, kCGone)).code(), StatusCode::kFailedPrecondition)
      << "the same generation never replicated past the eviction";
  EXPECT_EQ(reports.Decide("a", "b", Ring(6, 110, kCGone)).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(reports.Decide("a", "b", Ring(6, 111, kCGone)).ok());
  EXPECT_FALSE(reports.Protected("d")) << "expired with b's";
}

TEST(PeerReportsTest, OnlyNeighboursStillMembersAreProtectedAndTheRingWraps) {
  PeerReports reports({});
  // b reports a (rank 0): its neighbours are d (rank 3, the ring wraps) and b; d already left.
  ASSERT_TRUE(reports.Decide("b", "a", Ring(5, 100, {"d"})).ok());
  EXPECT_TRUE(reports.Protected("b"));
  EXPECT_FALSE(reports.Protected("d"));
  EXPECT_FALSE(reports.Protected("c"));
  reports.Forget("b");
  EXPECT_FALSE(reports.Protected("b")) << "a member that left is protected no more";
}

TEST(PeerReportsTest, AWorldOfOneOrATargetOutsideTheRingProtectsNoOne) {
  PeerReports reports({});
  const PeerReports::Generation alone{.number = 2, .by_rank = {"a"}, .step = 7};
  EXPECT_TRUE(reports.Decide("x", "a", alone).ok());
  EXPECT_FALSE(reports.Protected("a"));
  EXPECT_FALSE(reports.Protected("x"));
  EXPECT_TRUE(reports.Decide("a", "z", Ring(3, 1)).ok());
  for (const char* id : {"a", "b", "c", "d"}) EXPECT_FALSE(reports.Protected(id)) << id;
}

}  // namespace
}  // namespace retort::coordinator
