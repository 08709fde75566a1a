#include "testing/subprocess.h"

#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "common/process.h"

namespace retort::testing {

Subprocess::Subprocess(std::vector<std::string> argv, std::string log_path,
                       SubprocessOptions options)
    : options_(options), log_path_(std::move(log_path)) {
  SpawnOptions spawn;
  spawn.output = SpawnOptions::Output::kFile;
  spawn.output_path = log_path_;
  spawn.own_process_group = true;  // a signal to the test's group does not reach it
  spawn.die_with_parent = options_.die_with_parent;
  StatusOr<SpawnedProcess> spawned = SpawnProcess(argv, spawn);
  if (spawned.ok()) {
    pid_ = spawned->pid;
  } else {
    spawn_error_ = spawned.status().ToString();
    exit_code_ = 127;
  }
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exit_code_) {
    Signal(SIGKILL);
    exit_code_ = WaitExit(pid_, Deadline::AfterMs(5000));
  }
}

void Subprocess::Signal(int sig) {
  if (pid_ <= 0 || exit_code_) return;
  kill(options_.signal_process_group ? -pid_ : pid_, sig);
}

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  if (!exit_code_) exit_code_ = WaitExit(pid_, Deadline::After(timeout));
  return exit_code_;
}

bool Subprocess::Running() { return !Wait(std::chrono::milliseconds(0)).has_value(); }

std::string Subprocess::Log() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  if (!spawn_error_.empty()) ss << spawn_error_ << "\n";
  ss << f.rdbuf();
  return ss.str();
}

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool WaitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return predicate();
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* d = mkdtemp(buf.data());
  return d ? d : "/tmp";
}

std::string BinaryPath(const std::string& relative) {
  return std::string(RETORT_BINARY_DIR) + "/" + relative;
}

int RunCommand(const std::vector<std::string>& argv, std::string* out,
               std::chrono::milliseconds timeout) {
  std::string path = MakeTempDir("retort_cmd") + "/out";
  int code;
  {
    Subprocess p(argv, path);
    auto rc = p.Wait(timeout);
    code = rc ? *rc : -1;
    if (out) *out = p.Log();
  }
  return code;
}

}  // namespace retort::testing
