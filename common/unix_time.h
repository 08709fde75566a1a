// Wall-clock time since the Unix epoch, for time stamps people and other machines read (events,
// evaluations, checkpoint failures). Deadlines and intervals use steady clocks (clock.h,
// deadline.h), never this. Header-only, std-only, thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

namespace retort {

inline int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace retort
