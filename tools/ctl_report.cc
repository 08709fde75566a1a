#include "tools/ctl_report.h"

#include <cstdio>
#include <iostream>

#include "common/file_util.h"
#include "tools/report/bottleneck_rules.h"
#include "tools/report/html_report.h"
#include "tools/report/step_logs.h"

namespace retort::tools {

int RunReport(const std::string& run_dir, const std::string& out, bool json) {
  if (run_dir.empty()) {
    std::fprintf(stderr, "retortctl: report needs a run folder (retortctl report RUN_DIR)\n");
    return 2;
  }
  auto run = report::ReadRunLogs(run_dir);
  if (!run.ok()) {
    std::fprintf(stderr, "retortctl: report: %s\n", run.status().message().c_str());
    return 1;
  }
  const report::Analysis analysis = report::Analyze(*run);
  const std::string path = out.empty() ? run_dir + "/report.html" : out;
  Status s = WriteFileAtomically(path, report::RenderHtmlReport(*run, analysis));
  if (!s.ok()) {
    std::fprintf(stderr, "retortctl: report: writing %s: %s\n", path.c_str(), s.message().c_str());
    return 1;
  }
  if (json) {
    nlohmann::json j = report::ReportJson(*run, analysis);
    j["html"] = path;
    std::cout << j.dump() << std::endl;
  } else {
    std::printf("report: %s\n", path.c_str());
    for (const auto& f : analysis.findings) std::printf("  %s\n", f.text.c_str());
    if (analysis.findings.empty())
      std::printf("  no bottleneck rule fired (largest phase: %s)\n", analysis.bottleneck.c_str());
  }
  return 0;
}

}  // namespace retort::tools
