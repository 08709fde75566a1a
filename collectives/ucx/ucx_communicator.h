// UcxCommunicator: the Communicator over UCX (CPU memory), ring algorithms from ring.h.
//
// Threading model: operations run one at a time on the communicator's executor, which drives
// UCX progress itself (no separate progress thread). With ProgressMode::kBackgroundThread
// (default) the executor is a thread and the issuing thread only enqueues and later waits;
// with kCallerThread operations run inside Work::Wait on the waiting thread. Send/Recv are
// posted by the executor and finish in the background (polled whenever the executor is
// idle), so two ranks may each Send before they Recv without deadlocking.
#pragma once

#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/bootstrap_store.h"
#include "collectives/communicator.h"
#include "collectives/executor.h"
#include "collectives/ring.h"
#include "collectives/ucx/ucx_transport.h"

namespace retort::collectives::ucx {

struct UcxCommunicatorOptions {
  // Bootstrap-store keys are "<key_prefix>/rank<r>"; empty: "g<generation>/ucx".
  std::string key_prefix;
  std::chrono::milliseconds default_timeout{30000};
  // Bound on creation (store exchange + hello with every peer).
  std::chrono::milliseconds bootstrap_timeout{60000};
  // Polled (every ~20 ms, from the creating thread) while creation waits for peers; once it
  // returns true, creation gives up with ABORTED instead of waiting out bootstrap_timeout: the
  // communicator is obsolete (e.g. a newer generation was published). Empty: never cancelled.
  std::function<bool()> cancelled;
  // Pipelining granularity of the ring algorithms.
  size_t chunk_bytes = size_t{1} << 20;
  // Background executor thread (overlaps the caller's computation), or caller-driven
  // progress inside Work::Wait (see executor.h).
  ProgressMode progress = ProgressMode::kBackgroundThread;
  UcxContextOptions ucx;
};

class UcxCommunicator final : public Communicator {
 public:
  // Blocks until every rank of the world created its communicator (or the bootstrap
  // deadline). `store` is only used during the call.
  static StatusOr<std::unique_ptr<UcxCommunicator>> Create(
      BootstrapStore* store, int rank, int size, uint64_t generation,
      const UcxCommunicatorOptions& options = {});
  ~UcxCommunicator() override;

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }
  uint64_t generation() const override { return transport_->generation(); }
  std::chrono::milliseconds default_timeout() const override { return options_.default_timeout; }
  std::string name() const override { return "ucx"; }

  void Abort(const std::string& reason) override;
  std::vector<int> FailedPeers() const override { return transport_->FailedPeers(); }
  // The transports chosen per peer at bootstrap (UCX lanes, CMA threshold): for logs.
  const std::string& transport_description() const { return transport_->description(); }

  // A Send whose wire tag carries `generation` instead of this communicator's: for tests
  // that check generation fencing on the receiving side.
  WorkPtr SendWithGenerationForTesting(ConstBuffer data, int peer, uint32_t tag,
                                       uint64_t generation);

 protected:
  RETORT_COMMUNICATOR_OPERATIONS(, override);

 private:
  struct InFlight {
    WorkPtr work;
    std::unique_ptr<UcxTransport::Request> request;
  };

  UcxCommunicator(std::unique_ptr<UcxTransport> transport, const UcxCommunicatorOptions& options);
  Deadline DeadlineFor(const CollectiveOptions& options) const;
  // `bytes`: the operation's payload, by which the transport's CMA choice is measured.
  WorkPtr SubmitCollective(OperationKind kind, size_t bytes, const CollectiveOptions& options,
                           std::function<Status(const RingContext&)> algorithm);
  WorkPtr SubmitPointToPoint(std::string description, bool send, void* data, size_t bytes, int peer,
                             uint32_t tag, const CollectiveOptions& options,
                             std::optional<uint64_t> forged_generation);
  // Executor idle hook: polls in-flight Send/Recv; true while some remain.
  bool PollInFlight();
  // While a collective runs: breaks the communicator when an in-flight Send/Recv was aborted
  // or passed its deadline (PollInFlight completes it once the collective has failed).
  void WatchInFlight();

  const UcxCommunicatorOptions options_;
  std::unique_ptr<UcxTransport> transport_;  // used on the executor thread only
  uint32_t next_sequence_ = 0;               // issuing thread
  std::vector<uint32_t> send_sequence_;      // issuing thread, per peer
  std::vector<uint32_t> recv_sequence_;      // issuing thread, per peer
  std::list<InFlight> in_flight_;            // executor thread
  std::vector<char> scratch_;                // executor thread: ring staging memory
  std::function<void()> watch_in_flight_;    // WaitControl::background of collectives
  std::unique_ptr<OpExecutor> executor_;     // last: its thread stops first
};

// The factory the worker calls: a flat UCX communicator for one generation.
StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(
    BootstrapStore* store, int rank, int size, uint64_t generation,
    const UcxCommunicatorOptions& options = {});

}  // namespace retort::collectives::ucx
