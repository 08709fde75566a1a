#include "worker/job_result.h"

#include "common/file_util.h"

namespace retort::worker {

nlohmann::json JobResultJson(const JobResult& r) {
  nlohmann::json j{{"job", r.job},
                   {"steps", r.steps},
                   {"evaluated", r.evaluation.has_value()},
                   {"student", r.student},
                   {"student_weights", r.student_weights},
                   {"metrics", r.metrics}};
  if (r.evaluation) {
    j["test_samples"] = r.evaluation->test_samples;
    j["student_top1"] = r.evaluation->student_top1;
    j["eval_seconds"] = r.evaluation->seconds;
  }
  if (r.teacher) {
    j["teacher"] = *r.teacher;
    if (r.evaluation) j["teacher_top1"] = r.evaluation->teacher_top1;
  }
  return j;
}

Status WriteJobResult(const std::string& path, const JobResult& result) {
  return WriteFileAtomically(path, JobResultJson(result).dump(2) + "\n");
}

}  // namespace retort::worker
