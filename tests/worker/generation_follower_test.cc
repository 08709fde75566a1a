#include "worker/generation_follower.h"

#include <gtest/gtest.h>

namespace retort::worker {
namespace {

TEST(GenerationFollowerTest, HandsOverEachNewerGenerationOnce) {
  GenerationFollower f;
  EXPECT_EQ(f.ResumeAfter("w-1"), 0u);
  EXPECT_TRUE(f.Accept(1, "w-1"));
  EXPECT_FALSE(f.Accept(1, "w-1")) << "a reconnect resends the current generation";
  EXPECT_TRUE(f.Accept(3, "w-1"));
  EXPECT_FALSE(f.Accept(2, "w-1")) << "never back";
  EXPECT_EQ(f.newest(), 3u);
  EXPECT_EQ(f.ResumeAfter("w-1"), 3u);
}

// The race a re-join opens: generation 4, formed by this worker's own re-join as w-3, arrives
// while the worker is still w-2 (no rank there). Judged again under w-3 it must be handed over.
TEST(GenerationFollowerTest, AGenerationJudgedUnderTheOldIdIsHandedOverAgainUnderTheNewOne) {
  GenerationFollower f;
  ASSERT_TRUE(f.Accept(3, "w-2"));
  ASSERT_TRUE(f.Accept(4, "w-2"));
  EXPECT_EQ(f.ResumeAfter("w-3"), 3u) << "the reopened stream must send generation 4 again";
  EXPECT_TRUE(f.Accept(4, "w-3"));
  EXPECT_FALSE(f.Accept(4, "w-3"));
  EXPECT_EQ(f.ResumeAfter("w-3"), 4u);
}

TEST(GenerationFollowerTest, AGenerationAlreadyJudgedUnderTheNewIdIsNotAskedForAgain) {
  GenerationFollower f;
  ASSERT_TRUE(f.Accept(3, "w-2"));
  ASSERT_TRUE(f.Accept(4, "w-3"));  // arrived after the re-join returned
  EXPECT_EQ(f.ResumeAfter("w-3"), 4u);
  EXPECT_FALSE(f.Accept(4, "w-3"));
  EXPECT_FALSE(f.Accept(3, "w-3")) << "an older one stays behind whatever the id";
}

}  // namespace
}  // namespace retort::worker
