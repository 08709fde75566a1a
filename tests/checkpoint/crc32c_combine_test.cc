#include "checkpoint/crc32c_combine.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/checksum.h"

namespace retort::checkpoint {
namespace {

TEST(Crc32cCombineTest, EqualsTheCrcOfTheConcatenation) {
  std::mt19937 rng(9);
  std::string data(5000, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  const uint32_t whole = Crc32c(data);
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{1024}, size_t{4999}, size_t{5000}}) {
    uint32_t a = Crc32c(data.data(), split);
    uint32_t b = Crc32c(data.data() + split, data.size() - split);
    EXPECT_EQ(Crc32cCombine(a, b, data.size() - split), whole) << "split at " << split;
    EXPECT_EQ(Crc32cCombineWithOperator(a, b, Crc32cShiftOperator(data.size() - split)), whole);
  }
  // Many pieces folded left to right, as the shard writer does.
  uint32_t crc = 0;
  for (size_t at = 0; at < data.size(); at += 333) {
    size_t n = std::min<size_t>(333, data.size() - at);
    crc = Crc32cCombine(crc, Crc32c(data.data() + at, n), n);
  }
  EXPECT_EQ(crc, whole);
  EXPECT_NE(Crc32cCombine(Crc32c(data.data(), 10), Crc32c(data.data() + 10, 10), 11),
            Crc32c(data.data(), 20))
      << "the length matters";
}

}  // namespace
}  // namespace retort::checkpoint
