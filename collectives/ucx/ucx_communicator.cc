#include "collectives/ucx/ucx_communicator.h"

#include <sched.h>

#include "collectives/ring.h"
#include "collectives/validate.h"

namespace retort::collectives::ucx {

StatusOr<std::unique_ptr<UcxCommunicator>> UcxCommunicator::Create(
    BootstrapStore* store, int rank, int size, uint64_t generation,
    const UcxCommunicatorOptions& options) {
  if (options.chunk_bytes == 0) return InvalidArgumentError("ucx: chunk_bytes must be > 0");
  const std::string prefix =
      options.key_prefix.empty() ? "g" + std::to_string(generation) + "/ucx" : options.key_prefix;
  RETORT_ASSIGN_OR_RETURN(
      auto transport,
      UcxTransport::Create(store, prefix, rank, size, generation, options.ucx,
                           Deadline::After(options.bootstrap_timeout), options.cancelled));
  return std::unique_ptr<UcxCommunicator>(new UcxCommunicator(std::move(transport), options));
}

StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(
    BootstrapStore* store, int rank, int size, uint64_t generation,
    const UcxCommunicatorOptions& options) {
  RETORT_ASSIGN_OR_RETURN(auto comm,
                          UcxCommunicator::Create(store, rank, size, generation, options));
  return std::unique_ptr<Communicator>(std::move(comm));
}

UcxCommunicator::UcxCommunicator(std::unique_ptr<UcxTransport> transport,
                                 const UcxCommunicatorOptions& options)
    : options_(options),
      transport_(std::move(transport)),
      send_sequence_(static_cast<size_t>(transport_->size()), 0),
      recv_sequence_(static_cast<size_t>(transport_->size()), 0) {
  watch_in_flight_ = [this] { WatchInFlight(); };
  executor_ = std::make_unique<OpExecutor>(
      "ucx rank " + std::to_string(transport_->rank()) + " gen " +
          std::to_string(transport_->generation()),
      [this] { return PollInFlight(); }, options.progress);
}

UcxCommunicator::~UcxCommunicator() {
  // Joins the executor thread: from here on this thread owns the transport (the thread's idle
  // hook, PollInFlight, uses it and executor_ until it is joined).
  executor_->Stop();
  if (!in_flight_.empty()) {
    std::vector<UcxTransport::Request*> requests;
    for (auto& f : in_flight_) requests.push_back(f.request.get());
    transport_->Shutdown(requests);
    for (auto& f : in_flight_) {
      f.work->Complete(AbortedError(f.work->description() + ": communicator destroyed"));
    }
  }
}

Deadline UcxCommunicator::DeadlineFor(const CollectiveOptions& options) const {
  return Deadline::After(options.timeout.value_or(options_.default_timeout));
}

WorkPtr UcxCommunicator::SubmitCollective(OperationKind kind, size_t bytes,
                                          const CollectiveOptions& options,
                                          std::function<Status(const RingContext&)> algorithm) {
  const uint32_t sequence = next_sequence_++;
  return executor_->Submit(
      OperationKindName(kind), DeadlineFor(options),
      [this, sequence, kind, bytes, algorithm = std::move(algorithm)](Work& work) {
        transport_->BeginOperation(kind, bytes);
        RingContext ctx;
        ctx.transport = transport_.get();
        ctx.sequence = sequence;
        ctx.chunk_bytes = options_.chunk_bytes;
        ctx.scratch = &scratch_;
        ctx.control = WaitControl{work.deadline(), work.abort_flag(), executor_->aborted_flag(),
                                  &watch_in_flight_};
        return algorithm(ctx);
      });
}

WorkPtr UcxCommunicator::DoReduceScatterV(ConstBuffer input, MutableBuffer output,
                                          const std::vector<size_t>& counts, ReduceOp op,
                                          const CollectiveOptions& options) {
  return SubmitCollective(
      OperationKind::kReduceScatter, input.bytes(), options,
      [=](const RingContext& ctx) { return RingReduceScatterV(ctx, input, output, counts, op); });
}

WorkPtr UcxCommunicator::DoAllGatherV(ConstBuffer input, MutableBuffer output,
                                      const std::vector<size_t>& counts,
                                      const CollectiveOptions& options) {
  return SubmitCollective(
      OperationKind::kAllGather, output.bytes(), options,
      [=](const RingContext& ctx) { return RingAllGatherV(ctx, input, output, counts); });
}

WorkPtr UcxCommunicator::DoAllReduce(MutableBuffer data, ReduceOp op,
                                     const CollectiveOptions& options) {
  return SubmitCollective(OperationKind::kAllReduce, data.bytes(), options,
                          [=](const RingContext& ctx) { return RingAllReduce(ctx, data, op); });
}

WorkPtr UcxCommunicator::DoBroadcast(MutableBuffer data, int root,
                                     const CollectiveOptions& options) {
  return SubmitCollective(OperationKind::kBroadcast, data.bytes(), options,
                          [=](const RingContext& ctx) { return ChainBroadcast(ctx, data, root); });
}

WorkPtr UcxCommunicator::DoBarrier(const CollectiveOptions& options) {
  return SubmitCollective(OperationKind::kBarrier, 0, options,
                          [](const RingContext& ctx) { return DisseminationBarrier(ctx); });
}

WorkPtr UcxCommunicator::DoAllToAllV(ConstBuffer input, const std::vector<size_t>& send_counts,
                                     MutableBuffer output, const std::vector<size_t>& recv_counts,
                                     const CollectiveOptions& options) {
  return SubmitCollective(OperationKind::kAllToAll, input.bytes(), options,
                          [=](const RingContext& ctx) {
                            return DirectAllToAllV(ctx, input, send_counts, output, recv_counts);
                          });
}

WorkPtr UcxCommunicator::DoSend(ConstBuffer data, int peer, uint32_t tag,
                                const CollectiveOptions& options) {
  return SubmitPointToPoint("send", true, const_cast<void*>(data.data), data.bytes(), peer, tag,
                            options, std::nullopt);
}

WorkPtr UcxCommunicator::DoRecv(MutableBuffer data, int peer, uint32_t tag,
                                const CollectiveOptions& options) {
  return SubmitPointToPoint("recv", false, data.data, data.bytes(), peer, tag, options,
                            std::nullopt);
}

WorkPtr UcxCommunicator::SendWithGenerationForTesting(ConstBuffer data, int peer, uint32_t tag,
                                                      uint64_t generation) {
  Status valid = ValidatePointToPoint(rank(), size(), peer, data.data, data.count, "send");
  if (!valid.ok()) return CompletedWork("send (forged generation)", valid);
  return SubmitPointToPoint("send (forged generation)", true, const_cast<void*>(data.data),
                            data.bytes(), peer, tag, {}, generation);
}

WorkPtr UcxCommunicator::SubmitPointToPoint(std::string description, bool send, void* data,
                                            size_t bytes, int peer, uint32_t tag,
                                            const CollectiveOptions& options,
                                            std::optional<uint64_t> forged_generation) {
  // Peer and buffer were checked by Communicator (or SendWithGenerationForTesting); the tag
  // range is this backend's own limit.
  if (tag > kMaxSlot) {
    return CompletedWork(description,
                         InvalidArgumentError(description + ": tag " + std::to_string(tag) + " > " +
                                              std::to_string(kMaxSlot)));
  }
  const uint32_t sequence = send ? send_sequence_[peer]++ : recv_sequence_[peer]++;
  const MessageTag message_tag{true, sequence, tag};
  description += (send ? " to rank " : " from rank ") + std::to_string(peer);
  return executor_->SubmitDeferred(
      description, DeadlineFor(options), [=, this](const WorkPtr& work) -> Status {
        StatusOr<std::unique_ptr<UcxTransport::Request>> request =
            forged_generation.has_value() ? transport_->PostDetachedSendWithGenerationForTesting(
                                                peer, *forged_generation, message_tag, data, bytes)
            : send ? transport_->PostDetachedSend(peer, message_tag, data, bytes)
                   : transport_->PostDetachedRecv(peer, message_tag, data, bytes);
        if (!request.ok()) return request.status();
        in_flight_.push_back(InFlight{work, std::move(*request)});
        return Status::Ok();
      });
}

bool UcxCommunicator::PollInFlight() {
  if (in_flight_.empty()) return false;
  const bool aborted = executor_->aborted_flag()->load();
  bool progressed = false;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    std::optional<Status> done;
    Work& work = *it->work;
    if (work.abort_requested()) {
      done = AbortedError(work.description() + ": aborted");
    } else if (aborted) {
      done = AbortedError(work.description() + ": communicator aborted");
    } else {
      done = transport_->PollDetached(*it->request);
      if (!done.has_value() && work.deadline().Expired()) {
        done = DeadlineExceededError(work.description() + ": timed out");
      }
    }
    if (!done.has_value()) {
      ++it;
      continue;
    }
    progressed = true;
    if (!done->ok()) {
      std::vector<UcxTransport::Request*> requests;
      for (auto& f : in_flight_) requests.push_back(f.request.get());
      transport_->Shutdown(requests);
      executor_->Abort(done->ToString());
    }
    it->work->Complete(*done);
    it = in_flight_.erase(it);
  }
  if (!progressed) sched_yield();
  return !in_flight_.empty();
}

void UcxCommunicator::WatchInFlight() {
  for (const InFlight& f : in_flight_) {
    if (f.work->abort_requested()) {
      executor_->Abort(f.work->description() + " was aborted");
    } else if (f.work->deadline().Expired() && !f.request->finished) {
      executor_->Abort(f.work->description() + " timed out");
    }
  }
}

void UcxCommunicator::Abort(const std::string& reason) { executor_->Abort(reason); }

}  // namespace retort::collectives::ucx
