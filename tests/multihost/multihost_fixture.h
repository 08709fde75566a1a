// Fixtures of the multi-host tests: make test hosts (testing/test_hosts.h) in a per-test
// directory, skipping with the reason when namespaces cannot be made here. The directory
// (logs, job outputs) is removed after a passing test and kept, and printed, after a failure.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "elastic/scenario_test.h"
#include "testing/test_hosts.h"

namespace retort::multihost {

template <class Base>
class WithTestHosts : public Base {
 protected:
  // Null when hosts cannot be made; the test then skips with skip_reason().
  std::unique_ptr<testing::TestHosts> MakeHosts(int count) {
    auto hosts = testing::TestHosts::Create(count, dir() + "/hosts", &skip_reason_);
    if (!hosts) skip_reason_ = "cannot make test hosts here: " + skip_reason_;
    return hosts;
  }
  const std::string& skip_reason() const { return skip_reason_; }

  const std::string& dir() {
    if (dir_.empty()) dir_ = testing::MakeTempDir("retort_multihost");
    return dir_;
  }

  void TearDown() override {
    Base::TearDown();
    if (dir_.empty()) return;
    if (this->HasFailure()) {
      std::cout << "[ logs     ] " << dir_ << "\n";
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  std::string dir_;
  std::string skip_reason_;
};

// Harness tests: no job, no dataset needed.
using MultiHostTest = WithTestHosts<::testing::Test>;
// Job scenarios: Fashion-MNIST, the reference curve and the checks of tests/elastic.
using MultiHostScenarioTest = WithTestHosts<elastic_testing::ElasticScenarioTest>;

}  // namespace retort::multihost
