// golden_metrics.txt (RETORT_GOLDEN_METRICS): one "name type" line per metric family retort
// exports; '#' lines and blank lines are comments.
#pragma once

#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace retort::observability_testing {

// name -> type of every family whose name starts with `prefix` ("" = all).
inline std::map<std::string, std::string> GoldenMetrics(const std::string& prefix = "") {
  std::ifstream in(RETORT_GOLDEN_METRICS);
  std::map<std::string, std::string> f;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream l(line);
    std::string name, type;
    l >> name >> type;
    if (name.rfind(prefix, 0) == 0) f[name] = type;
  }
  return f;
}

}  // namespace retort::observability_testing
