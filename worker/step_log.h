// StepLog: every rank's own step log, one JSON object per line, appended to
// <output_dir>/steps/<node>-<local_rank>.jsonl (so a run's directory holds every rank's phases,
// which `retortctl report` reads). Fields:
//   step, epoch, generation, rank, world_size, node, local_rank, loss, lr, grad_norm (null when
//   not finite), skipped, samples_per_second, step_s, local_batch, compute_samples_per_second,
//   data_wait_s, teacher_forward_s,
//   student_forward_s, backward_s, comm_exposed_s, optimizer_s, checkpoint_s,
//   data_start_unix_us, end_unix_us.
// A rank that rolls back after a failure logs the re-run steps again (the later line wins).
//
// Threading: the training thread only. Errors opening the file are logged once; training goes on.
#pragma once

#include <fstream>
#include <string>

#include "worker/step_record.h"

namespace retort::worker {

class StepLog final : public StepObserver {
 public:
  StepLog(std::string output_dir, std::string node, int local_rank);
  void OnStep(const StepRecord& r) override;
  const std::string& path() const { return path_; }

 private:
  const std::string dir_, node_;
  const int local_rank_;
  std::string path_;
  std::ofstream out_;
  bool failed_ = false;
};

}  // namespace retort::worker
