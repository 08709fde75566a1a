#include "coordinator/rejoin_gate.h"

#include <gtest/gtest.h>

namespace retort::coordinator {
namespace {

using std::chrono::milliseconds;
using Time = std::chrono::steady_clock::time_point;

TEST(RejoinGateTest, OpensOnceEveryExpectedPlaceIsBackAndSaysSo) {
  RejoinGate gate;
  const Time t0{};
  gate.Expect({{"n1", 0}, {"n2", 0}}, t0 + milliseconds(1000));
  std::string why;
  EXPECT_TRUE(gate.StillWaiting(t0, {{"n1", 0}}, 1000, &why));
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(gate.Missing({{"n1", 0}, {"n9", 3}}), std::vector<std::string>{"n2/0"});
  EXPECT_FALSE(gate.StillWaiting(t0, {{"n1", 0}, {"n2", 0}, {"n3", 1}}, 1000, &why));
  EXPECT_EQ(why, "every member of the previous generation re-joined");
  EXPECT_FALSE(gate.waiting());
  why.clear();
  EXPECT_FALSE(gate.StillWaiting(t0, {}, 1000, &why)) << "an open gate stays open";
  EXPECT_TRUE(why.empty());
}

TEST(RejoinGateTest, GraceEndsNamingWhoIsMissing) {
  RejoinGate gate;
  const Time t0{};
  gate.Expect({{"n1", 0}, {"n1", 1}, {"n2", 0}}, t0 + milliseconds(500));
  std::string why;
  EXPECT_TRUE(gate.StillWaiting(t0 + milliseconds(499), {{"n1", 1}}, 500, &why));
  EXPECT_FALSE(gate.StillWaiting(t0 + milliseconds(500), {{"n1", 1}}, 500, &why));
  EXPECT_EQ(why, "500 ms re-join grace ended without n1/0 n2/0");
  EXPECT_TRUE(gate.Missing({}).empty()) << "an open gate expects no one";
}

TEST(RejoinGateTest, NothingExpectedOrOpenedByHandNeverWaits) {
  RejoinGate gate;
  std::string why;
  gate.Expect({}, Time{} + milliseconds(1000));
  EXPECT_FALSE(gate.waiting());
  EXPECT_FALSE(gate.StillWaiting(Time{}, {}, 1000, &why));
  gate.Expect({{"n1", 0}}, Time{} + milliseconds(1000));
  EXPECT_TRUE(gate.waiting());
  gate.Open();
  EXPECT_FALSE(gate.StillWaiting(Time{}, {}, 1000, &why));
  EXPECT_TRUE(why.empty());
}

}  // namespace
}  // namespace retort::coordinator
