#include "collectives/reduce.h"

#include <bit>
#include <cstdint>
#include <cstring>

namespace retort::collectives {

float BFloat16ToFloat(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);     // round to nearest even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero in half precision
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // value / 2^-24 == mant * 2^(exp - 126)
    uint32_t shifted = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (shifted & 1u))) ++shifted;
    return static_cast<uint16_t>(sign | shifted);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even
  return static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
}

namespace {

void ReduceFloat(float* dst, const float* a, const float* b, size_t n, float scale) {
  if (scale == 1.0f) {
    for (size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = (a[i] + b[i]) * scale;
  }
}

void ReduceBFloat16(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = FloatToBFloat16((BFloat16ToFloat(a[i]) + BFloat16ToFloat(b[i])) * scale);
  }
}

void ReduceHalf(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = FloatToHalf((HalfToFloat(a[i]) + HalfToFloat(b[i])) * scale);
  }
}

}  // namespace

void ReduceTo(void* dst, const void* a, const void* b, size_t count, DataType dtype, float scale) {
  switch (dtype) {
    case DataType::kFloat32:
      ReduceFloat(static_cast<float*>(dst), static_cast<const float*>(a),
                  static_cast<const float*>(b), count, scale);
      return;
    case DataType::kBFloat16:
      ReduceBFloat16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                     static_cast<const uint16_t*>(b), count, scale);
      return;
    case DataType::kFloat16:
      ReduceHalf(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                 static_cast<const uint16_t*>(b), count, scale);
      return;
  }
}

void ScaleInto(void* dst, const void* src, size_t count, DataType dtype, float scale) {
  switch (dtype) {
    case DataType::kFloat32: {
      auto* d = static_cast<float*>(dst);
      auto* s = static_cast<const float*>(src);
      for (size_t i = 0; i < count; ++i) d[i] = s[i] * scale;
      return;
    }
    case DataType::kBFloat16: {
      auto* d = static_cast<uint16_t*>(dst);
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) d[i] = FloatToBFloat16(BFloat16ToFloat(s[i]) * scale);
      return;
    }
    case DataType::kFloat16: {
      auto* d = static_cast<uint16_t*>(dst);
      auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) d[i] = FloatToHalf(HalfToFloat(s[i]) * scale);
      return;
    }
  }
}

}  // namespace retort::collectives
