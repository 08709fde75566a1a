#include "tools/run_layout.h"

#include <filesystem>

#include "common/file_util.h"
#include "coordinator/job_state_file.h"
#include "tools/launcher_policy.h"

namespace retort::tools {

RunLayout ResolveLayout(const std::string& output_flag, const std::string& state_flag,
                        const v1::JobSpec& job) {
  RunLayout l;
  l.output_dir = !output_flag.empty()        ? output_flag
                 : !job.output_dir().empty() ? job.output_dir()
                                             : "retort-out";
  l.state_dir = state_flag.empty() ? l.output_dir + "/state" : state_flag;
  l.checkpoint_dir = job.checkpoint().dir();
  return l;
}

PreviousRun InspectPreviousRun(const RunLayout& layout, const v1::JobSpec& job) {
  PreviousRun p;
  p.results_dir = layout.output_dir;
  coordinator::JobStateFile store(layout.state_dir);
  if (!PathExists(store.path())) return p;
  auto state = store.Load();
  if (!state.ok()) {
    p.kind = PreviousRun::Kind::kUnreadable;
    p.detail = state.status().message();
    return p;
  }
  p.job_name = state->job().name();
  p.last_checkpoint_step = state->last_checkpoint_step();
  if (!state->job().output_dir().empty()) p.results_dir = state->job().output_dir();
  if (state->job().name() != job.name()) {
    p.kind = PreviousRun::Kind::kOtherJob;
    return p;
  }
  switch (state->state()) {
    case v1::JOB_STATE_COMPLETED:
      p.kind = PreviousRun::Kind::kCompleted;
      break;
    case v1::JOB_STATE_STOPPED:
      p.kind = PreviousRun::Kind::kStopped;
      break;
    case v1::JOB_STATE_FAILED:
      p.kind = PreviousRun::Kind::kFailed;
      p.detail = JobFailureText(*state);
      break;
    default:
      p.kind = PreviousRun::Kind::kResumable;
  }
  return p;
}

StatusOr<std::vector<std::string>> RemovePreviousRun(const RunLayout& layout) {
  std::vector<std::string> removed;
  auto remove = [&](const std::filesystem::path& path) -> Status {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return Status::Ok();
    std::filesystem::remove_all(path, ec);
    if (ec) return InternalError("--fresh: cannot remove " + path.string() + ": " + ec.message());
    removed.push_back(path.string());
    return Status::Ok();
  };
  RETORT_RETURN_IF_ERROR(remove(layout.state_dir));
  if (!layout.checkpoint_dir.empty()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(layout.checkpoint_dir, ec))
      if (e.path().filename().string().rfind("ckpt-", 0) == 0)
        RETORT_RETURN_IF_ERROR(remove(e.path()));
  }
  for (const char* name :
       {"metrics.jsonl", "result.json", "student.safetensors", "steps", "traces", "report.html"})
    RETORT_RETURN_IF_ERROR(remove(std::filesystem::path(layout.output_dir) / name));
  return removed;
}

}  // namespace retort::tools
