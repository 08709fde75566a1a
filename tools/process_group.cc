#include "tools/process_group.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>

#include "common/process.h"

namespace retort::tools {

ProcessGroup::~ProcessGroup() {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (!Poll(static_cast<int>(i))) {
      children_[i]->exit_code = KillAndWait(children_[i]->pid, Deadline::AfterMs(5000));
    }
  }
  for (auto& c : children_)
    if (c->reader.joinable()) c->reader.join();
}

int ProcessGroup::Spawn(const std::string& name, const std::vector<std::string>& argv) {
  SpawnOptions options;
  options.output = SpawnOptions::Output::kPipe;
  // Children ignore the terminal's Ctrl-C: the launcher decides how they stop.
  options.own_process_group = true;
  StatusOr<SpawnedProcess> spawned = SpawnProcess(argv, options);
  if (!spawned.ok()) {
    std::fprintf(stderr, "%s\n", spawned.status().message().c_str());
    return -1;
  }
  auto child = std::make_unique<Child>();
  child->name = name;
  child->pid = spawned->pid;
  const int read_fd = spawned->output_fd;
  std::string prefix = "[" + name + "] ";
  child->reader = std::thread([this, read_fd, prefix] {
    FILE* f = fdopen(read_fd, "r");
    if (!f) return;
    char* line = nullptr;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
      MutexLock lock(out_mu_);
      std::fputs(prefix.c_str(), stdout);
      std::fputs(line, stdout);
      std::fflush(stdout);
    }
    free(line);
    fclose(f);
  });
  children_.push_back(std::move(child));
  return static_cast<int>(children_.size() - 1);
}

std::optional<int> ProcessGroup::Poll(int i) {
  Child& c = *children_[i];
  if (!c.exit_code) c.exit_code = PollExit(c.pid);
  return c.exit_code;
}

void ProcessGroup::Signal(int i, int sig) {
  if (!Poll(i)) kill(children_[i]->pid, sig);
}

void ProcessGroup::SignalAll(int sig) {
  for (size_t i = 0; i < children_.size(); ++i) Signal(static_cast<int>(i), sig);
}

bool ProcessGroup::AllExited() {
  for (size_t i = 0; i < children_.size(); ++i)
    if (!Poll(static_cast<int>(i))) return false;
  return true;
}

void ProcessGroup::WaitForOutput() {
  for (size_t i = 0; i < children_.size(); ++i)
    if (Poll(static_cast<int>(i)) && children_[i]->reader.joinable()) children_[i]->reader.join();
}

}  // namespace retort::tools
