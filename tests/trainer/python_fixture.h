// Runs scripts/make_trainer_fixtures.py with the project's Python (RETORT_PYTHON, the .venv
// that scripts/setup makes, with the PyTorch whose LibTorch we link) for the tests that compare
// against PyTorch; those tests skip when that interpreter has no torch.
#pragma once

#include <stdlib.h>

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
