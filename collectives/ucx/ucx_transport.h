// UcxTransport: the Transport over the UCP tag API. One ucp_context + ucp_worker per
// communicator, one endpoint per peer with peer-failure error handling
// (UCP_ERR_HANDLING_MODE_PEER), so a dead peer fails its requests instead of hanging them.
//
// Wire tag (64 bits): generation mod 4096 (12) | point-to-point flag (1) | source rank (11) |
// sequence (20) | slot (20). Receives match the whole tag, so traffic of another generation
// is never mixed in; while waiting, the transport also probes for messages of nearby
// generations and fails with FAILED_PRECONDITION when it sees one. The full 64-bit
// generation is checked at bootstrap (store record and a hello exchange).
//
// Progress is caller driven: Wait() spins on ucp_worker_progress (yielding the CPU when
// idle) until the request completes, the deadline passes, the operation is aborted or a peer
// fails. Threading: created on one thread, then used by one thread at a time (the owning
// communicator's executor thread); not thread-safe.
#pragma once

#include <ucp/api/ucp.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/store.h"
#include "collectives/transport.h"
#include "collectives/ucx/ucx_handles.h"

namespace retort::collectives::ucx {

constexpr int kMaxUcxWorldSize = 2048;  // source rank field of the wire tag
constexpr uint32_t kMaxSlot = (1u << 20) - 1;

class UcxTransport final : public Transport {
 public:
  // One posted send or receive. Requests of user Send/Recv outlive operations and are owned
  // by the caller; fields are the transport's.
  struct Request {
    bool send = false;
    int peer = 0;
    size_t expected_bytes = 0;
    void* ucx_request = nullptr;  // null once finished
    bool finished = false;
    ucs_status_t status = UCS_OK;
    ucp_tag_recv_info_t info{};
  };

  // Publishes this rank's worker address under "<key_prefix>/rank<r>", reads every peer's,
  // creates the endpoints and exchanges a hello carrying the generation with each peer.
  // FAILED_PRECONDITION when a peer is at another generation or world size.
  static StatusOr<std::unique_ptr<UcxTransport>> Create(Store* store, const std::string& key_prefix,
                                                        int rank, int size, uint64_t generation,
                                                        const UcxContextOptions& options,
                                                        Deadline deadline);
  ~UcxTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t generation() const { return generation_; }

  StatusOr<RequestId> PostSend(int peer, MessageTag tag, const void* data, size_t bytes) override;
  StatusOr<RequestId> PostRecv(int peer, MessageTag tag, void* data, size_t bytes) override;
  Status Wait(RequestId request, const WaitControl& control) override;
  Status FinishOperation(Status status, const WaitControl& control) override;

  // Requests outside operations: posted, then polled until they report a final status.
  StatusOr<std::unique_ptr<Request>> PostDetachedSend(int peer, MessageTag tag, const void* data,
                                                      size_t bytes);
  StatusOr<std::unique_ptr<Request>> PostDetachedRecv(int peer, MessageTag tag, void* data,
                                                      size_t bytes);
  // Progresses the worker once; returns the final status once `request` finished.
  std::optional<Status> PollDetached(Request& request);
  // Cancels every unfinished request and closes the endpoints at once; afterwards no buffer
  // given to this transport is touched again. Idempotent.
  void Shutdown(std::vector<Request*> detached);
  // Ranks whose endpoint reported an error. Thread-safe (the flags are atomics).
  std::vector<int> FailedPeers() const;

  // Sends with an arbitrary generation in the wire tag: tests of generation fencing only.
  StatusOr<std::unique_ptr<Request>> PostDetachedSendWithGenerationForTesting(
      int peer, uint64_t generation, MessageTag tag, const void* data, size_t bytes);

 private:
  struct Peer {
    UcxTransport* transport = nullptr;
    int rank = 0;
    ucp_ep_h ep = nullptr;
    ucs_status_t error = UCS_OK;      // set by the error callback on the progress thread
    std::atomic<bool> failed{false};  // mirrors error != UCS_OK for other threads
  };

  UcxTransport(int rank, int size, uint64_t generation);
  static void OnPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);
  Status Connect(Store* store, const std::string& key_prefix, Deadline deadline);
  Status ExchangeHello(Deadline deadline);
  uint64_t WireTag(uint64_t generation, int source, MessageTag tag) const;
  StatusOr<std::unique_ptr<Request>> Post(bool send, int peer, uint64_t wire_tag, void* data,
                                          size_t bytes);
  bool Poll(Request& request);
  Status Result(const Request& request) const;
  Status CheckPeersAndTraffic() const;
  void CloseEndpoints(bool force);

  const int rank_;
  const int size_;
  const uint64_t generation_;
  UcpContext context_;  // declared before worker_: destroyed after it
  UcpWorker worker_;
  std::vector<Peer> peers_;  // sized once; callbacks hold pointers into it
  bool closed_ = false;
  std::chrono::microseconds spin_before_yield_{20};  // from UcxContextOptions
  std::vector<std::unique_ptr<Request>> operation_requests_;
};

}  // namespace retort::collectives::ucx
