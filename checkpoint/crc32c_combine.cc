// Polynomial arithmetic modulo the (reflected) Castagnoli polynomial, as in zlib's
// crc32_combine_gen / crc32_combine_op: combine(a, b, n) = (a * x^(8n)) mod P  xor  b.
#include "checkpoint/crc32c_combine.h"

#include <array>

namespace retort::checkpoint {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli
constexpr uint32_t kXPower0 = 1u << 31;  // x^0 in reflected bit order

// a * b mod P, both reflected.
uint32_t MultModP(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31;
  uint32_t p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return p;
}

// table[k] = x^(2^k) mod P.
// n < 2^64 and k starts at 3, so k stays below 67: no wrap-around needed.
std::array<uint32_t, 72> MakePowerTable() {
  std::array<uint32_t, 72> t{};
  uint32_t p = 1u << 30;  // x^1
  t[0] = p;
  for (size_t k = 1; k < t.size(); ++k) t[k] = p = MultModP(p, p);
  return t;
}

// x^(n * 2^k) mod P.
uint32_t XPowerModP(uint64_t n, unsigned k) {
  static const std::array<uint32_t, 72> table = MakePowerTable();
  uint32_t p = kXPower0;
  while (n) {
    if (n & 1) p = MultModP(table[k], p);
    n >>= 1;
    ++k;
  }
  return p;
}

}  // namespace

uint32_t Crc32cShiftOperator(uint64_t len) { return XPowerModP(len, 3); }

uint32_t Crc32cCombineWithOperator(uint32_t crc_a, uint32_t crc_b, uint32_t shift_operator) {
  return MultModP(shift_operator, crc_a) ^ crc_b;
}

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  return Crc32cCombineWithOperator(crc_a, crc_b, Crc32cShiftOperator(len_b));
}

}  // namespace retort::checkpoint
