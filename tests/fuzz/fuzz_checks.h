// What the coordinator harnesses share: quiet logs for fuzzed input, and the invariants every
// generation the coordinator forms must hold whatever it was fed (a broken one aborts, which
// libFuzzer reports as a crash with the input that caused it).
#pragma once

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdlib>

#include "common/logging.h"
#include "retort/v1/retort.pb.h"

namespace retort::fuzz {

// Errors only from retort; nothing from protobuf (fuzzed strings are meant to be bad UTF-8).
inline void QuietLogsForFuzzing() {
  SetLogLevel(LogLevel::kError);
  google::protobuf::SetLogHandler(nullptr);
}

// Ranks are 0..n-1 in member order and the plan's ranges tile the parameter buffer.
inline void CheckGenerationInvariants(const v1::Generation& g) {
  for (int i = 0; i < g.members_size(); ++i)
    if (g.members(i).rank() != i) std::abort();
  int64_t next = 0;
  for (const auto& r : g.plan().ranges()) {
    if (r.offset() != next || r.count() < 0) std::abort();
    next += r.count();
  }
  if (g.plan().ranges_size() > 0 && next != g.plan().total_elements()) std::abort();
}

}  // namespace retort::fuzz
