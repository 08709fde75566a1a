#include "worker/step_log.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/logging.h"

namespace retort::worker {

StepLog::StepLog(std::string output_dir, std::string node, int local_rank)
    : dir_(std::move(output_dir) + "/steps"), node_(std::move(node)), local_rank_(local_rank) {
  path_ = dir_ + "/" + node_ + "-" + std::to_string(local_rank_) + ".jsonl";
}

void StepLog::OnStep(const StepRecord& r) {
  if (failed_) return;
  if (!out_.is_open()) {
    Status s = MakeDirectories(dir_);
    if (s.ok()) out_.open(path_, std::ios::app);
    if (!s.ok() || !out_) {
      LOG_WARN("trainer") << "cannot write the step log " << path_ << "; going on without it";
      failed_ = true;
      return;
    }
  }
  nlohmann::json j{{"step", r.step},
                   {"epoch", r.epoch},
                   {"generation", r.generation},
                   {"rank", r.rank},
                   {"world_size", r.world_size},
                   {"node", node_},
                   {"local_rank", local_rank_},
                   {"loss", r.loss},
                   {"lr", r.learning_rate},
                   {"grad_norm", std::isfinite(r.grad_norm) ? nlohmann::json(r.grad_norm)
                                                            : nlohmann::json(nullptr)},
                   {"skipped", r.skipped},
                   {"samples_per_second", r.samples_per_second},
                   {"step_s", r.step_seconds},
                   {"local_batch", r.local_batch},
                   {"compute_samples_per_second", r.compute_samples_per_second},
                   {"data_start_unix_us", r.data_start_unix_us},
                   {"end_unix_us", r.end_unix_us}};
  const auto phases = PhaseSeconds(r);
  for (int i = 0; i < metrics::kStepPhaseCount; ++i)
    j[std::string(metrics::kStepPhaseNames[i]) + "_s"] = phases[i];
  out_ << j.dump() << '\n';
  out_.flush();
}

}  // namespace retort::worker
