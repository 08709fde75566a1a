#include "collectives/communicator.h"

#include <initializer_list>
#include <string>

#include "collectives/executor.h"
#include "collectives/validate.h"

namespace retort::collectives {

namespace {

// Completes at once with `valid` when it is an error; otherwise issues the operation.
template <typename Issue>
WorkPtr IssueIfValid(const char* op, const Status& valid, Issue&& issue) {
  if (!valid.ok()) return CompletedWork(op, valid);
  return issue();
}

// The first failed check of `checks`, or OK.
Status FirstError(std::initializer_list<Status> checks) {
  for (const Status& s : checks)
    if (!s.ok()) return s;
  return Status::Ok();
}

}  // namespace

Status Communicator::CheckMemory(MemoryKind kind, const char* what) const {
  if (AcceptsMemory(kind)) return Status::Ok();
  std::string takes;
  for (MemoryKind k : {MemoryKind::kHost, MemoryKind::kPinnedHost, MemoryKind::kCudaDevice}) {
    if (!AcceptsMemory(k)) continue;
    takes += (takes.empty() ? "" : ", ") + std::string(MemoryKindName(k));
  }
  return InvalidArgumentError(std::string(what) + " is " + MemoryKindName(kind) +
                              " memory, which the " + name() + " communicator does not take (it " +
                              "takes " + (takes.empty() ? std::string("none") : takes) + ")" +
                              (IsHostMemory(kind) ? ""
                                                  : "; stage device buffers through host memory "
                                                    "(collectives/staged.h)"));
}

WorkPtr Communicator::ReduceScatterV(ConstBuffer input, MutableBuffer output,
                                     const std::vector<size_t>& counts, ReduceOp op,
                                     const CollectiveOptions& options) {
  return IssueIfValid("reduce_scatter",
                      FirstError({ValidateReduceScatterV(rank(), size(), input, output, counts),
                                  CheckMemory(input.memory, "reduce_scatter input"),
                                  CheckMemory(output.memory, "reduce_scatter output")}),
                      [&] { return DoReduceScatterV(input, output, counts, op, options); });
}

WorkPtr Communicator::AllGatherV(ConstBuffer input, MutableBuffer output,
                                 const std::vector<size_t>& counts,
                                 const CollectiveOptions& options) {
  return IssueIfValid("all_gather",
                      FirstError({ValidateAllGatherV(rank(), size(), input, output, counts),
                                  CheckMemory(input.memory, "all_gather input"),
                                  CheckMemory(output.memory, "all_gather output")}),
                      [&] { return DoAllGatherV(input, output, counts, options); });
}

WorkPtr Communicator::AllReduce(MutableBuffer data, ReduceOp op, const CollectiveOptions& options) {
  return IssueIfValid("all_reduce",
                      FirstError({CheckBuffer(data.data, data.count, "all_reduce data"),
                                  CheckMemory(data.memory, "all_reduce data")}),
                      [&] { return DoAllReduce(data, op, options); });
}

WorkPtr Communicator::Broadcast(MutableBuffer data, int root, const CollectiveOptions& options) {
  return IssueIfValid("broadcast",
                      FirstError({ValidateBroadcast(size(), data, root),
                                  CheckMemory(data.memory, "broadcast data")}),
                      [&] { return DoBroadcast(data, root, options); });
}

WorkPtr Communicator::Barrier(const CollectiveOptions& options) { return DoBarrier(options); }

Status Communicator::CheckPointToPoint(const char* op, int peer, const void* data, size_t count,
                                       MemoryKind memory) const {
  return FirstError({ValidatePointToPoint(rank(), size(), peer, data, count, op),
                     CheckMemory(memory, (std::string(op) + " data").c_str())});
}

WorkPtr Communicator::Send(ConstBuffer data, int peer, uint32_t tag,
                           const CollectiveOptions& options) {
  return IssueIfValid("send", CheckPointToPoint("send", peer, data.data, data.count, data.memory),
                      [&] { return DoSend(data, peer, tag, options); });
}

WorkPtr Communicator::Recv(MutableBuffer data, int peer, uint32_t tag,
                           const CollectiveOptions& options) {
  return IssueIfValid("recv", CheckPointToPoint("recv", peer, data.data, data.count, data.memory),
                      [&] { return DoRecv(data, peer, tag, options); });
}

WorkPtr Communicator::AllToAllV(ConstBuffer input, const std::vector<size_t>& send_counts,
                                MutableBuffer output, const std::vector<size_t>& recv_counts,
                                const CollectiveOptions& options) {
  return IssueIfValid(
      "all_to_all_v",
      FirstError({ValidateAllToAllV(size(), input, send_counts, output, recv_counts),
                  CheckMemory(input.memory, "all_to_all_v input"),
                  CheckMemory(output.memory, "all_to_all_v output")}),
      [&] { return DoAllToAllV(input, send_counts, output, recv_counts, options); });
}

WorkPtr Communicator::ReduceScatter(ConstBuffer input, MutableBuffer output, ReduceOp op,
                                    const CollectiveOptions& options) {
  return IssueIfValid(
      "reduce_scatter",
      ValidateEqualCounts("reduce_scatter", "input", input.count, "output", output.count, size()),
      [&] {
        return ReduceScatterV(input, output, std::vector<size_t>(size(), output.count), op,
                              options);
      });
}

WorkPtr Communicator::AllGather(ConstBuffer input, MutableBuffer output,
                                const CollectiveOptions& options) {
  return IssueIfValid(
      "all_gather",
      ValidateEqualCounts("all_gather", "output", output.count, "input", input.count, size()),
      [&] { return AllGatherV(input, output, std::vector<size_t>(size(), input.count), options); });
}

WorkPtr SubmitComposedStep(OpExecutor& executor, std::string description,
                           const CollectiveOptions& options,
                           std::chrono::milliseconds default_timeout, ReadyEventPtr* running_ready,
                           std::function<Status(Work&)> step) {
  const auto timeout = options.timeout.value_or(default_timeout);
  return executor.Submit(
      std::move(description), Deadline::After(timeout),
      [running_ready, ready = options.ready, step = std::move(step)](Work& work) {
        *running_ready = ready;
        Status status = step(work);
        *running_ready = nullptr;
        return status;
      });
}

Status AwaitSubOperation(Work& parent, const std::atomic<bool>& broken,
                         const std::function<WorkPtr(const CollectiveOptions&)>& issue,
                         const ReadyEventPtr& ready) {
  CollectiveOptions sub;
  sub.ready = ready;
  sub.timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(parent.deadline().Remaining());
  WorkPtr work = issue(sub);
  for (;;) {
    Status s = work->Wait(Deadline::AfterMs(20));
    if (work->IsCompleted()) return s;
    if (parent.abort_requested() || broken.load()) work->Abort();
  }
}

}  // namespace retort::collectives
