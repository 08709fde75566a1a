// Test harness: one `retort-run` process (the local launcher) and what it says about the job it
// runs: the coordinator's address, the pid of each worker slot (the newest process in it), its
// last line, and the coordinator's status through retortctl. The destructor SIGKILLs the launcher
// and every coordinator and worker process it reported starting, so no test leaves any behind.
// Not thread-safe: one test thread drives one launcher.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "elastic/elastic_cluster.h"
#include "testing/subprocess.h"

namespace retort::launcher_testing {

class LaunchedJob {
 public:
  // Runs `retort-run --job=JOB_PATH ARGS...`, its output in LOG_PATH.
  LaunchedJob(const std::string& job_path, const std::vector<std::string>& args,
              const std::string& log_path);
  ~LaunchedJob();
  LaunchedJob(const LaunchedJob&) = delete;
  LaunchedJob& operator=(const LaunchedJob&) = delete;

  testing::Subprocess& process() { return *launcher_; }
  std::string Log() const { return launcher_->Log(); }
  // The launcher's last non-empty line.
  std::string LastLine() const;
  // "127.0.0.1:PORT" once the launcher printed it, else "".
  std::string Address() const;
  // Slot -> pid of the newest process the launcher started in that slot.
  std::map<int, pid_t> WorkerPids() const;
  // `retortctl status --json` against the coordinator (nullopt before it is known or up).
  std::optional<elastic_testing::StatusView> Status();
  // Waits for the launcher to exit; its exit code or nullopt after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout) { return launcher_->Wait(timeout); }

 private:
  std::vector<pid_t> AllChildPids() const;
  std::unique_ptr<testing::Subprocess> launcher_;
  std::string dir_;
};

// The last non-empty line of `text`.
std::string LastLineOf(const std::string& text);

}  // namespace retort::launcher_testing
