#include "collectives/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace retort::collectives {
namespace {

TEST(ReduceTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(NAN))));
}

TEST(ReduceTest, HalfConversionsCoverNormalSubnormalAndOverflow) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(70000.0f), 0x7c00);               // overflow to infinity
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);  // underflows to zero
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half round-trips
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(ReduceTest, SixteenBitReductionAccumulatesInFp32) {
  // 256 + 1 is not representable in bf16 (8 bits of mantissa): the sum rounds once, to even.
  std::vector<uint16_t> a = {FloatToBFloat16(256.0f), FloatToBFloat16(3.0f)};
  std::vector<uint16_t> b = {FloatToBFloat16(1.0f), FloatToBFloat16(4.0f)};
  ReduceTo(a.data(), a.data(), b.data(), 2, DataType::kBFloat16, 0.5f);
  EXPECT_EQ(BFloat16ToFloat(a[0]), 128.0f);  // (256 + 1) * 0.5 = 128.5 -> 128 (even)
  EXPECT_EQ(BFloat16ToFloat(a[1]), 3.5f);
  std::vector<uint16_t> h = {FloatToHalf(1.5f)};
  std::vector<uint16_t> g = {FloatToHalf(2.25f)};
  ReduceTo(h.data(), g.data(), h.data(), 1, DataType::kFloat16);
  EXPECT_EQ(HalfToFloat(h[0]), 3.75f);
}

TEST(ReduceTest, Fp32SumAndScale) {
  std::vector<float> a = {1, 2, 3};
  std::vector<float> b = {10, 20, 30};
  std::vector<float> out(3);
  ReduceTo(out.data(), a.data(), b.data(), 3, DataType::kFloat32, 1.0f / 3);
  EXPECT_FLOAT_EQ(out[0], 11.0f / 3);
  EXPECT_FLOAT_EQ(out[2], 11.0f);
  ScaleInto(a.data(), a.data(), 3, DataType::kFloat32, 2.0f);
  EXPECT_EQ(a[2], 6.0f);
}

}  // namespace
}  // namespace retort::collectives
