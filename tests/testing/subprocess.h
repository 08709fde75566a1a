// Test helper: runs a program as a child process (common/process.h) with stdout+stderr
// captured to a file, and kills it (SIGKILL) on destruction so no test leaves processes
// behind. Not thread-safe.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace retort::testing {

struct SubprocessOptions {
  // Signal() and the destructor signal the child's whole process group (the child leads its
  // own), so a wrapper that forks the real program (nsenter, unshare) takes it along.
  bool signal_process_group = false;
  // The child gets SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG), so a
  // crashed test leaves nothing running. Only for children started from a test's main thread.
  bool die_with_parent = false;
};

class Subprocess {
 public:
  Subprocess(std::vector<std::string> argv, std::string log_path, SubprocessOptions options = {});
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
  SubprocessOptions options_;
  std::optional<int> exit_code_;  // 127 when it could not be started
  std::string log_path_;
  std::string spawn_error_;  // why it could not be started; shown first by Log()
};

// Wall-clock milliseconds since the epoch: the clock of metrics lines' time_unix_ms, for
// measuring from an event in a test to a line a process wrote.
int64_t UnixMs();

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
