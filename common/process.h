// Starting and reaping child processes: the one fork/exec of retort, used by the local
// launcher (tools/process_group.h), the test helpers (tests/testing/subprocess.h) and the
// benchmarks. Between fork and exec the child only calls dup2, setpgid, sigprocmask and
// execv/execvp (everything else is prepared before fork), so it is safe to call from a
// process with threads. Thread-safe (no shared state); waiting on one pid from two threads
// is the caller's mistake.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace retort {

struct SpawnOptions {
  // Where the child's stdout and stderr go.
  enum class Output {
    kInherit,  // this process's
    kFile,     // appended to `output_path` (created with mode 0644)
    kPipe,     // a pipe whose read end is returned in SpawnedProcess::output_fd
    kDiscard,  // /dev/null
  };
  Output output = Output::kInherit;
  std::string output_path;
  // The child gets a process group of its own, so a terminal's Ctrl-C (sent to our group)
  // does not reach it: whoever started it decides how it stops.
  bool own_process_group = false;
  // Look argv[0] up in PATH (execvp) instead of taking it as a path (execv).
  bool search_path = false;
  // The child gets SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG), so a
  // crashed parent leaves nothing running. Only for children started from a thread that lives
  // as long as they should (normally the main thread).
  bool die_with_parent = false;
};

struct SpawnedProcess {
  pid_t pid = -1;
  // Output::kPipe: the read end (close-on-exec), owned by the caller; otherwise -1.
  int output_fd = -1;
};

// Starts argv[0] with arguments argv[1..] and an empty signal mask. When exec fails the
// child writes "cannot run ARGV0: REASON" to its output and exits 127. Errors: argv empty,
// the output file or pipe cannot be opened, fork fails.
StatusOr<SpawnedProcess> SpawnProcess(const std::vector<std::string>& argv,
                                      const SpawnOptions& options = {});

// Runs `body` in a forked child without exec; the child exits with body's return value
// (uncaught exceptions: 1). For benchmarks that fork ranks of a single-threaded parent: the
// child inherits a copy of everything, threads excepted.
StatusOr<pid_t> ForkAndRun(const std::function<int()>& body);

// A waitpid status as an exit code: the exit status, or 128 + the signal that killed it.
int ExitCodeFromWaitStatus(int wait_status);
// Reaps `pid` if it has exited: its exit code, or nullopt while it runs. Once it returned a
// code the pid is gone: callers keep the code.
std::optional<int> PollExit(pid_t pid);
// Polls (every 5 ms) until `pid` exits or `deadline` passes: the exit code, or nullopt.
std::optional<int> WaitExit(pid_t pid, Deadline deadline);
// SIGKILLs `pid` and waits until `deadline` to reap it: its exit code (normally 128 +
// SIGKILL), or nullopt when it was not gone in time (e.g. stuck in the kernel).
std::optional<int> KillAndWait(pid_t pid, Deadline deadline);

}  // namespace retort
