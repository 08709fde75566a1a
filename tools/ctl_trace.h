// `retortctl trace`: ask the coordinator for a step trace (every worker writes
// <output_dir>/traces/trace-A-B-<node>-<local_rank>.json), and `retortctl trace merge DIR`:
// merge the ranks' files of one window into one (one process track per rank).
#pragma once

#include <functional>
#include <string>

#include "retort/v1/retort.grpc.pb.h"

namespace retort::tools {

// --steps A:B. `prepare_call` (may be empty) adds credentials to the call's context. Exit
// status 0 asked, 1 refused/unreachable, 2 usage.
int RequestTrace(v1::ControlService::Stub& stub, const std::string& coordinator,
                 const std::string& steps, int64_t timeout_ms, bool json,
                 const std::function<void(grpc::ClientContext*)>& prepare_call = nullptr);
// Merges DIR's trace files of window `steps` ("" = the only one) into `out` ("" =
// DIR/trace-merged-A-B.json). Exit status 0 written, 1 unreadable input or output, 2 usage.
int MergeTraces(const std::string& dir, const std::string& steps, const std::string& out,
                bool json);

}  // namespace retort::tools
