// `retortctl report RUN_DIR`: writes RUN_DIR/report.html (or --out) from the run's step logs
// and prints its path, or with --json prints the analysis (findings included) as one JSON
// object and still writes the HTML. Exit status: 0 written, 1 the run cannot be read or the
// file written, 2 usage.
#pragma once

#include <string>

namespace retort::tools {

int RunReport(const std::string& run_dir, const std::string& out, bool json);

}  // namespace retort::tools
