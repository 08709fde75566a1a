#include "common/process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace retort {
namespace {

void WriteAll(int fd, const char* text, size_t length) {
  while (length > 0) {
    const ssize_t n = ::write(fd, text, length);
    if (n <= 0) return;
    text += n;
    length -= static_cast<size_t>(n);
  }
}

// The child's side, from fork to exec: async-signal-safe calls only.
[[noreturn]] void ExecChild(char* const* argv, int output_fd, const SpawnOptions& options,
                            const std::string& failure_prefix, pid_t parent) {
  if (options.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
  }
  if (output_fd >= 0) {
    ::dup2(output_fd, 1);
    ::dup2(output_fd, 2);
  }
  if (options.own_process_group) ::setpgid(0, 0);
  // A parent may ignore SIGPIPE (retort-run does); the program it starts gets the default.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (options.search_path) {
    ::execvp(argv[0], argv);
  } else {
    ::execv(argv[0], argv);
  }
  const char* reason = std::strerror(errno);
  WriteAll(2, failure_prefix.data(), failure_prefix.size());
  WriteAll(2, reason, std::strlen(reason));
  WriteAll(2, "\n", 1);
  ::_exit(127);
}

}  // namespace

StatusOr<SpawnedProcess> SpawnProcess(const std::vector<std::string>& argv,
                                      const SpawnOptions& options) {
  if (argv.empty()) return InvalidArgumentError("spawn: empty argv");
  std::vector<std::string> args = argv;  // execv wants char*; prepared before fork
  std::vector<char*> pointers;
  for (std::string& a : args) pointers.push_back(a.data());
  pointers.push_back(nullptr);
  const std::string failure_prefix = "cannot run " + argv[0] + ": ";

  int child_output = -1;  // the child's stdout/stderr; closed here after fork
  int parent_read = -1;
  switch (options.output) {
    case SpawnOptions::Output::kInherit:
      break;
    case SpawnOptions::Output::kFile:
      child_output =
          ::open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (child_output < 0) {
        return UnavailableError("spawn " + argv[0] + ": cannot open " + options.output_path + ": " +
                                std::strerror(errno));
      }
      break;
    case SpawnOptions::Output::kDiscard:
      child_output = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (child_output < 0) {
        return UnavailableError("spawn " + argv[0] +
                                ": cannot open /dev/null: " + std::strerror(errno));
      }
      break;
    case SpawnOptions::Output::kPipe: {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        return UnavailableError("spawn " + argv[0] + ": pipe: " + std::strerror(errno));
      }
      parent_read = fds[0];
      child_output = fds[1];
      break;
    }
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) ExecChild(pointers.data(), child_output, options, failure_prefix, parent);
  const int fork_errno = errno;
  if (child_output >= 0) ::close(child_output);
  if (pid < 0) {
    if (parent_read >= 0) ::close(parent_read);
    return UnavailableError("spawn " + argv[0] + ": fork: " + std::strerror(fork_errno));
  }
  return SpawnedProcess{pid, parent_read};
}

StatusOr<pid_t> ForkAndRun(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid < 0) return UnavailableError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  return pid;
}

int ExitCodeFromWaitStatus(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

std::optional<int> PollExit(pid_t pid) {
  if (pid <= 0) return std::nullopt;  // waitpid would take any child (or a group)
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) == pid) return ExitCodeFromWaitStatus(status);
  return std::nullopt;
}

std::optional<int> WaitExit(pid_t pid, Deadline deadline) {
  for (;;) {
    if (auto code = PollExit(pid)) return code;
    if (deadline.Expired()) return std::nullopt;
    std::this_thread::sleep_for(
        std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(5), deadline.Remaining()));
  }
}

std::optional<int> KillAndWait(pid_t pid, Deadline deadline) {
  ::kill(pid, SIGKILL);
  return WaitExit(pid, deadline);
}

}  // namespace retort
