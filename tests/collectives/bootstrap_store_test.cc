#include "collectives/bootstrap_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

namespace retort::collectives {
namespace {

void ExerciseStore(BootstrapStore& store) {
  ASSERT_TRUE(store.Set("a/b", "value\n\0with nul", Deadline::AfterMs(1000)).ok());
  auto got = store.Get("a/b", Deadline::AfterMs(1000));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string("value\n\0with nul"));
  // Get blocks until another thread sets the key.
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(store.Set("late", "here", Deadline::AfterMs(1000)).ok());
  });
  auto late = store.Get("late", Deadline::AfterMs(5000));
  setter.join();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "here");
  // A missing key is DEADLINE_EXCEEDED, on time.
  const auto start = SteadyClock::now();
  auto missing = store.Get("missing", Deadline::AfterMs(100));
  EXPECT_EQ(missing.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(2));
}

TEST(StoreTest, InMemory) {
  InMemoryStore store;
  ExerciseStore(store);
}

TEST(StoreTest, FileDirectory) {
  char dir[] = "/tmp/retort_store_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  FileStore store(std::string(dir) + "/kv");
  ExerciseStore(store);
  // A second store over the same directory (another process) sees the values.
  FileStore other(std::string(dir) + "/kv");
  auto got = other.Get("a/b", Deadline::AfterMs(100));
  ASSERT_TRUE(got.ok());
}

TEST(StoreTest, PrefixStoreNamespacesKeys) {
  InMemoryStore base;
  PrefixStore a(&base, "g1");
  PrefixStore b(&base, "g2");
  ASSERT_TRUE(a.Set("k", "one", Deadline::AfterMs(100)).ok());
  EXPECT_EQ(b.Get("k", Deadline::AfterMs(50)).status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(*base.Get("g1/k", Deadline::AfterMs(50)), "one");
}

}  // namespace
}  // namespace retort::collectives
