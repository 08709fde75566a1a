// Merging the step traces of all ranks (worker/trace_recorder.h) into one Chrome trace-event
// file with one process track per rank. Std + nlohmann only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace retort::tools {

// Merges trace documents: every event is kept; a document whose pid (rank) is already taken by
// an earlier one moves to the next free pid (its process_name says so). INVALID_ARGUMENT naming
// the document's index when one is not a trace-event object.
StatusOr<nlohmann::json> MergeTraceDocuments(const std::vector<nlohmann::json>& docs);

// The trace files in `dir` for window first:last ("" = the only window there; several windows
// without one named is INVALID_ARGUMENT listing them). Merged-file outputs are skipped.
StatusOr<std::vector<std::string>> FindTraceFiles(const std::string& dir,
                                                  const std::string& window);

}  // namespace retort::tools
