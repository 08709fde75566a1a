#include "worker/shard_comm_adapter.h"

namespace retort::worker {
namespace {

class WorkHandle final : public trainer::CommHandle {
 public:
  explicit WorkHandle(collectives::WorkPtr work) : work_(std::move(work)) {}
  Status Wait(Deadline deadline) override { return work_->Wait(deadline); }

 private:
  collectives::WorkPtr work_;
};

std::vector<size_t> ToSizes(const std::vector<int64_t>& counts) {
  return std::vector<size_t>(counts.begin(), counts.end());
}

size_t Sum(const std::vector<int64_t>& counts) {
  size_t total = 0;
  for (auto c : counts) total += static_cast<size_t>(c);
  return total;
}

}  // namespace

std::unique_ptr<trainer::CommHandle> CommunicatorShardComm::ReduceScatterV(
    const float* in, float* out, std::vector<int64_t> counts) {
  const size_t mine = static_cast<size_t>(counts[comm_->rank()]);
  return std::make_unique<WorkHandle>(comm_->ReduceScatterV(
      {in, Sum(counts), collectives::DataType::kFloat32},
      {out, mine, collectives::DataType::kFloat32}, ToSizes(counts), collectives::ReduceOp::kSum));
}

std::unique_ptr<trainer::CommHandle> CommunicatorShardComm::AllGatherV(
    const float* in, float* out, std::vector<int64_t> counts) {
  const size_t mine = static_cast<size_t>(counts[comm_->rank()]);
  return std::make_unique<WorkHandle>(
      comm_->AllGatherV({in, mine, collectives::DataType::kFloat32},
                        {out, Sum(counts), collectives::DataType::kFloat32}, ToSizes(counts)));
}

std::unique_ptr<trainer::CommHandle> CommunicatorShardComm::AllReduce(float* data, int64_t count) {
  return std::make_unique<WorkHandle>(
      comm_->AllReduce({data, static_cast<size_t>(count), collectives::DataType::kFloat32},
                       collectives::ReduceOp::kSum));
}

}  // namespace retort::worker
