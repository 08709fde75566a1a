#include "worker/trace_recorder.h"

#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/logging.h"

namespace retort::worker {

TraceRecorder::TraceRecorder(std::string dir, std::string node, int local_rank)
    : dir_(std::move(dir)), node_(std::move(node)), local_rank_(local_rank) {}

void TraceRecorder::SetWindow(int64_t first, int64_t last) {
  MutexLock lock(mu_);
  if (first < 1 || last < first) return;
  if ((first == first_ && last == last_) || (first == done_first_ && last == done_last_)) return;
  if (!events_.empty()) WriteLocked();
  first_ = first;
  last_ = last;
  rank_ = -1;
  events_.clear();
}

void TraceRecorder::BeginStep(int64_t step) {
  MutexLock lock(mu_);
  current_step_ = step;
}

void TraceRecorder::OnCollective(const char* op, int64_t elements, int64_t start_us,
                                 int64_t end_us) {
  MutexLock lock(mu_);
  if (!InWindowLocked(current_step_)) return;
  events_.push_back(
      {op, "collective", 'X', 2, start_us, end_us - start_us, current_step_, elements});
}

void TraceRecorder::OnGenerationStarted(uint64_t generation, int rank, int world_size,
                                        int64_t unix_us) {
  MutexLock lock(mu_);
  current_rank_ = rank;
  if (first_ == 0) return;
  events_.push_back({"generation " + std::to_string(generation) + ": rank " + std::to_string(rank) +
                         " of " + std::to_string(world_size),
                     "membership", 'i', 1, unix_us, 0, current_step_, 0});
}

void TraceRecorder::OnStep(const StepRecord& r) {
  MutexLock lock(mu_);
  current_rank_ = r.rank;
  if (!InWindowLocked(r.step)) return;
  if (rank_ < 0) rank_ = r.rank;
  const auto seconds_of = PhaseSeconds(r);
  int64_t ts = r.data_start_unix_us;
  events_.push_back({"step " + std::to_string(r.step), "step", 'X', 0, r.data_start_unix_us,
                     r.end_unix_us - r.data_start_unix_us, r.step, 0});
  for (int i = 0; i < metrics::kStepPhaseCount; ++i) {
    const double seconds = seconds_of[i];
    if (seconds <= 0) continue;
    const int64_t dur = static_cast<int64_t>(seconds * 1e6);
    events_.push_back({metrics::kStepPhaseNames[i], "phase", 'X', 1, ts, dur, r.step, 0});
    ts += dur;
  }
  if (r.step == last_) WriteLocked();
}

void TraceRecorder::Flush() {
  MutexLock lock(mu_);
  if (!events_.empty()) WriteLocked();
}

std::string TraceRecorder::last_written() const {
  MutexLock lock(mu_);
  return last_written_;
}

void TraceRecorder::WriteLocked() {
  const int pid = rank_ >= 0 ? rank_ : current_rank_;
  const std::string label =
      "rank " + std::to_string(pid) + " (" + node_ + "/" + std::to_string(local_rank_) + ")";
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", label}}}});
  events.push_back(
      {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
  const char* threads[] = {"steps", "phases", "collectives"};
  for (int tid = 0; tid < 3; ++tid)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", tid},
                      {"args", {{"name", threads[tid]}}}});
  for (const Event& e : events_) {
    nlohmann::json j{{"name", e.name}, {"cat", e.cat},  {"ph", std::string(1, e.ph)}, {"pid", pid},
                     {"tid", e.tid},   {"ts", e.ts_us}, {"args", {{"step", e.step}}}};
    if (e.ph == 'X') j["dur"] = e.dur_us;
    if (e.ph == 'i') j["s"] = "p";
    if (e.elements > 0) j["args"]["elements"] = e.elements;
    events.push_back(std::move(j));
  }
  nlohmann::json doc{{"traceEvents", std::move(events)},
                     {"displayTimeUnit", "ms"},
                     {"otherData",
                      {{"first_step", first_},
                       {"last_step", last_},
                       {"rank", pid},
                       {"node", node_},
                       {"local_rank", local_rank_}}}};
  const std::string path = dir_ + "/trace-" + std::to_string(first_) + "-" + std::to_string(last_) +
                           "-" + node_ + "-" + std::to_string(local_rank_) + ".json";
  Status s = MakeDirectories(dir_);
  if (s.ok()) s = WriteFileAtomically(path, doc.dump() + "\n");
  if (!s.ok()) {
    LOG_WARN("trainer") << "cannot write the step trace " << path << ": " << s;
  } else {
    LOG_INFO("trainer") << "step trace of steps " << first_ << " to " << last_ << " written to "
                        << path;
    last_written_ = path;
  }
  done_first_ = first_;
  done_last_ = last_;
  first_ = last_ = 0;
  events_.clear();
}

}  // namespace retort::worker
