// One number formatted by a printf format, as a std::string: the helper behind the report's,
// the step profiler's and the charts' number formats. Header-only; thread-safe.
#pragma once

#include <cstdio>
#include <string>

namespace retort {

// `format` holds exactly one conversion for a double (e.g. "%.3g s"); the result is cut at 63
// characters.
inline std::string FormatNumber(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

}  // namespace retort
