// Server-streaming reactors that forward Coordinator notifications to gRPC clients.
//
// Lifetime: gRPC owns each reactor from the RPC's start until OnDone(), which unsubscribes from
// the Coordinator (blocking until no notification is in flight) and deletes the reactor.
// Threading: On* notifications arrive on Coordinator threads, OnWriteDone/OnCancel/OnDone on
// gRPC threads; mu_ guards the write state. Writes never block the notifier.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>

#include "common/mutex.h"
#include "coordinator/coordinator.h"
#include "coordinator/refusal_log.h"

namespace retort::coordinator {

// What both streams share: the lock over their write state and the rule that a call finishes
// once (whichever of a refusal, a failed write, a cancel or a slow client comes first).
template <typename Message>
class WriteStream : public grpc::ServerWriteReactor<Message> {
 public:
  void OnCancel() override RETORT_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    FinishOnceLocked(grpc::Status::CANCELLED);
  }

 protected:
  // Finishes the call with `status` unless it has finished already.
  void FinishOnceLocked(const grpc::Status& status) RETORT_REQUIRES(mu_) {
    if (finished_) return;
    finished_ = true;
    this->Finish(status);
  }
  // After a write completed: false (and the call finished with UNAVAILABLE) when it failed.
  bool WriteSucceededLocked(bool ok) RETORT_REQUIRES(mu_) {
    if (!ok) FinishOnceLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
    return ok;
  }

  // The constructor's last step when the coordinator counted the stream (it must then be
  // uncounted in OnDone).
  void MarkRegistered() RETORT_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    registered_ = true;
  }
  // OnDone's first step. Taking mu_ orders every write the constructor made before its last
  // unlock of mu_ (MarkRegistered, or FinishOnceLocked for a refused stream) before this gRPC
  // thread's reads: gRPC hands the reactor over inside libgrpc, which ThreadSanitizer cannot see.
  bool WasRegistered() RETORT_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return registered_;
  }

  Mutex mu_;
  bool finished_ RETORT_GUARDED_BY(mu_) = false;

 private:
  bool registered_ RETORT_GUARDED_BY(mu_) = false;
};

// Sends generations newer than `after`; when the client is slow, intermediate generations are
// skipped (workers only ever need the newest).
class GenerationStream final : public WriteStream<v1::Generation>, public GenerationListener {
 public:
  // `member_id` (may be empty or unknown) is told to the coordinator as watching until the
  // stream ends, so a vanished client is noticed without waiting for heartbeats. A stream the
  // coordinator refuses (Coordinator::WatchOpened), or whose request failed `admitted` (its
  // size check), finishes at once with that status, logged in `refusals` with `peer`.
  GenerationStream(Coordinator* coordinator, std::string member_id, uint64_t after,
                   RefusalLog* refusals, const std::string& peer, const Status& admitted);
  void OnGeneration(std::shared_ptr<const v1::Generation> generation) override RETORT_EXCLUDES(mu_);
  void OnWriteDone(bool ok) override RETORT_EXCLUDES(mu_);
  void OnDone() override;

 private:
  void StartNextLocked() RETORT_REQUIRES(mu_);

  Coordinator* const coordinator_;
  const std::string member_id_;
  // Set once in the constructor, before MarkRegistered: how the coordinator counted the stream.
  Coordinator::WatchKind kind_ = Coordinator::WatchKind::kOther;
  uint64_t last_sent_ RETORT_GUARDED_BY(mu_);
  std::shared_ptr<const v1::Generation> pending_ RETORT_GUARDED_BY(mu_);
  std::shared_ptr<const v1::Generation> in_flight_ RETORT_GUARDED_BY(mu_);
};

class ServiceGuards;  // services.h

// Sends every event in order; a client more than kMaxQueued events behind is disconnected with
// RESOURCE_EXHAUSTED rather than buffering without bound. A host may hold at most
// kMaxEventStreamsPerHost (request_limits.h) at once; beyond, the stream finishes at once with
// RESOURCE_EXHAUSTED.
class EventStream final : public WriteStream<v1::Event>, public EventListener {
 public:
  static constexpr size_t kMaxQueued = 4096;
  // `peer` is gRPC's peer string, `who` describes the caller for logs. A stream whose call
  // failed `admitted` (role or size) finishes at once with that status.
  EventStream(Coordinator* coordinator, ServiceGuards* guards, const std::string& peer,
              const std::string& who, const Status& admitted);
  void OnEvent(const v1::Event& event) override RETORT_EXCLUDES(mu_);
  void OnWriteDone(bool ok) override RETORT_EXCLUDES(mu_);
  void OnDone() override;

 private:
  void StartNextLocked() RETORT_REQUIRES(mu_);

  Coordinator* const coordinator_;
  ServiceGuards* const guards_;
  const std::string host_;
  std::deque<v1::Event> queue_ RETORT_GUARDED_BY(mu_);  // front is in flight while writing_
  bool writing_ RETORT_GUARDED_BY(mu_) = false;
};

}  // namespace retort::coordinator
