#include "testing/coordinator_process.h"

#include <cstdio>

#include "common/port_file.h"

namespace retort::testing {

LaunchedCoordinator LaunchCoordinator(const CoordinatorLaunch& launch) {
  std::vector<std::string> argv = {BinaryPath("tools/retort-coordinator"),
                                   "--listen=" + launch.ip + ":" + std::to_string(launch.port)};
  if (launch.port == 0) {
    std::remove(launch.port_file.c_str());
    argv.push_back("--port-file=" + launch.port_file);
  }
  argv.insert(argv.end(), launch.flags.begin(), launch.flags.end());
  LaunchedCoordinator c;
  c.ip = launch.ip;
  c.process = launch.spawn ? launch.spawn(argv, launch.log_path)
                           : std::make_unique<Subprocess>(argv, launch.log_path);
  if (launch.port != 0) {
    c.port = launch.port;
    return c;
  }
  Subprocess* process = c.process.get();
  StatusOr<int> port = WaitForPortFile(launch.port_file, Deadline::After(launch.timeout),
                                       [process] { return !process->Running(); });
  if (port.ok()) {
    c.port = *port;
  } else {
    c.error =
        "coordinator wrote no port file (" + port.status().ToString() + "):\n" + c.process->Log();
  }
  return c;
}

}  // namespace retort::testing
