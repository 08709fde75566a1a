#include "common/checksum.h"

#include <gtest/gtest.h>

#include <string>

namespace retort {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 B.4 test vectors.
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros), 0x8a9136aau);
  std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones), 0x62a8ab43u);
  EXPECT_EQ(Crc32c(std::string("123456789")), 0xe3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32cTest, ExtendEqualsWholeForEverySplit) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 31 + 7));
  uint32_t whole = Crc32c(data);
  for (size_t split : {0, 1, 7, 8, 9, 500, 999, 1000}) {
    uint32_t a = Crc32cExtend(0, data.data(), split);
    EXPECT_EQ(Crc32cExtend(a, data.data() + split, data.size() - split), whole) << split;
  }
  EXPECT_EQ(Crc32cHex(0xe3069283u), "e3069283");
}

}  // namespace
}  // namespace retort
