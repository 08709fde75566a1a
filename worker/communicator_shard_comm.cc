#include "worker/communicator_shard_comm.h"

#include <chrono>

namespace retort::worker {
namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class WorkHandle : public trainer::CommHandle {
 public:
  WorkHandle(collectives::WorkPtr work, collectives::DeviceEvents* events)
      : work_(std::move(work)), events_(events) {}
  Status Wait(Deadline deadline) override { return work_->Wait(deadline); }
  Status StreamWait(Deadline deadline, bool* host_waited) override {
    if (events_ == nullptr) return trainer::CommHandle::StreamWait(deadline, host_waited);
    return work_->StreamWait(*events_, deadline, host_waited);
  }

 private:
  collectives::WorkPtr work_;
  collectives::DeviceEvents* const events_;
};

// Reports the collective to a listener when its wait returns.
class ListenedHandle final : public WorkHandle {
 public:
  ListenedHandle(collectives::WorkPtr work, collectives::DeviceEvents* events,
                 CollectiveListener* listener, const char* op, int64_t elements)
      : WorkHandle(std::move(work), events),
        listener_(listener),
        op_(op),
        elements_(elements),
        start_us_(NowUs()) {}
  Status Wait(Deadline deadline) override {
    Status s = WorkHandle::Wait(deadline);
    listener_->OnCollective(op_, elements_, start_us_, NowUs());
    return s;
  }

 private:
  CollectiveListener* const listener_;
  const char* const op_;
  const int64_t elements_;
  const int64_t start_us_;
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
  auto options = IssueOptions();
  if (!options.ok())
    return Wrap(collectives::CompletedWork("reduce_scatter", options.status()), "reduce_scatter",
                0);
  return Wrap(comm_->ReduceScatterV({in, Sum(counts), collectives::DataType::kFloat32, buffers_},
                                    {out, mine, collectives::DataType::kFloat32, buffers_},
                                    ToSizes(counts), collectives::ReduceOp::kSum, *options),
              "reduce_scatter", static_cast<int64_t>(Sum(counts)));
}

std::unique_ptr<trainer::CommHandle> CommunicatorShardComm::AllGatherV(
    const float* in, float* out, std::vector<int64_t> counts) {
  const size_t mine = static_cast<size_t>(counts[comm_->rank()]);
  auto options = IssueOptions();
  if (!options.ok())
    return Wrap(collectives::CompletedWork("all_gather", options.status()), "all_gather", 0);
  return Wrap(comm_->AllGatherV({in, mine, collectives::DataType::kFloat32, buffers_},
                                {out, Sum(counts), collectives::DataType::kFloat32, buffers_},
                                ToSizes(counts), *options),
              "all_gather", static_cast<int64_t>(Sum(counts)));
}

std::unique_ptr<trainer::CommHandle> CommunicatorShardComm::AllReduce(float* data, int64_t count) {
  auto options = IssueOptions();
  if (!options.ok())
    return Wrap(collectives::CompletedWork("all_reduce", options.status()), "all_reduce", 0);
  return Wrap(comm_->AllReduce(
                  {data, static_cast<size_t>(count), collectives::DataType::kFloat32, buffers_},
                  collectives::ReduceOp::kSum, *options),
              "all_reduce", count);
}

StatusOr<collectives::CollectiveOptions> CommunicatorShardComm::IssueOptions() {
  collectives::CollectiveOptions options;
  if (events_ != nullptr && buffers_ == collectives::MemoryKind::kCudaDevice) {
    RETORT_ASSIGN_OR_RETURN(options.ready, events_->RecordReady());
  }
  return options;
}

std::unique_ptr<trainer::CommHandle> CommunicatorShardComm::Wrap(collectives::WorkPtr work,
                                                                 const char* op, int64_t elements) {
  if (!listener_) return std::make_unique<WorkHandle>(std::move(work), events_);
  return std::make_unique<ListenedHandle>(std::move(work), events_, listener_, op, elements);
}

}  // namespace retort::worker
