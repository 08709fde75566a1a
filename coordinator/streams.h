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
#include <mutex>

#include "coordinator/coordinator.h"

namespace retort::coordinator {

// Sends generations newer than `after`; when the client is slow, intermediate generations are
// skipped (workers only ever need the newest).
class GenerationStream final : public grpc::ServerWriteReactor<v1::Generation>,
                               public GenerationListener {
 public:
  // `member_id` (may be empty or unknown) is told to the coordinator as watching until the
  // stream ends, so a vanished client is noticed without waiting for heartbeats.
  GenerationStream(Coordinator* coordinator, std::string member_id, uint64_t after);
  void OnGeneration(std::shared_ptr<const v1::Generation> generation) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void StartNextLocked();

  Coordinator* const coordinator_;
  const std::string member_id_;
  std::mutex mu_;
  uint64_t last_sent_;                               // GUARDED_BY(mu_)
  std::shared_ptr<const v1::Generation> pending_;    // GUARDED_BY(mu_)
  std::shared_ptr<const v1::Generation> in_flight_;  // GUARDED_BY(mu_)
  bool finished_ = false;                            // GUARDED_BY(mu_)
};

// Sends every event in order; a client more than kMaxQueued events behind is disconnected with
// RESOURCE_EXHAUSTED rather than buffering without bound.
class EventStream final : public grpc::ServerWriteReactor<v1::Event>, public EventListener {
 public:
  static constexpr size_t kMaxQueued = 4096;
  explicit EventStream(Coordinator* coordinator);
  void OnEvent(const v1::Event& event) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void StartNextLocked();

  Coordinator* const coordinator_;
  std::mutex mu_;
  std::deque<v1::Event> queue_;  // GUARDED_BY(mu_); front is in flight while writing_
  bool writing_ = false;         // GUARDED_BY(mu_)
  bool finished_ = false;        // GUARDED_BY(mu_)
};

}  // namespace retort::coordinator
