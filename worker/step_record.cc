#include "worker/step_record.h"

#include <chrono>

namespace retort::worker {

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace retort::worker
