#include "tools/report/step_logs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace retort::report {

double StepLine::phase(const char* name) const {
  for (int i = 0; i < kPhaseCount; ++i)
    if (std::string(kPhaseNames[i]) == name) return phase_s[i];
  return 0;
}

std::vector<StepLine> WorkerLog::Latest() const {
  std::map<int64_t, StepLine> by_step;
  for (const StepLine& l : lines) by_step[l.step] = l;
  std::vector<StepLine> out;
  for (auto& [step, l] : by_step) out.push_back(l);
  return out;
}

std::vector<int64_t> WorkerLog::Rollbacks() const {
  std::vector<int64_t> out;
  for (size_t i = 1; i < lines.size(); ++i)
    if (lines[i].step <= lines[i - 1].step) out.push_back(lines[i].step);
  return out;
}

namespace {

double Num(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

WorkerLog ParseWorkerLog(const std::string& name, const std::string& text, int* malformed) {
  WorkerLog log;
  log.name = name;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number()) {
      ++*malformed;
      continue;
    }
    StepLine s;
    s.step = j["step"].get<int64_t>();
    s.generation = static_cast<uint64_t>(Num(j, "generation"));
    s.rank = static_cast<int>(Num(j, "rank"));
    s.world_size = static_cast<int>(Num(j, "world_size"));
    s.loss = Num(j, "loss");
    s.lr = Num(j, "lr");
    s.samples_per_second = Num(j, "samples_per_second");
    s.step_s = Num(j, "step_s");
    s.local_batch = static_cast<int64_t>(Num(j, "local_batch"));
    s.skipped = j.value("skipped", false);
    for (int i = 0; i < kPhaseCount; ++i)
      s.phase_s[i] = Num(j, (std::string(kPhaseNames[i]) + "_s").c_str());
    s.data_start_unix_us = static_cast<int64_t>(Num(j, "data_start_unix_us"));
    s.end_unix_us = static_cast<int64_t>(Num(j, "end_unix_us"));
    log.lines.push_back(s);
  }
  return log;
}

StatusOr<RunLogs> ReadRunLogs(const std::string& run_dir) {
  namespace fs = std::filesystem;
  RunLogs run;
  run.dir = run_dir;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return NotFoundError("run folder " + run_dir + " not found");
  const fs::path steps = fs::path(run_dir) / "steps";
  std::vector<fs::path> files;
  if (fs::is_directory(steps, ec))
    for (const auto& e : fs::directory_iterator(steps, ec))
      if (e.path().extension() == ".jsonl") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty())
    return NotFoundError(run_dir + " has no step logs (steps/*.jsonl, written by every worker)");
  for (const auto& f : files) {
    WorkerLog log = ParseWorkerLog(f.stem().string(), ReadFile(f), &run.malformed_lines);
    if (!log.lines.empty()) run.workers.push_back(std::move(log));
  }
  if (run.workers.empty()) return NotFoundError(run_dir + "/steps/ holds no step lines");
  auto result = nlohmann::json::parse(ReadFile(fs::path(run_dir) / "result.json"), nullptr, false);
  if (result.is_object()) {
    run.job_name = result.value("job", "");
    if (result.contains("student_top1") && result["student_top1"].is_number())
      run.student_top1 = result["student_top1"].get<double>();
    if (result.contains("teacher_top1") && result["teacher_top1"].is_number())
      run.teacher_top1 = result["teacher_top1"].get<double>();
  }
  if (run.job_name.empty()) {
    auto job = nlohmann::json::parse(ReadFile(fs::path(run_dir) / "job.json"), nullptr, false);
    if (job.is_object()) run.job_name = job.value("name", "");
  }
  return run;
}

}  // namespace retort::report
