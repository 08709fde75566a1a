#include "coordinator/kv_exchange.h"

#include <gtest/gtest.h>

namespace retort::coordinator {
namespace {

KvLimits SmallLimits() {
  KvLimits l;
  l.max_value_bytes = 100;
  l.max_keys = 3;
  l.max_bytes_per_member = 150;
  l.max_bytes_total = 250;
  return l;
}

TEST(KvExchangeTest, ReplacingAnotherMembersKeyMovesItsBytesToTheNewOwner) {
  KvExchange kv(SmallLimits());
  ASSERT_TRUE(kv.Put("a", "k", std::string(99, 'x'), 1).ok());
  EXPECT_EQ(kv.bytes_of("a"), 100u);
  ASSERT_TRUE(kv.Put("b", "k", std::string(9, 'y'), 1).ok());
  EXPECT_EQ(kv.bytes_of("a"), 0u);
  EXPECT_EQ(kv.bytes_of("b"), 10u);
  EXPECT_EQ(kv.bytes(), 10u);
  EXPECT_EQ(kv.Get("k"), std::string(9, 'y'));
  EXPECT_EQ(kv.Get("missing"), std::nullopt);
}

TEST(KvExchangeTest, EveryLimitRefusesWithoutChangingTheStore) {
  KvExchange kv(SmallLimits());
  EXPECT_EQ(kv.Put("a", "", "v", 7).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Put("a", std::string(KvExchange::kMaxKeyBytes + 1, 'k'), "v", 7).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Put("a", "k", std::string(101, 'v'), 7).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(kv.Put("a", "k1", std::string(99, 'v'), 7).ok());  // a: 101 bytes
  Status member = kv.Put("a", "k2", std::string(60, 'v'), 7);
  EXPECT_EQ(member.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(member.message().find("a would hold 163 bytes in generation 7"), std::string::npos)
      << member;
  ASSERT_TRUE(kv.Put("b", "k2", std::string(98, 'v'), 7).ok());  // total 201
  Status total = kv.Put("c", "k3", std::string(60, 'v'), 7);
  EXPECT_EQ(total.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(total.message().find("the store would hold 263 bytes"), std::string::npos) << total;
  ASSERT_TRUE(kv.Put("c", "k3", "v", 7).ok());
  Status keys = kv.Put("c", "k4", "v", 7);
  EXPECT_EQ(keys.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(keys.message().find("too many keys in generation 7"), std::string::npos) << keys;
  EXPECT_EQ(kv.keys(), 3u);
  EXPECT_EQ(kv.bytes(), 101u + 100u + 3u);
  EXPECT_EQ(kv.Get("k4"), std::nullopt);
}

TEST(KvExchangeTest, ClearForgetsEntriesAndEveryMembersBytes) {
  KvExchange kv(SmallLimits());
  ASSERT_TRUE(kv.Put("a", "k1", std::string(100, 'v'), 1).ok());
  kv.Clear();
  EXPECT_EQ(kv.keys(), 0u);
  EXPECT_EQ(kv.bytes(), 0u);
  EXPECT_EQ(kv.bytes_of("a"), 0u);
  EXPECT_EQ(kv.Get("k1"), std::nullopt);
  EXPECT_TRUE(kv.Put("a", "k2", std::string(100, 'v'), 2).ok()) << "the quota starts again";
}

}  // namespace
}  // namespace retort::coordinator
