#include "collectives/nccl/nccl_communicator.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <thread>

#include "collectives/bootstrap_wait.h"
#include "collectives/nccl/cuda_events.h"
#include "collectives/nccl/nccl_check.h"
#include "common/logging.h"

namespace retort::collectives::nccl {
namespace {

constexpr char kRecordMagic[] = "retort-nccl1";

ncclDataType_t ToNccl(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kFloat16:
      return ncclFloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t ToNccl(ReduceOp op) { return op == ReduceOp::kAverage ? ncclAvg : ncclSum; }

// Waits until a non-blocking communicator finished its pending call, the deadline passed or
// `cancelled` holds (the caller then aborts the communicator).
Status AwaitComm(ncclComm_t comm, Deadline deadline, const std::string& what,
                 const std::function<bool()>& cancelled = {},
                 const std::function<Status()>& cancelled_error = {}) {
  return PollUntilDone(
      [&]() -> StatusOr<bool> {
        ncclResult_t state = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(comm, &state), what + ": ncclCommGetAsyncError");
        if (state == ncclSuccess) return true;
        if (state != ncclInProgress) return NcclError(state, what, __FILE__, __LINE__);
        return false;
      },
      deadline, cancelled, cancelled_error, what);
}

// Runs `calls` between ncclGroupStart and ncclGroupEnd and closes the group whatever `calls`
// returns: NCCL's group depth is per thread, and a group left open would defer every later
// NCCL call of this thread, the next generation's communicator set-up included.
Status Grouped(const std::function<Status()>& calls) {
  NCCL_CHECK(ncclGroupStart(), "ncclGroupStart");
  Status body = calls();
  const ncclResult_t ended = ncclGroupEnd();
  RETORT_RETURN_IF_ERROR(body);
  if (ended != ncclSuccess && ended != ncclInProgress)
    return NcclError(ended, "ncclGroupEnd", __FILE__, __LINE__);
  return Status::Ok();
}

}  // namespace

Status NcclError(ncclResult_t result, const std::string& what, const char* file, int line) {
  const std::string message = NativeErrorMessage(what, ncclGetErrorString(result), file, line);
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return InvalidArgumentError(message);
    case ncclRemoteError:
    case ncclSystemError:
      return UnavailableError(message);
    default:
      return InternalError(message);
  }
}

Status CudaError(cudaError_t error, const std::string& what, const char* file, int line) {
  return InternalError(NativeErrorMessage(what, cudaGetErrorString(error), file, line));
}

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

NcclCommunicator::NcclCommunicator(int rank, int size, uint64_t generation,
                                   const NcclCommunicatorOptions& o)
    : rank_(rank), size_(size), generation_(generation), options_(o) {}

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    BootstrapStore* store, int rank, int size, uint64_t generation,
    const NcclCommunicatorOptions& o) {
  if (size < 1 || rank < 0 || rank >= size) {
    return InvalidArgumentError("nccl: rank " + std::to_string(rank) + " of " +
                                std::to_string(size) + " is not a valid position");
  }
  if (CudaDeviceCount() == 0) return FailedPreconditionError("nccl: no CUDA device visible");
  const Deadline deadline = Deadline::After(o.bootstrap_timeout);
  CUDA_CHECK(cudaSetDevice(o.device), "nccl: selecting device " + std::to_string(o.device));
  const std::string key =
      (o.key_prefix.empty() ? "g" + std::to_string(generation) + "/nccl" : o.key_prefix) +
      "/unique_id";
  auto cancelled_error = [rank, size, generation](const std::string& waiting_for) {
    return AbortedError("nccl: bootstrap of generation " + std::to_string(generation) + " (rank " +
                        std::to_string(rank) + " of " + std::to_string(size) +
                        ") cancelled while waiting for " + waiting_for +
                        ": the communicator is obsolete (a newer generation was published)");
  };
  ncclUniqueId id;
  if (rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id), "nccl: ncclGetUniqueId");
    std::ostringstream record;
    record << kRecordMagic << ' ' << generation << ' ' << size << '\n';
    record.write(id.internal, sizeof(id.internal));
    RETORT_RETURN_IF_ERROR(store->Set(key, record.str(), deadline));
  } else {
    RETORT_ASSIGN_OR_RETURN(std::string value,
                            GetUnlessCancelled(store, key, deadline, o.cancelled, [&] {
                              return cancelled_error("the unique id under '" + key + "'");
                            }));
    const size_t newline = value.find('\n');
    std::istringstream header(value.substr(0, newline == std::string::npos ? 0 : newline));
    std::string magic;
    uint64_t record_generation = 0;
    int record_size = 0;
    header >> magic >> record_generation >> record_size;
    if (newline == std::string::npos || magic != kRecordMagic ||
        value.size() - newline - 1 != sizeof(id.internal)) {
      return DataLossError("nccl: store key '" + key + "' does not hold an NCCL unique id");
    }
    if (record_generation != generation || record_size != size) {
      return FailedPreconditionError(
          "nccl: unique id under '" + key + "' is for generation " +
          std::to_string(record_generation) + " with " + std::to_string(record_size) +
          " ranks; this communicator is generation " + std::to_string(generation) + " with " +
          std::to_string(size) + ": refused");
    }
    std::memcpy(id.internal, value.data() + newline + 1, sizeof(id.internal));
  }
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(rank, size, generation, o));
  cudaMemPoolProps pool_props{};
  pool_props.allocType = cudaMemAllocationTypePinned;
  pool_props.handleTypes = cudaMemHandleTypeNone;
  pool_props.location.type = cudaMemLocationTypeDevice;
  pool_props.location.id = o.device;
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaMemPoolCreate(&pool, &pool_props), "nccl: creating the scratch memory pool");
  c->scratch_pool_ = CudaMemPool(pool);
  uint64_t keep = UINT64_MAX;  // no trimming at synchronisations: the next step reuses it
  CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
             "nccl: configuring the scratch memory pool");
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "nccl: creating stream");
  c->stream_ = CudaStream(stream);
  cudaEvent_t event = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "nccl: creating event");
  c->caller_ready_ = CudaEvent(event);
  c->done_events_ = MakeCudaEventPool(o.device);
  void* scratch = nullptr;
  CUDA_CHECK(cudaMalloc(&scratch, sizeof(float)), "nccl: allocating barrier scratch");
  c->barrier_scratch_ = DeviceBuffer(scratch);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that a stuck initialization can be aborted at the deadline
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRankConfig(&comm, size, id, rank, &config), "nccl: ncclCommInitRank");
  c->comm_ = NcclComm(comm);
  Status initialized =
      AwaitComm(comm, deadline, "nccl: communicator initialization", o.cancelled,
                [&] { return cancelled_error("the other ranks' initialization"); });
  if (!initialized.ok()) {
    c->comm_.reset();  // ncclCommAbort: a stuck or obsolete initialization is not waited for
    return initialized;
  }
  c->watchdog_ = std::thread([raw = c.get()] { raw->Watchdog(); });
  if (o.warm_up) RETORT_RETURN_IF_ERROR(c->WarmUp(deadline));
  return c;
}

Status NcclCommunicator::WarmUp(Deadline deadline) {
  const NcclCallPlan plan = PlanWarmUp(size_, rank_);
  CollectiveOptions options;
  options.timeout =
      std::max(std::chrono::milliseconds(1),
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Remaining()));
  WorkPtr work = Enqueue("warm-up (connecting peers)", options, [&] {
    return Issue(plan, nullptr, nullptr, DataType::kFloat32, ReduceOp::kSum);
  });
  return work->Wait(deadline);
}

Status NcclCommunicator::Issue(const NcclCallPlan& plan, const void* input, void* output,
                               DataType dtype, ReduceOp op) {
  const size_t elem = DataTypeSize(dtype);
  void* scratch = nullptr;
  if (plan.scratch_elements > 0) {
    CUDA_CHECK(
        cudaMallocFromPoolAsync(&scratch, plan.scratch_elements * elem, scratch_pool_.get(),
                                stream_.get()),
        "nccl: allocating " + std::to_string(plan.scratch_elements * elem) + " bytes of scratch");
  }
  auto at = [&](const PlanRef& ref) -> char* {
    char* base = ref.buffer == PlanBuffer::kInput
                     ? const_cast<char*>(static_cast<const char*>(input))
                     : static_cast<char*>(ref.buffer == PlanBuffer::kOutput ? output : scratch);
    return base == nullptr ? nullptr : base + ref.offset * elem;
  };
  auto calls = [&]() -> Status {
    for (const NcclCall& c : plan.calls) {
      switch (c.kind) {
        case NcclCallKind::kCopy:
          CUDA_CHECK(cudaMemcpyAsync(at(c.recv), at(c.send), c.count * elem,
                                     cudaMemcpyDeviceToDevice, stream_.get()),
                     "nccl: " + Describe(c));
          break;
        case NcclCallKind::kReduceScatter:
          NCCL_CHECK(ncclReduceScatter(at(c.send), at(c.recv), c.count, ToNccl(dtype), ToNccl(op),
                                       comm_.get(), stream_.get()),
                     Describe(c));
          break;
        case NcclCallKind::kAllGather:
          NCCL_CHECK(ncclAllGather(at(c.send), at(c.recv), c.count, ToNccl(dtype), comm_.get(),
                                   stream_.get()),
                     Describe(c));
          break;
        case NcclCallKind::kAllReduce:
          NCCL_CHECK(ncclAllReduce(at(c.send), at(c.recv), c.count, ToNccl(dtype), ToNccl(op),
                                   comm_.get(), stream_.get()),
                     Describe(c));
          break;
        case NcclCallKind::kReduce:
          NCCL_CHECK(ncclReduce(at(c.send), at(c.recv), c.count, ToNccl(dtype), ToNccl(op), c.root,
                                comm_.get(), stream_.get()),
                     Describe(c));
          break;
        case NcclCallKind::kBroadcast:
          NCCL_CHECK(ncclBroadcast(at(c.send), at(c.recv), c.count, ToNccl(dtype), c.root,
                                   comm_.get(), stream_.get()),
                     Describe(c));
          break;
      }
    }
    return Status::Ok();
  };
  Status issued = plan.grouped ? Grouped(calls) : calls();
  // Stream-ordered: the memory returns to the pool once the calls above have run.
  if (scratch != nullptr) {
    const cudaError_t freed = cudaFreeAsync(scratch, stream_.get());
    if (issued.ok() && freed != cudaSuccess)
      issued = CudaError(freed, "nccl: freeing scratch", __FILE__, __LINE__);
  }
  return issued;
}

NcclCommunicator::~NcclCommunicator() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    if (!pending_.empty()) Break(AbortedError("nccl: communicator destroyed"));
  }
  cv_.NotifyAll();
  if (watchdog_.joinable()) watchdog_.join();
}

void NcclCommunicator::Break(const Status& reason) {
  if (broken_.ok()) broken_ = reason;
  comm_.reset();
  for (Pending& p : pending_) p.work->Complete(reason);
  pending_.clear();
}

void NcclCommunicator::Abort(const std::string& reason) {
  abort_requested_.store(true, std::memory_order_release);
  MutexLock lock(mu_);
  Break(AbortedError(reason));
}

WorkPtr NcclCommunicator::Enqueue(const std::string& description, const CollectiveOptions& options,
                                  const std::function<Status()>& enqueue) {
  const Deadline deadline = Deadline::After(options.timeout.value_or(options_.default_timeout));
  auto work =
      std::make_shared<Work>("nccl rank " + std::to_string(rank_) + ": " + description, deadline);
  MutexLock lock(mu_);
  if (!broken_.ok()) {
    work->Complete(AbortedError(work->description() +
                                ": communicator is broken after: " + broken_.ToString()));
    return work;
  }
  auto run = [&]() RETORT_REQUIRES(mu_) -> Status {
    CUDA_CHECK(cudaSetDevice(options_.device), "nccl: selecting device");
    // After the caller's ready event, recorded when the operation was issued (a composition
    // may run it much later); without one, after the caller's stream as it is now.
    cudaEvent_t after = options.ready != nullptr ? static_cast<cudaEvent_t>(options.ready->native())
                                                 : caller_ready_.get();
    if (options.ready == nullptr) {
      CUDA_CHECK(cudaEventRecord(caller_ready_.get(), options_.caller_stream),
                 "nccl: recording the caller's stream");
    }
    CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), after, 0),
               "nccl: ordering after the caller's stream");
    RETORT_RETURN_IF_ERROR(enqueue());
    RETORT_RETURN_IF_ERROR(AwaitComm(
        comm_.get(), deadline, description,
        [this] { return abort_requested_.load(std::memory_order_acquire); },
        [] {
          return AbortedError("nccl: aborted while waiting for the operation to be accepted");
        }));
    // The done event: the watchdog polls it, and a consumer's stream may wait for it
    // device-side (Work::StreamWait) instead of the host waiting for the Work.
    RETORT_ASSIGN_OR_RETURN(ReadyEventPtr done, RecordEvent(options_.device, *done_events_,
                                                            stream_.get(), ++operations_));
    work->SetDoneEvent(done);
    // A waiter queries the done event itself before it sleeps, so that a Wait for work the
    // device already finished (StepWaits::Confirm after the step's host read) returns at once
    // instead of at the watchdog's next tick. Completing here and in the watchdog is the same
    // verdict (the event finished: OK; errors break the communicator, which completes the
    // rest); Complete is idempotent. The waiting thread has selected this device (the
    // trainer's, trainer/device.h), so the query makes no context elsewhere.
    work->SetDriver([done](Work* w, Deadline) {
      if (cudaEventQuery(static_cast<cudaEvent_t>(done->native())) == cudaSuccess)
        w->Complete(Status::Ok());
    });
    pending_.push_back(Pending{work, std::move(done)});
    return Status::Ok();
  };
  Status status = run();
  if (!status.ok()) {
    status = status.WithContext(work->description());
    work->Complete(status);
    Break(status);
  }
  cv_.NotifyAll();
  return work;
}

void NcclCommunicator::Watchdog() {
  // Before this thread's first CUDA call (cudaEventQuery): else it would make, and hold, a
  // context on device 0 whatever device this communicator uses.
  const cudaError_t selected = cudaSetDevice(options_.device);
  MutexLock lock(mu_);
  if (selected != cudaSuccess) {
    Break(CudaError(selected, "nccl watchdog: selecting device " + std::to_string(options_.device),
                    __FILE__, __LINE__));
  }
  while (!stopping_ || !pending_.empty()) {
    cv_.WaitFor(mu_, std::chrono::milliseconds(1));
    while (!pending_.empty()) {
      cudaError_t query = cudaEventQuery(static_cast<cudaEvent_t>(pending_.front().done->native()));
      if (query == cudaSuccess) {
        pending_.front().work->Complete(Status::Ok());
        pending_.pop_front();
        continue;
      }
      if (query != cudaErrorNotReady) {
        Break(CudaError(query, "nccl: waiting for an operation", __FILE__, __LINE__));
      }
      break;
    }
    if (pending_.empty()) continue;
    ncclResult_t async = ncclSuccess;
    if (comm_.get() != nullptr) ncclCommGetAsyncError(comm_.get(), &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      Break(NcclError(async, "nccl: asynchronous error", __FILE__, __LINE__));
      continue;
    }
    for (const Pending& p : pending_) {
      if (p.work->abort_requested()) {
        Break(AbortedError(p.work->description() + ": aborted"));
        break;
      }
      if (p.work->deadline().Expired()) {
        Break(DeadlineExceededError(p.work->description() +
                                    ": timed out; the NCCL communicator was aborted"));
        break;
      }
    }
  }
}

WorkPtr NcclCommunicator::DoReduceScatterV(ConstBuffer input, MutableBuffer output,
                                           const std::vector<size_t>& counts, ReduceOp op,
                                           const CollectiveOptions& options) {
  return Enqueue("reduce_scatter", options, [&]() -> Status {
    return Issue(PlanReduceScatterV(counts, rank_), input.data, output.data, input.dtype, op);
  });
}

WorkPtr NcclCommunicator::DoAllGatherV(ConstBuffer input, MutableBuffer output,
                                       const std::vector<size_t>& counts,
                                       const CollectiveOptions& options) {
  return Enqueue("all_gather", options, [&]() -> Status {
    return Issue(PlanAllGatherV(counts, rank_), input.data, output.data, input.dtype,
                 ReduceOp::kSum);
  });
}

WorkPtr NcclCommunicator::DoAllReduce(MutableBuffer data, ReduceOp op,
                                      const CollectiveOptions& options) {
  return Enqueue("all_reduce", options, [&]() -> Status {
    NCCL_CHECK(ncclAllReduce(data.data, data.data, data.count, ToNccl(data.dtype), ToNccl(op),
                             comm_.get(), stream_.get()),
               "ncclAllReduce");
    return Status::Ok();
  });
}

WorkPtr NcclCommunicator::DoBroadcast(MutableBuffer data, int root,
                                      const CollectiveOptions& options) {
  return Enqueue("broadcast", options, [&]() -> Status {
    NCCL_CHECK(ncclBroadcast(data.data, data.data, data.count, ToNccl(data.dtype), root,
                             comm_.get(), stream_.get()),
               "ncclBroadcast");
    return Status::Ok();
  });
}

WorkPtr NcclCommunicator::DoBarrier(const CollectiveOptions& options) {
  return Enqueue("barrier", options, [&]() -> Status {
    NCCL_CHECK(ncclAllReduce(barrier_scratch_.get(), barrier_scratch_.get(), 1, ncclFloat32,
                             ncclSum, comm_.get(), stream_.get()),
               "ncclAllReduce (barrier)");
    return Status::Ok();
  });
}

// Point-to-point on device buffers is refused: each ncclSend or ncclRecv would be its own
// operation, waited for before the next is issued, and two ranks that both send before they
// receive (an exchange) would wait for each other until the deadline. NCCL needs such pairs in
// one group; nothing in retort sends device buffers point to point (replicas and recovery state
// live in host memory and go over UCX), so no grouped form is offered.
WorkPtr NcclCommunicator::DoSend(ConstBuffer, int peer, uint32_t, const CollectiveOptions&) {
  return CompletedWork(
      "send", UnimplementedError("nccl: send of a device buffer to rank " + std::to_string(peer) +
                                 " (point to point over NCCL is not offered)"));
}

WorkPtr NcclCommunicator::DoRecv(MutableBuffer, int peer, uint32_t, const CollectiveOptions&) {
  return CompletedWork("recv", UnimplementedError("nccl: receive of a device buffer from rank " +
                                                  std::to_string(peer) +
                                                  " (point to point over NCCL is not offered)"));
}

WorkPtr NcclCommunicator::DoAllToAllV(ConstBuffer input, const std::vector<size_t>& send_counts,
                                      MutableBuffer output, const std::vector<size_t>& recv_counts,
                                      const CollectiveOptions& options) {
  return Enqueue("all_to_all_v", options, [&]() -> Status {
    const size_t elem = DataTypeSize(input.dtype);
    const auto send_offsets = Offsets(send_counts);
    const auto recv_offsets = Offsets(recv_counts);
    const auto* in = static_cast<const char*>(input.data);
    auto* out = static_cast<char*>(output.data);
    if (recv_counts[rank_] > 0) {
      CUDA_CHECK(
          cudaMemcpyAsync(out + recv_offsets[rank_] * elem, in + send_offsets[rank_] * elem,
                          recv_counts[rank_] * elem, cudaMemcpyDeviceToDevice, stream_.get()),
          "all_to_all_v: copying this rank's own part");
    }
    return Grouped([&]() -> Status {
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        if (send_counts[p] > 0) {
          NCCL_CHECK(ncclSend(in + send_offsets[p] * elem, send_counts[p], ToNccl(input.dtype), p,
                              comm_.get(), stream_.get()),
                     "ncclSend (all_to_all_v)");
        }
        if (recv_counts[p] > 0) {
          NCCL_CHECK(ncclRecv(out + recv_offsets[p] * elem, recv_counts[p], ToNccl(input.dtype), p,
                              comm_.get(), stream_.get()),
                     "ncclRecv (all_to_all_v)");
        }
      }
      return Status::Ok();
    });
  });
}

}  // namespace retort::collectives::nccl
