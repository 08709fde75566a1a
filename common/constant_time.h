// Comparing secrets without leaking, through timing, how much of a guess was right. Std only.
#pragma once

#include <cstddef>
#include <string_view>

namespace retort {

// True when `a` and `b` are equal. Takes time that depends on the lengths only, never on where
// the first difference is.
inline bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace retort
