#include "coordinator/streams.h"

#include "coordinator/request_limits.h"
#include "coordinator/services.h"
#include "rpc/grpc_status.h"

namespace retort::coordinator {

GenerationStream::GenerationStream(Coordinator* coordinator, std::string member_id, uint64_t after,
                                   RefusalLog* refusals, const std::string& peer,
                                   const Status& admitted)
    : coordinator_(coordinator), member_id_(std::move(member_id)), last_sent_(after) {
  StatusOr<Coordinator::WatchKind> kind = admitted.ok()
                                              ? coordinator_->WatchOpened(member_id_)
                                              : StatusOr<Coordinator::WatchKind>(admitted);
  if (!kind.ok()) {
    refusals->Refused("WatchGenerations", peer, kind.status().ToString());
    MutexLock lock(mu_);
    FinishOnceLocked(ToGrpcStatus(kind.status()));
    return;
  }
  kind_ = *kind;
  MarkRegistered();
  coordinator_->SubscribeGenerations(this);
}

void GenerationStream::OnGeneration(std::shared_ptr<const v1::Generation> generation) {
  MutexLock lock(mu_);
  if (finished_ || generation->number() <= last_sent_) return;
  pending_ = std::move(generation);
  if (!in_flight_) StartNextLocked();
}

void GenerationStream::StartNextLocked() {
  in_flight_ = std::move(pending_);
  pending_.reset();
  last_sent_ = in_flight_->number();
  StartWrite(in_flight_.get());
}

void GenerationStream::OnWriteDone(bool ok) {
  MutexLock lock(mu_);
  in_flight_.reset();
  if (!WriteSucceededLocked(ok)) return;
  if (pending_ && !finished_) StartNextLocked();
}

void GenerationStream::OnDone() {
  if (WasRegistered()) {
    coordinator_->UnsubscribeGenerations(this);
    // No stream lock held: lock order is coordinator first.
    coordinator_->WatchClosed(member_id_, kind_);
  }
  // The last OnWriteDone (another gRPC thread) changed members under mu_; taking it here orders
  // those writes before the destruction (gRPC's own hand-off is invisible to ThreadSanitizer).
  { MutexLock lock(mu_); }
  delete this;
}

EventStream::EventStream(Coordinator* coordinator, ServiceGuards* guards, const std::string& peer,
                         const std::string& who, const Status& admitted)
    : coordinator_(coordinator), guards_(guards), host_(PeerHost(peer)) {
  if (!admitted.ok()) {
    guards_->refusals().Refused("Watch", who, admitted.ToString());
    MutexLock lock(mu_);
    FinishOnceLocked(ToGrpcStatus(admitted));
    return;
  }
  if (!guards_->AcquireEventStream(host_)) {
    const std::string why = host_ + " already has " + std::to_string(kMaxEventStreamsPerHost) +
                            " event streams open (the limit per host)";
    guards_->refusals().Refused("Watch", peer, why);
    MutexLock lock(mu_);
    FinishOnceLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why));
    return;
  }
  MarkRegistered();
  coordinator_->SubscribeEvents(this);
}

void EventStream::OnEvent(const v1::Event& event) {
  MutexLock lock(mu_);
  if (finished_) return;
  if (queue_.size() >= kMaxQueued) {
    FinishOnceLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  "watch client too slow; events dropped"));
    return;
  }
  queue_.push_back(event);
  if (!writing_) StartNextLocked();
}

void EventStream::StartNextLocked() {
  writing_ = true;
  StartWrite(&queue_.front());
}

void EventStream::OnWriteDone(bool ok) {
  MutexLock lock(mu_);
  writing_ = false;
  queue_.pop_front();
  if (!WriteSucceededLocked(ok)) return;
  if (!queue_.empty() && !finished_) StartNextLocked();
}

void EventStream::OnDone() {
  if (WasRegistered()) {
    coordinator_->UnsubscribeEvents(this);
    guards_->ReleaseEventStream(host_);
  }
  delete this;
}

}  // namespace retort::coordinator
