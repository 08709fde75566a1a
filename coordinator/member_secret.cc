#include "coordinator/member_secret.h"

#include <random>

namespace retort::coordinator {

std::string NewMemberSecret() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device rd;  // the OS's entropy source on Linux (libstdc++: getrandom or urandom)
  std::string out;
  out.reserve(64);
  for (int i = 0; i < 8; ++i) {
    uint32_t word = rd();
    for (int j = 0; j < 8; ++j) {
      out.push_back(kHex[word & 0xf]);
      word >>= 4;
    }
  }
  return out;
}

}  // namespace retort::coordinator
