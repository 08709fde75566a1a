// Runs child processes whose stdout/stderr lines are copied to our stdout with a prefix
// ("[worker 1] ..."). Used by the local launcher. Threading: Spawn/Poll/Signal from one thread;
// one reader thread per child copies output and exits at EOF.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace retort::tools {

class ProcessGroup {
 public:
  ~ProcessGroup();  // SIGKILLs children still running and joins reader threads

  // Returns the child's index.
  int Spawn(const std::string& name, const std::vector<std::string>& argv);
  // Non-blocking: the exit code of child i (128+signal when killed), or nullopt while running.
  std::optional<int> Poll(int i);
  void Signal(int i, int sig);
  void SignalAll(int sig);
  bool AllExited();
  // Blocks until every exited child's output has been copied (its reader thread saw EOF). Call
  // after AllExited(), before printing lines that must come last.
  void WaitForOutput();
  pid_t pid(int i) const { return children_[i]->pid; }
  size_t size() const { return children_.size(); }
  const std::string& name(int i) const { return children_[i]->name; }

 private:
  struct Child {
    std::string name;
    pid_t pid = -1;
    std::optional<int> exit_code;
    std::thread reader;
  };
  std::vector<std::unique_ptr<Child>> children_;
  Mutex out_mu_;  // serialises lines written to stdout
};

}  // namespace retort::tools
