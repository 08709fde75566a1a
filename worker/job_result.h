// The job's result file (<output_dir>/result.json), written by rank 0 when a job completes, and
// the RESULT line the worker logs with it. retort-run and the tests read it.
//
// "Not evaluated" (evaluate: false, or an empty test split) is not a top-1 of 0: such a result
// says "evaluated": false and carries no top-1, test_samples or eval_seconds fields.
// Torch-free; any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/status.h"

namespace retort::worker {

struct JobResult {
  std::string job;
  int64_t steps = 0;
  std::string student;                 // the student's description
  std::string student_weights;         // path of the exported weights
  std::string metrics;                 // path of metrics.jsonl
  std::optional<std::string> teacher;  // the teacher's description (none: supervised)
  // Set only when the job evaluated on at least one test sample.
  struct Evaluation {
    int64_t test_samples = 0;
    double student_top1 = 0;
    double teacher_top1 = 0;  // written only when there is a teacher
    double seconds = 0;
  };
  std::optional<Evaluation> evaluation;
};

nlohmann::json JobResultJson(const JobResult& result);
// Writes JobResultJson atomically to `path` (a reader never sees half a file).
Status WriteJobResult(const std::string& path, const JobResult& result);

}  // namespace retort::worker
