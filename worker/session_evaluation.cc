// Evaluation during training (the spec's `evaluation`): after a due step every rank evaluates
// its contiguous slice of the test split, the counts are summed with one all-reduce, and rank 0
// logs the result, appends it to <output_dir>/evaluations.jsonl, reports it to the coordinator
// (status, metrics, top) and, with export_best, keeps the best weights in <output_dir>/best/.
// Evaluation does not touch the training state (inference mode, the student's mode restored),
// so the loss curve is the one of a job that does not evaluate.
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/logging.h"
#include "common/unix_time.h"
#include "trainer/evaluation.h"
#include "trainer/safetensors.h"
#include "worker/evaluation_schedule.h"
#include "worker/job_setup.h"
#include "worker/training_session.h"

namespace retort::worker {
namespace {

// A rank's slice of the test split stays in memory between evaluations up to this size; a
// larger one is read again each time, one batch at a time.
constexpr int64_t kMaxCachedEvalBytes = int64_t{256} << 20;
constexpr int64_t kEvalBatch = 500;

// The top-1 of <dir>/evaluation.json written by an earlier best export (-1 when none).
double BestTop1OnDisk(const std::string& dir) {
  auto text = ReadFileToString(dir + "/evaluation.json");
  if (!text.ok()) return -1;
  try {
    return nlohmann::json::parse(*text).at("top1").get<double>();
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

StatusOr<trainer::TopKCounts> TrainingSession::CountEvalSlice(int64_t begin, int64_t end) {
  const auto shape = test_set_->shape();
  const int64_t bytes = (end - begin) * shape.channels * shape.height * shape.width * 4;
  const bool cache = bytes <= kMaxCachedEvalBytes;
  if (cache && eval_range_ == std::make_pair(begin, end))
    return trainer::CountTopKCorrect(kd_step_->student(), eval_batches_);
  eval_batches_.clear();
  eval_range_ = {-1, -1};
  trainer::TopKCounts sum;
  for (int64_t i = begin; i < end; i += kEvalBatch) {
    failure_phase_ = FailurePhase::kData;  // a corrupt test sample fails every try
    RETORT_ASSIGN_OR_RETURN(auto batches,
                            ReadEvalBatches(*test_set_, i, std::min(end, i + kEvalBatch)));
    failure_phase_ = FailurePhase::kCommunication;
    const trainer::TopKCounts c = trainer::CountTopKCorrect(kd_step_->student(), batches);
    sum.top1 += c.top1;
    sum.top_k += c.top_k;
    sum.total += c.total;
    if (cache)
      for (auto& b : batches) eval_batches_.push_back(std::move(b));
  }
  if (cache) eval_range_ = {begin, end};
  return sum;
}

Status TrainingSession::EvaluateIfDue(const Assignment& a) {
  const v1::EvaluationSpec& spec = job_.evaluation();
  if (!EvaluationDue(spec, global_step_, loader_->sampler().steps_per_epoch())) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = EvaluationSamples(spec, test_set_->size());
  const int world = comm_->size(), rank = comm_->rank();
  const int64_t begin = n * rank / world, end = n * (rank + 1) / world;
  RETORT_ASSIGN_OR_RETURN(const trainer::TopKCounts mine, CountEvalSlice(begin, end));
  // float32 sums are exact below 2^24 samples.
  float counts[3] = {static_cast<float>(mine.top1), static_cast<float>(mine.top_k),
                     static_cast<float>(mine.total)};
  RETORT_RETURN_IF_ERROR(Await(
      comm_->AllReduce({counts, 3, collectives::DataType::kFloat32}, collectives::ReduceOp::kSum)));
  if (a.rank != 0 || counts[2] <= 0) return Status::Ok();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  v1::EvaluationResult r;
  r.set_step(global_step_);
  r.set_epoch(position_.epoch);
  r.set_samples(static_cast<int64_t>(counts[2]));
  r.set_top1(counts[0] / counts[2]);
  r.set_top5(counts[1] / counts[2]);
  LOG_INFO("trainer") << "evaluation at step " << global_step_ << ": top-1 " << r.top1()
                      << ", top-5 " << r.top5() << " on " << r.samples() << " test samples ("
                      << seconds << " s on " << world << " rank(s))";
  nlohmann::json line{{"step", r.step()},       {"epoch", r.epoch()},
                      {"samples", r.samples()}, {"top1", r.top1()},
                      {"top5", r.top5()},       {"seconds", seconds},
                      {"world_size", world},    {"time_unix_ms", UnixMillisNow()}};
  {
    std::ofstream out(output_dir_ + "/evaluations.jsonl", std::ios::app);
    out << line.dump() << '\n';
    if (!out.good())
      LOG_WARN("trainer") << "cannot append to " << output_dir_ << "/evaluations.jsonl";
  }
  if (agent_) agent_->ReportEvaluation(r);
  if (!spec.export_best()) return Status::Ok();
  const std::string best_dir = output_dir_ + "/best";
  if (best_top1_ < 0) best_top1_ = BestTop1OnDisk(best_dir);
  if (r.top1() <= best_top1_) return Status::Ok();
  // The weights first, then the record naming them: a crash between the two leaves the older
  // record, whose top-1 the new weights beat anyway.
  RETORT_RETURN_IF_ERROR(MakeDirectories(best_dir));
  RETORT_RETURN_IF_ERROR(
      trainer::ExportModelSafetensors(kd_step_->student(), best_dir + "/student.safetensors"));
  RETORT_RETURN_IF_ERROR(WriteFileAtomically(best_dir + "/evaluation.json", line.dump() + "\n"));
  best_top1_ = r.top1();
  LOG_INFO("trainer") << "best top-1 so far: exported to " << best_dir << "/student.safetensors";
  return Status::Ok();
}

}  // namespace retort::worker
