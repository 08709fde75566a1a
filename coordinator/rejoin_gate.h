// After a coordinator restart, generations wait for the previous generation's members (their
// in-memory state may be newer than the last checkpoint) until they are all back or a grace
// period ends. RejoinGate holds whom it waits for and until when.
//
// Thread-compatible: the Coordinator calls it under its own lock.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace retort::coordinator {

class RejoinGate {
 public:
  // A member's place: (node, local rank).
  using Place = std::pair<std::string, int>;

  // Waits for `expected` until `deadline`; an empty set opens the gate.
  void Expect(std::set<Place> expected, std::chrono::steady_clock::time_point deadline);
  // Stops waiting (the job ended, or the wait is over).
  void Open() { expected_.clear(); }
  bool waiting() const { return !expected_.empty(); }
  size_t expected() const { return expected_.size(); }

  // "node/local_rank" of every expected place not in `present`, in order.
  std::vector<std::string> Missing(const std::set<Place>& present) const;

  // Whether generations must still wait at `now`, given the places now `present`. When the wait
  // ends in this call the gate opens and *why says why (every member back, or the grace ended
  // and who is missing); otherwise *why is left alone.
  bool StillWaiting(std::chrono::steady_clock::time_point now, const std::set<Place>& present,
                    int64_t grace_ms, std::string* why);

 private:
  std::set<Place> expected_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace retort::coordinator
