// The test-only pause seam (worker/pause_points.h): flag parsing with clear errors, one pause per
// point, early release, and unarmed points that never wait.
#include "worker/pause_points.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/deadline.h"

namespace retort::worker {
namespace {

using std::chrono::milliseconds;

TEST(PausePointsTest, ParsesPointsAndNamesTheBadSpec) {
  auto ok = PausePoints::Parse({"checkpoint-write:500", "generation-switch:30000"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->at(kPauseCheckpointWrite), 500);
  EXPECT_EQ(ok->at(kPauseGenerationSwitch), 30000);
  for (const char* bad : {"checkpoint-write", "mid-step:100", "checkpoint-write:0",
                          "checkpoint-write:abc", "generation-switch:600001"}) {
    auto parsed = PausePoints::Parse({bad});
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(bad), std::string::npos) << parsed.status();
  }
}

TEST(PausePointsTest, PausesOncePerPointAndEndsWhenReleased) {
  PausePoints points({{kPauseGenerationSwitch, 60000}, {kPauseCheckpointWrite, 30}});
  EXPECT_FALSE(points.Reach("not-armed", "x")) << "an unarmed point never pauses";
  // Released early: returns long before its 60 s.
  std::atomic<bool> newer{false};
  std::thread publisher([&] {
    std::this_thread::sleep_for(milliseconds(50));
    newer = true;
  });
  const auto start = SteadyClock::now();
  EXPECT_TRUE(
      points.Reach(kPauseGenerationSwitch, "generation 3, rank 1", [&] { return newer.load(); }));
  publisher.join();
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(30));
  EXPECT_FALSE(points.Reach(kPauseGenerationSwitch, "again")) << "pauses once";
  // Not released: waits its time.
  const auto t0 = SteadyClock::now();
  EXPECT_TRUE(points.Reach(kPauseCheckpointWrite, "checkpoint 1"));
  EXPECT_GE(SteadyClock::now() - t0, milliseconds(30));
}

}  // namespace
}  // namespace retort::worker
