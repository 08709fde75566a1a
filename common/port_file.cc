#include "common/port_file.h"

#include <thread>

#include "common/args.h"
#include "common/file_util.h"

namespace retort {

Status WritePortFile(const std::string& path, int port) {
  return WriteFileAtomically(path, std::to_string(port) + "\n");
}

StatusOr<int> WaitForPortFile(const std::string& path, Deadline deadline,
                              const std::function<bool()>& exited) {
  for (;;) {
    // Asked before looking at the file, so a server that wrote it and then exited counts.
    const bool gone = exited && exited();
    if (PathExists(path)) {
      RETORT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      StatusOr<int64_t> port = ParseInt64(text, "port file " + path);
      if (!port.ok()) return DataLossError(port.status().message());
      if (*port < 1 || *port > 65535) {
        return DataLossError("port file " + path + ": " + text + " is not a TCP port");
      }
      return static_cast<int>(*port);
    }
    if (gone) {
      return FailedPreconditionError("the server exited before writing " + path);
    }
    if (deadline.Expired()) {
      return DeadlineExceededError("no port in " + path + " before the deadline");
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(20), deadline.Remaining()));
  }
}

}  // namespace retort
