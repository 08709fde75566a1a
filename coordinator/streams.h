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

// Sends generations newer than `after`; when the client is slow, intermediate generations are
// skipped (workers only ever need the newest).
class GenerationStream final : public grpc::ServerWriteReactor<v1::Generation>,
                               public GenerationListener {
 public:
  // `member_id` (may be empty or unknown) is told to the coordinator as watching until the
  // stream ends, so a vanished client is noticed without waiting for heartbeats. A stream the
  // coordinator refuses (Coordinator::WatchOpened), or whose request failed `admitted` (its
  // size check), finishes at once with that status, logged in `refusals` with `peer`.
  GenerationStream(Coordinator* coordinator, std::string member_id, uint64_t after,
                   RefusalLog* refusals, const std::string& peer, const Status& admitted);
  void OnGeneration(std::shared_ptr<const v1::Generation> generation) override RETORT_EXCLUDES(mu_);
  void OnWriteDone(bool ok) override RETORT_EXCLUDES(mu_);
  void OnCancel() override RETORT_EXCLUDES(mu_);
  void OnDone() override;

 private:
  void StartNextLocked() RETORT_REQUIRES(mu_);

  Coordinator* const coordinator_;
  const std::string member_id_;
  // Set once in the constructor: whether the coordinator counted this stream, and how.
  bool registered_ = false;
  Coordinator::WatchKind kind_ = Coordinator::WatchKind::kOther;
  Mutex mu_;
  uint64_t last_sent_ RETORT_GUARDED_BY(mu_);
  std::shared_ptr<const v1::Generation> pending_ RETORT_GUARDED_BY(mu_);
  std::shared_ptr<const v1::Generation> in_flight_ RETORT_GUARDED_BY(mu_);
  bool finished_ RETORT_GUARDED_BY(mu_) = false;
};

class ServiceGuards;  // services.h

// Sends every event in order; a client more than kMaxQueued events behind is disconnected with
// RESOURCE_EXHAUSTED rather than buffering without bound. A host may hold at most
// kMaxEventStreamsPerHost (request_limits.h) at once; beyond, the stream finishes at once with
// RESOURCE_EXHAUSTED.
class EventStream final : public grpc::ServerWriteReactor<v1::Event>, public EventListener {
 public:
  static constexpr size_t kMaxQueued = 4096;
  // `peer` is gRPC's peer string, `who` describes the caller for logs. A stream whose call
  // failed `admitted` (role or size) finishes at once with that status.
  EventStream(Coordinator* coordinator, ServiceGuards* guards, const std::string& peer,
              const std::string& who, const Status& admitted);
  void OnEvent(const v1::Event& event) override RETORT_EXCLUDES(mu_);
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void StartNextLocked() RETORT_REQUIRES(mu_);

  Coordinator* const coordinator_;
  ServiceGuards* const guards_;
  const std::string host_;
  bool registered_ = false;  // set once in the constructor
  Mutex mu_;
  std::deque<v1::Event> queue_ RETORT_GUARDED_BY(mu_);  // front is in flight while writing_
  bool writing_ RETORT_GUARDED_BY(mu_) = false;
  bool finished_ RETORT_GUARDED_BY(mu_) = false;
};

}  // namespace retort::coordinator
