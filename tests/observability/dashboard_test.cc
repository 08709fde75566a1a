// deploy/grafana/retort-dashboard.json uses only metrics retort exports: every retort_* name in
// its queries is in golden_metrics.txt (a histogram's _bucket/_sum/_count series included), and
// every panel has a query.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "tests/observability/golden_metrics.h"

namespace {

using retort::observability_testing::GoldenMetrics;

TEST(GrafanaDashboard, QueriesUseExportedMetrics) {
  std::ifstream in(RETORT_DASHBOARD);
  ASSERT_TRUE(in) << RETORT_DASHBOARD;
  const auto dash = nlohmann::json::parse(in);
  const auto golden = GoldenMetrics();
  ASSERT_FALSE(golden.empty());
  ASSERT_GT(dash["panels"].size(), 10u);
  const std::regex name("retort_[a-z_]+");
  int names = 0;
  for (const auto& p : dash["panels"]) {
    ASSERT_FALSE(p["targets"].empty()) << p["title"];
    for (const auto& t : p["targets"]) {
      const std::string expr = t["expr"];
      for (auto it = std::sregex_iterator(expr.begin(), expr.end(), name);
           it != std::sregex_iterator(); ++it, ++names) {
        std::string n = it->str();
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
          const std::string s = suffix;
          if (golden.count(n) == 0 && n.size() > s.size() &&
              n.compare(n.size() - s.size(), s.size(), s) == 0 &&
              golden.count(n.substr(0, n.size() - s.size())) &&
              golden.at(n.substr(0, n.size() - s.size())) == "histogram")
            n = n.substr(0, n.size() - s.size());
        }
        EXPECT_TRUE(golden.count(n)) << p["title"] << ": " << it->str() << " is not exported";
      }
    }
  }
  EXPECT_GT(names, 20);
}

}  // namespace
