#include "launcher/launched_job.h"

#include <signal.h>

#include <filesystem>
#include <regex>
#include <sstream>

namespace retort::launcher_testing {

using std::chrono::milliseconds;

LaunchedJob::LaunchedJob(const std::string& job_path, const std::vector<std::string>& args,
                         const std::string& log_path) {
  dir_ = std::filesystem::path(log_path).parent_path().string();
  std::vector<std::string> argv = {testing::BinaryPath("tools/retort-run"), "--job=" + job_path};
  argv.insert(argv.end(), args.begin(), args.end());
  launcher_ = std::make_unique<testing::Subprocess>(argv, log_path);
}

LaunchedJob::~LaunchedJob() {
  if (launcher_->Running()) {
    for (pid_t pid : AllChildPids()) ::kill(pid, SIGKILL);
  }
  launcher_.reset();
}

std::string LastLineOf(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

std::string LaunchedJob::LastLine() const { return LastLineOf(Log()); }

std::string LaunchedJob::Address() const {
  std::smatch m;
  const std::string log = Log();
  static const std::regex re("coordinator at (127\\.0\\.0\\.1:[0-9]+);");
  return std::regex_search(log, m, re) ? m[1].str() : "";
}

std::map<int, pid_t> LaunchedJob::WorkerPids() const {
  std::map<int, pid_t> pids;
  const std::string log = Log();
  static const std::regex re("retort-run: worker ([0-9]+) started \\(pid ([0-9]+)\\)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it)
    pids[std::stoi((*it)[1].str())] = static_cast<pid_t>(std::stol((*it)[2].str()));
  return pids;
}

std::vector<pid_t> LaunchedJob::AllChildPids() const {
  std::vector<pid_t> pids;
  const std::string log = Log();
  static const std::regex re("retort-run: (worker [0-9]+|coordinator) started \\(pid ([0-9]+)\\)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it)
    pids.push_back(static_cast<pid_t>(std::stol((*it)[2].str())));
  return pids;
}

std::optional<elastic_testing::StatusView> LaunchedJob::Status() {
  const std::string address = Address();
  if (address.empty()) return std::nullopt;
  std::string out;
  int rc = testing::RunCommand({testing::BinaryPath("tools/retortctl"), "--coordinator=" + address,
                                "--timeout-ms=2000", "status", "--json"},
                               &out, milliseconds(5000));
  if (rc != 0) return std::nullopt;
  return elastic_testing::ParseStatusJson(out);
}

}  // namespace retort::launcher_testing
