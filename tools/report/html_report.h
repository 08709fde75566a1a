// `retortctl report`: one self-contained HTML file for a run (inline SVG and CSS, no scripts,
// nothing fetched) and the same analysis as JSON. Sections (element ids): summary, findings,
// loss, accuracy, throughput, step-time, phases, membership.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/report/bottleneck_rules.h"
#include "tools/report/step_logs.h"

namespace retort::report {

// A membership change seen in the step logs: the generation changed between two steps, or a
// worker re-ran steps it had run (a rollback: recovery from a failure).
struct MembershipChange {
  int64_t step = 0;
  double seconds = 0;  // since the run's first step began
  std::string what;
  bool recovery = false;
};
std::vector<MembershipChange> MembershipChanges(const RunLogs& run);

std::string RenderHtmlReport(const RunLogs& run, const Analysis& analysis);
nlohmann::json ReportJson(const RunLogs& run, const Analysis& analysis);

}  // namespace retort::report
