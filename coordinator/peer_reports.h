// The rules that decide whether a member's report that a peer failed evicts that peer. A report
// is evidence, not a command:
//  - A member may send `max_per_window` reports per `window` (RESOURCE_EXHAUSTED beyond), and
//    its reports evict at most one peer per generation (RESOURCE_EXHAUSTED beyond).
//  - A report cannot lose the job's newest in-memory state. Every rank keeps a replica of its
//    ring predecessor's optimizer range, so after a report evicted a member, that member's ring
//    neighbours hold the only copy of two ranges until the next generation has trained and
//    replicated again. Until then one report cannot evict them (FAILED_PRECONDITION): it takes
//    reports from two different members, or the neighbour's own silence (heartbeat deadline,
//    closed generation stream), which the Coordinator judges and no other member can fake.
// The Coordinator checks that reporter and target are distinct members of the current
// generation before it asks (coordinator_peer_reports.cc), and calls Forget when a member leaves.
//
// Thread-compatible: the Coordinator calls it under its own lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace retort::coordinator {

struct PeerReportLimits {
  int max_per_window = 4;
  std::chrono::milliseconds window{10000};
};

class PeerReports {
 public:
  using Time = std::chrono::steady_clock::time_point;

  explicit PeerReports(PeerReportLimits limits) : limits_(limits) {}

  // Counts one report by `reporter` at `now` against its rate: RESOURCE_EXHAUSTED, counting
  // nothing, when it already sent max_per_window reports in the current window.
  Status Count(const std::string& reporter, Time now);

  // The generation a report is judged in: its number, its members' ids by rank (the ring; empty
  // where that member has left the job since), the highest step its members reached, and the
  // job's replicate_every_steps (0: every step).
  struct Generation {
    uint64_t number = 0;
    std::vector<std::string> by_rank;
    int64_t step = 0;
    int64_t replicate_every_steps = 0;
  };

  // Whether `reporter`'s report against `target` evicts it. OK: evict; the eviction is recorded
  // (the reporter's one for this generation) and the target's ring neighbours that have not left
  // become sole holders until a later generation trained past the replicas' next capture.
  // RESOURCE_EXHAUSTED: the reporter already had a peer evicted in this generation.
  // FAILED_PRECONDITION: the target is a sole holder and this is its first reporter in this
  // generation (the reporter is remembered: a second member's report evicts it).
  Status Decide(const std::string& reporter, const std::string& target, const Generation& g);

  // A member left (for any reason): its rate window, its quota and its protection go with it.
  void Forget(const std::string& member);

  // Whether `member` is protected as a sole holder now (expired protections included until the
  // next Decide drops them).
  bool Protected(const std::string& member) const { return sole_holders_.count(member) > 0; }

 private:
  struct Reporter {
    Time window_start;
    int in_window = 0;
    uint64_t evicted_generation = 0;  // the last generation one of its reports evicted in
  };
  // Protected since a report evicted a ring neighbour in `generation`, until a later
  // generation has trained to `until_step` (the survivors replicated again).
  struct SoleHolder {
    uint64_t generation = 0;
    int64_t until_step = 0;
  };

  void ExpireSoleHolders(const Generation& g);
  void ProtectRingNeighbours(const std::string& target, const Generation& g);

  const PeerReportLimits limits_;
  std::map<std::string, Reporter> reporters_;
  std::map<std::string, SoleHolder> sole_holders_;
  // Reporters of each protected target in generation reports_generation_.
  std::map<std::string, std::set<std::string>> reports_against_;
  uint64_t reports_generation_ = 0;
};

}  // namespace retort::coordinator
