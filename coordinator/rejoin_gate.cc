#include "coordinator/rejoin_gate.h"

namespace retort::coordinator {

void RejoinGate::Expect(std::set<Place> expected, std::chrono::steady_clock::time_point deadline) {
  expected_ = std::move(expected);
  deadline_ = deadline;
}

std::vector<std::string> RejoinGate::Missing(const std::set<Place>& present) const {
  std::vector<std::string> missing;
  for (const Place& place : expected_)
    if (present.count(place) == 0)
      missing.push_back(place.first + "/" + std::to_string(place.second));
  return missing;
}

bool RejoinGate::StillWaiting(std::chrono::steady_clock::time_point now,
                              const std::set<Place>& present, int64_t grace_ms, std::string* why) {
  if (expected_.empty()) return false;
  const std::vector<std::string> missing = Missing(present);
  if (!missing.empty() && now < deadline_) return true;
  if (missing.empty()) {
    *why = "every member of the previous generation re-joined";
  } else {
    *why = std::to_string(grace_ms) + " ms re-join grace ended without";
    for (const std::string& m : missing) *why += " " + m;
  }
  expected_.clear();
  return false;
}

}  // namespace retort::coordinator
