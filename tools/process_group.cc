#include "tools/process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace retort::tools {

ProcessGroup::~ProcessGroup() {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (!Poll(static_cast<int>(i))) {
      Signal(static_cast<int>(i), SIGKILL);
      int status;
      waitpid(children_[i]->pid, &status, 0);
    }
  }
  for (auto& c : children_)
    if (c->reader.joinable()) c->reader.join();
}

int ProcessGroup::Spawn(const std::string& name, const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  auto child = std::make_unique<Child>();
  child->name = name;
  child->pid = fork();
  if (child->pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    // Children ignore the terminal's Ctrl-C: the launcher decides how they stop.
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    std::vector<std::string> copy = argv;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", argv[0].c_str(), std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  int read_fd = fds[0];
  std::string prefix = "[" + name + "] ";
  child->reader = std::thread([this, read_fd, prefix] {
    FILE* f = fdopen(read_fd, "r");
    if (!f) return;
    char* line = nullptr;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
      std::lock_guard<std::mutex> lock(out_mu_);
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
  if (c.exit_code) return c.exit_code;
  int status = 0;
  if (waitpid(c.pid, &status, WNOHANG) == c.pid)
    c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
