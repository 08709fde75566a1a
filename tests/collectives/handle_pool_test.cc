// HandlePool (collectives/handle_pool.h) with plain handles standing for CUDA events: a handle
// given back is handed out again instead of a new one, a handle outliving the pool's owner
// still goes back, and a failure to make one is Acquire's error.
#include "collectives/handle_pool.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace retort::collectives {
namespace {

// A movable handle that counts how many live ones exist.
struct Counted {
  static inline int live = 0;
  int id = -1;
  Counted() = default;
  explicit Counted(int i) : id(i) { ++live; }
  Counted(Counted&& o) noexcept : id(std::exchange(o.id, -1)) {}
  Counted& operator=(Counted&& o) noexcept {
    std::swap(id, o.id);
    return *this;
  }
  ~Counted() {
    if (id >= 0) --live;
  }
};

TEST(HandlePoolTest, AGivenBackHandleIsReusedNotRemade) {
  int made = 0;
  auto pool = HandlePool<Counted>::Create([&]() -> StatusOr<Counted> { return Counted(made++); });
  for (int step = 0; step < 100; ++step) {  // two per "collective", as ready + done events
    auto ready = pool->Acquire();
    auto done = pool->Acquire();
    ASSERT_TRUE(ready.ok() && done.ok());
    EXPECT_NE((*ready)->id, (*done)->id);
  }
  EXPECT_EQ(made, 2);
  EXPECT_EQ(pool->created(), 2u);
  EXPECT_EQ(pool->free_count(), 2u);
}

TEST(HandlePoolTest, HandlesOutliveThePoolsOwnerAndAreDestroyedWithThePool) {
  Counted::live = 0;
  std::shared_ptr<Counted> kept;
  {
    int made = 0;
    auto pool = HandlePool<Counted>::Create([&]() -> StatusOr<Counted> { return Counted(made++); });
    kept = *pool->Acquire();
    auto other = *pool->Acquire();
    EXPECT_EQ(Counted::live, 2);
  }  // the owner is gone; `other` went back; `kept` keeps the pool
  EXPECT_EQ(Counted::live, 2);
  kept.reset();  // back to the pool, which then goes with every free handle
  EXPECT_EQ(Counted::live, 0);
}

TEST(HandlePoolTest, AFailureToMakeOneIsAcquiresError) {
  auto pool = HandlePool<Counted>::Create(
      []() -> StatusOr<Counted> { return ResourceExhaustedError("no events left"); });
  auto h = pool->Acquire();
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool->created(), 0u);
}

TEST(HandlePoolTest, ThreadsShareOnePool) {
  auto pool = HandlePool<Counted>::Create([]() -> StatusOr<Counted> { return Counted(1); });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(pool->Acquire().ok());
    });
  for (auto& t : threads) t.join();
  EXPECT_LE(pool->created(), 4u);  // at most one per thread at a time
}

}  // namespace
}  // namespace retort::collectives
