// A run directory's step logs as the report reads them: every rank's
// <run>/steps/<node>-<local_rank>.jsonl (format: worker/step_log.h), the job's result.json and
// job.json when present. Std + nlohmann only (no gRPC, no torch).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "metrics/step_phases.h"

namespace retort::report {

// The phases of a step, in the order a step runs them (worker/step_log.h field names without
// the "_s"): metrics/step_phases.h.
inline constexpr int kPhaseCount = metrics::kStepPhaseCount;
inline constexpr const auto& kPhaseNames = metrics::kStepPhaseNames;

struct StepLine {
  int64_t step = 0;
  uint64_t generation = 0;
  int rank = 0;
  int world_size = 0;
  double loss = 0;
  double lr = 0;
  double samples_per_second = 0;
  double step_s = 0;
  // This rank's share of the global batch (0 in logs written before it was recorded).
  int64_t local_batch = 0;
  bool skipped = false;
  double phase_s[kPhaseCount] = {};  // indexed like kPhaseNames
  int64_t data_start_unix_us = 0;
  int64_t end_unix_us = 0;
  double phase(const char* name) const;
};

// One worker process's log (a rank number may change between generations).
struct WorkerLog {
  std::string name;  // "<node>-<local_rank>" (the file's name)
  // In file order; a step re-run after a rollback appears again (the later line is the one
  // that counts: see Latest()).
  std::vector<StepLine> lines;
  // One line per step, the last one logged for it, by step.
  std::vector<StepLine> Latest() const;
  // Steps at which this worker rolled back (a step not greater than the one before it).
  std::vector<int64_t> Rollbacks() const;
};

struct RunLogs {
  std::string dir;
  std::vector<WorkerLog> workers;  // by name
  std::string job_name;
  std::optional<double> student_top1, teacher_top1;
  int malformed_lines = 0;  // lines that are not step objects (a torn last line, ...)
};

// Reads RUN_DIR. NOT_FOUND naming the folder when it has no steps/*.jsonl.
StatusOr<RunLogs> ReadRunLogs(const std::string& run_dir);
// Parses one step log's text (exposed for tests).
WorkerLog ParseWorkerLog(const std::string& name, const std::string& text, int* malformed);

}  // namespace retort::report
