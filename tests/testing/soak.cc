#include "testing/soak.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace retort::testing {

int SoakRounds(int ci_default) {
  const char* value = std::getenv("RETORT_SOAK_ROUNDS");
  if (value == nullptr || *value == '\0') return ci_default;
  char* end = nullptr;
  const long rounds = std::strtol(value, &end, 10);
  if (*end != '\0' || rounds < 1 || rounds > 100000) {
    std::fprintf(stderr, "RETORT_SOAK_ROUNDS='%s' is not a positive integer\n", value);
    std::abort();
  }
  return static_cast<int>(rounds);
}

}  // namespace retort::testing
