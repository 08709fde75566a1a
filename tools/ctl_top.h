// `retortctl top`: a live view of the job from the coordinator's status, one line per worker:
// rank, member, generation, step, lag behind the fastest rank (steps), samples/s, step time,
// data wait, and the last step's phase split. Refreshes every --interval-ms until Ctrl-C, or
// --count refreshes; --once is one refresh; --json prints one JSON object per refresh.
// Plain text (no curses): usable over ssh and in pipes; on a terminal each refresh clears it.
#pragma once

#include <functional>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics/step_phases.h"
#include "retort/v1/retort.grpc.pb.h"

namespace retort::tools {

struct TopRow {
  std::string member, node;
  int rank = -1, local_rank = 0;
  uint64_t generation = 0;
  int64_t step = 0;
  int64_t lag_steps = 0;  // behind the member with the highest step
  double samples_per_second = 0, step_seconds = 0, data_wait_seconds = 0;
  // Share of the step's phase total, in step_record order: data wait, teacher forward, student
  // forward, backward, exposed communication, optimizer, checkpoint (all 0 before a step).
  double phase_share[metrics::kStepPhaseCount] = {};  // indexed like metrics::kStepPhaseNames
  int64_t heartbeat_ms_ago = 0;
  bool draining = false;
};

std::vector<TopRow> TopRows(const v1::StatusResponse& status);
std::string FormatTop(const v1::StatusResponse& status, const std::vector<TopRow>& rows);
nlohmann::json TopJson(const v1::StatusResponse& status, const std::vector<TopRow>& rows);

struct TopOptions {
  bool once = false, json = false;
  int64_t interval_ms = 1000;
  int64_t count = 0;  // refreshes (0 = until Ctrl-C)
  int64_t timeout_ms = 5000;
  // Called on every call's context before it is sent (credentials such as a bearer token).
  std::function<void(grpc::ClientContext*)> prepare_call;
};
// Exit status 0, 1 when the coordinator cannot be reached, 2 usage.
int RunTop(v1::ControlService::Stub& stub, const std::string& coordinator, const TopOptions& o);

}  // namespace retort::tools
