// A server's --port-file: the TCP port it bound (decimal, then a newline), written atomically
// once it listens, so a launcher or test that asked for port 0 learns the real one. Written
// by retort-coordinator, read by retort-run, the tests and the benchmarks.
#pragma once

#include <functional>
#include <string>

#include "common/deadline.h"
#include "common/status.h"

namespace retort {

Status WritePortFile(const std::string& path, int port);

// Polls `path` (every 20 ms) until it holds a port. Gives up when `exited` returns true (the
// server is gone: FAILED_PRECONDITION) or at `deadline` (DEADLINE_EXCEEDED); a file that
// holds no port in 1..65535 is DATA_LOSS. Remove a stale file before starting the server.
StatusOr<int> WaitForPortFile(const std::string& path, Deadline deadline,
                              const std::function<bool()>& exited);

}  // namespace retort
