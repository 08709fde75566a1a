// Test helper: runs a program as a child process with stdout+stderr captured to a file, and
// kills it (SIGKILL) on destruction so no test leaves processes behind. Not thread-safe.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace retort::testing {

class Subprocess {
 public:
  Subprocess(std::vector<std::string> argv, std::string log_path);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Waits up to `timeout` for exit; returns the exit code (128+signal when killed), or nullopt.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool Running();
  std::string Log() const;
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string log_path_;
};

// Polls `predicate` every 20 ms until it holds or `timeout` passes; returns whether it held.
bool WaitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout);

// A fresh temporary directory under /tmp.
std::string MakeTempDir(const std::string& prefix);

// Path of a built program, e.g. BinaryPath("tools/retortctl").
std::string BinaryPath(const std::string& relative);

// Runs a command to completion (bounded by timeout), capturing stdout; returns exit code.
int RunCommand(const std::vector<std::string>& argv, std::string* out,
               std::chrono::milliseconds timeout);

}  // namespace retort::testing
