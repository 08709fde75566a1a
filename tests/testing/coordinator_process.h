// Test helper: starts build/tools/retort-coordinator (on 127.0.0.1, or on a test host) and
// learns its port from its --port-file (common/port_file.h). Not thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "testing/subprocess.h"

namespace retort::testing {

struct CoordinatorLaunch {
  // Every flag but --listen and --port-file (--state-dir, --job, timings, ...).
  std::vector<std::string> flags;
  // Where the coordinator reports the port it bound; removed before it starts.
  std::string port_file;
  std::string log_path;
  // 0: any free port, learned from port_file; else this port (a restart on the same address)
  // and no port file.
  int port = 0;
  // How long it may take to write the port file.
  std::chrono::milliseconds timeout{20000};
  // The address it listens on.
  std::string ip = "127.0.0.1";
  // Starts the process (argv, log path); empty: a Subprocess here (a test host's Spawn runs it
  // in that host's namespaces).
  std::function<std::unique_ptr<Subprocess>(const std::vector<std::string>&, const std::string&)>
      spawn;
};

struct LaunchedCoordinator {
  std::unique_ptr<Subprocess> process;  // set even when it failed, for its log
  std::string ip;                       // the address it listens on
  int port = 0;                         // 0 when it reported no port in time
  std::string error;                    // then why, with the coordinator's log
  bool ok() const { return port > 0; }
  std::string address() const { return ip + ":" + std::to_string(port); }
};

LaunchedCoordinator LaunchCoordinator(const CoordinatorLaunch& launch);

}  // namespace retort::testing
