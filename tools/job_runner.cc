// RunJob and the launcher's sequence: the steps before the loop, the loop, and the verdict
// (job_launcher.h names the steps).
#include "tools/job_runner.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "tools/job_launcher.h"
#include "tools/launcher_policy.h"

namespace retort::tools {
namespace {

// "student top-1 0.8712 on 10000 test images" or "not evaluated", from result.json.
std::string ResultSummary(const std::string& dir) {
  auto text = ReadFileToString(dir + "/result.json");
  if (!text.ok()) return "";
  try {
    auto r = nlohmann::json::parse(*text);
    if (!r.value("evaluated", r.contains("student_top1")))
      return "student top-1 not evaluated (the job sets evaluate: false)";
    char buf[128];
    std::snprintf(buf, sizeof(buf), "student top-1 %.4f on %lld test images",
                  r.value("student_top1", 0.0),
                  static_cast<long long>(r.value("test_samples", int64_t{0})));
    return buf;
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

}  // namespace

int RunJob(const RunOptions& options, const v1::JobSpec& job, std::atomic<int>& interrupts,
           std::string* results_dir) {
  return JobLauncher(options, job, interrupts).Run(results_dir);
}

int JobLauncher::Run(std::string* results_dir) {
  if (results_dir) *results_dir = layout_.output_dir;
  if (auto rc = CheckWorkerCount()) return *rc;
  if (auto rc = HandlePreviousRun(results_dir)) return *rc;
  if (auto rc = WriteRunFiles()) return *rc;
  if (auto rc = StartCoordinator()) return *rc;

  slots_.resize(static_cast<size_t>(o_.workers));
  std::printf(
      "retort-run: job '%s' with %d worker(s) (min_workers=%d, --max-restarts=%d); coordinator "
      "at %s; output in %s\n",
      job_.name().c_str(), o_.workers, min_workers_, o_.restarts.max_restarts, address_.c_str(),
      layout_.output_dir.c_str());
  for (int i = 0; i < o_.workers; ++i) SpawnWorker(i);
  std::fflush(stdout);

  handled_interrupts_ = interrupts_.load();
  last_progress_ = Clock::now();
  while (Round()) {
  }
  group_.WaitForOutput();  // every child's last lines come before the verdict
  return Verdict();
}

// The verdict, from the coordinator's durable state (it has exited).
int JobLauncher::Verdict() const {
  const PreviousRun final_state = InspectPreviousRun(layout_, job_in_);
  std::string failure = final_state.kind == PreviousRun::Kind::kFailed ? final_state.detail : "";
  if (failure.empty() && last_status_) failure = JobFailureText(*last_status_);
  const int coord_rc = *coord_rc_;
  const bool completed = final_state.kind == PreviousRun::Kind::kCompleted && coord_rc == 0;
  const std::string where = "state and checkpoints in " + layout_.state_dir;
  if (handled_interrupts_ > 0) {
    const bool clean = coord_rc == 0 && crash_after_end_.empty();
    std::printf("retort-run: %s after %s (interrupted); %s\n", clean ? "stopped" : "FAILED",
                Took().c_str(), where.c_str());
    return clean ? 0 : 1;
  }
  if (!cannot_continue_.empty()) {
    std::printf("retort-run: FAILED after %s: %s\n", Took().c_str(), cannot_continue_.c_str());
    return 1;
  }
  if (final_state.kind == PreviousRun::Kind::kFailed || coord_rc == 3) {
    std::printf("retort-run: FAILED after %s: job failed: %s\n", Took().c_str(),
                failure.empty() ? DescribeCoordinatorExit(coord_rc).c_str() : failure.c_str());
    return 1;
  }
  if (completed) {
    if (std::string r = ResultSummary(layout_.output_dir); !r.empty())
      std::printf("retort-run: result: %s; results in %s\n", r.c_str(), layout_.output_dir.c_str());
    if (!crash_after_end_.empty()) {
      std::printf("retort-run: FAILED after %s: the job completed, but %s\n", Took().c_str(),
                  crash_after_end_.c_str());
      return 1;
    }
    std::printf(
        "retort-run: finished after %s%s; results in %s; %s\n", Took().c_str(),
        deaths_.empty()
            ? ""
            : (" (" + std::to_string(deaths_.size()) + " worker failure(s) survived)").c_str(),
        layout_.output_dir.c_str(), where.c_str());
    return 0;
  }
  if (coord_rc != 0) {
    std::printf("retort-run: FAILED after %s: %s%s%s\n", Took().c_str(),
                DescribeCoordinatorExit(coord_rc).c_str(), failure.empty() ? "" : ": ",
                failure.c_str());
    return 1;
  }
  if (!stopped_because_.empty() && final_state.kind == PreviousRun::Kind::kStopped) {
    std::printf("retort-run: stopped after %s (%s); %s\n", Took().c_str(), stopped_because_.c_str(),
                where.c_str());
    return crash_after_end_.empty() ? 0 : 1;
  }
  std::printf("retort-run: FAILED after %s: the coordinator exited with the job %s\n",
              Took().c_str(),
              final_state.kind == PreviousRun::Kind::kStopped ? "stopped" : "not completed");
  return 1;
}

}  // namespace retort::tools
