// Runs scripts/make_trainer_fixtures.py with the project's Python (RETORT_PYTHON, the .venv
// that scripts/setup makes, with the PyTorch whose LibTorch we link) for the tests that compare
// against PyTorch; those tests skip when that interpreter has no torch.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace retort::trainer::test {

inline bool PythonTorchAvailable() {
  static const bool ok =
      std::system(
          (std::string("'") + RETORT_PYTHON + "' -c 'import torch' > /dev/null 2>&1").c_str()) == 0;
  return ok;
}

// Returns the exit status of `make_trainer_fixtures.py <args>`.
inline int RunFixtureScript(const std::string& args) {
  const std::string cmd = std::string("'") + RETORT_PYTHON + "' " + RETORT_SOURCE_DIR +
                          "/scripts/make_trainer_fixtures.py " + args;
  return std::system(cmd.c_str());
}

// The folder of an input-free fixture (make_trainer_fixtures.py shared: "torchscript",
// "batchnorm", "batchnorm-fm"), made once per build under <build>/tests/fixtures by the ctest
// fixture `python_fixtures` (tests that read one declare it: retort_add_gtest's FIXTURES). When a
// test binary runs outside ctest, the first test to ask makes it (the script renames a finished
// folder into place, so side-by-side tests never see half of one). Read-only for tests: write
// into a folder of the test's own. "" when the script failed.
inline std::string SharedFixture(const std::string& kind) {
  const std::string root = std::string(RETORT_BINARY_DIR) + "/tests/fixtures";
  const std::string dir = root + "/" + kind;
  if (::access((dir + "/.complete").c_str(), F_OK) == 0) return dir;
  if (RunFixtureScript("shared '" + root + "' " + kind + " 2>/dev/null") != 0) return "";
  return dir;
}

// The exported-teacher packages of scripts/make_aoti_fixtures.py (<build>/tests/fixtures/aoti),
// made once per build by the ctest fixture `aoti_fixtures`; outside ctest the first test to ask
// makes them (minutes). Read-only for tests. "" when the script failed.
inline std::string AotiFixture() {
  const std::string root = std::string(RETORT_BINARY_DIR) + "/tests/fixtures";
  const std::string dir = root + "/aoti";
  if (::access((dir + "/.complete").c_str(), F_OK) == 0) return dir;
  const std::string cmd = std::string("'") + RETORT_PYTHON + "' " + RETORT_SOURCE_DIR +
                          "/scripts/make_aoti_fixtures.py '" + root + "'";
  if (std::system(cmd.c_str()) != 0) return "";
  return dir;
}

inline std::string MakeTempDir() {
  char tmpl[] = "/tmp/retort_trainer_test_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir ? dir : "";
}

inline void RemoveDir(const std::string& dir) {
  if (!dir.empty() && dir.rfind("/tmp/retort_trainer_test_", 0) == 0)
    (void)std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace retort::trainer::test
