// UcxTransport: the Transport over the UCP tag API. One ucp_context + ucp_worker per
// communicator, one endpoint per peer with peer-failure error handling
// (UCP_ERR_HANDLING_MODE_PEER), so a dead peer fails its requests instead of hanging them.
//
// Wire tag (64 bits): generation mod 2048 (11) | CMA flag (1) | point-to-point flag (1) |
// source rank (11) | sequence (20) | slot (20), XORed with the generation's data-plane key.
// Receives match the whole tag, so traffic of another generation is never mixed in. The full 64-bit
// generation is checked at bootstrap (store record and a hello exchange).
//
// Data-plane key: every rank draws a random 64-bit nonce (getrandom) per communicator and
// publishes it in its address record; the key is the XOR of every rank's nonce, so it is
// known exactly to the ranks that read this generation's records from the bootstrap store
// (the coordinator serves them only to authenticated members of the generation). UCX's
// worker-address wireup has no connection filter: anyone who reaches the interface the data
// plane binds (--data-address) can open a UCX endpoint to it. Without the key such a sender
// cannot address any receive (its messages stay unmatched until the worker is destroyed with
// the generation) nor the active messages below (which carry the key and are ignored
// without it). The hello, the first messages of a generation, are keyed too.
//
// Large messages between processes of one host (UcxContextOptions::cma_min_bytes) use a
// rendezvous of our own: the sender tag-sends a small descriptor (address, length, cookie),
// the receiver copies the payload straight out of the sender's memory with process_vm_readv
// (cma.h), checks that the sender has not cancelled meanwhile, and acknowledges with a UCX
// active message; the send completes on that acknowledgement. Both ranks agree per peer at
// bootstrap (address record + hello) whether CMA may be used between them and from which size;
// the sender then chooses per operation between it and UCX's shared-memory FIFO (cma_chooser.h:
// measured, since which is faster depends on the host), and marks a descriptor with the wire
// tag's CMA flag. Receives from such a peer match either (the flag masked out), land in the
// payload's buffer, and read the flag of the tag that arrived. An
// operation (FinishOperation) and a detached receive (PollDetached) end only once every
// acknowledgement they owe has left this worker: an acknowledgement still queued in UCX would
// otherwise wait for this worker's next progress, and a rank that moves on to another
// communicator (the levels of a hierarchy) leaves its peer waiting on a send that the peer
// cannot finish: a deadlock across communicators.
//
// Progress is caller driven: Wait() spins on ucp_worker_progress (yielding the CPU when
// idle) until the request completes, the deadline passes, the operation is aborted or a peer
// fails. Threading: created on one thread, then used by one thread at a time (the owning
// communicator's executor thread); not thread-safe.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/bootstrap_store.h"
#include "collectives/cpu_sharing.h"
#include "collectives/transport.h"
#include "collectives/ucx/cma.h"
#include "collectives/ucx/cma_chooser.h"
#include "collectives/ucx/ucx_handles.h"

namespace retort::collectives::ucx {

constexpr int kMaxUcxWorldSize = 2048;  // source rank field of the wire tag
constexpr uint32_t kMaxSlot = (1u << 20) - 1;

class UcxTransport final : public Transport {
 public:
  // One posted send or receive. Requests of user Send/Recv outlive operations and are owned
  // by the caller; fields are the transport's.
  // What a CMA send tag-sends instead of its payload.
  struct CmaDescriptor {
    uint64_t magic = 0;
    uint64_t address = 0;  // the payload in the sender's memory
    uint64_t bytes = 0;
    uint64_t cookie = 0;         // echoed by the acknowledgement
    uint64_t valid_address = 0;  // holds `cookie` until the sender cancels the send
  };
  struct Request {
    bool send = false;
    int peer = 0;
    size_t expected_bytes = 0;
    void* ucx_request = nullptr;  // null once the UCX part finished
    bool ucx_done = false;        // the UCX part (payload, or CMA descriptor) finished
    bool finished = false;
    ucs_status_t status = UCS_OK;
    ucp_tag_recv_info_t info{};
    // CMA rendezvous (see above).
    bool cma = false;           // send: chosen at post; receive: known once the message arrived
    bool cma_possible = false;  // receive: from a peer that may send either protocol
    CmaDescriptor descriptor;   // sent, or received
    void* landing = nullptr;    // receive: where the payload goes
    std::function<void(size_t)> on_landed;  // receive: SetLandedCallback's, may be empty
    std::atomic<uint64_t> valid{0};         // send: the cookie while the receiver may read; 0 after
    bool acked = false;                     // send: the receiver's acknowledgement arrived
    Status cma_status;                      // the CMA part's result
  };

  // Publishes this rank's worker address under "<key_prefix>/rank<r>", reads every peer's,
  // creates the endpoints and exchanges a hello carrying the generation with each peer.
  // FAILED_PRECONDITION when a peer is at another generation or world size.
  // `cancelled` (may be empty) is polled every ~kBootstrapPollMs while waiting for peers (their
  // store records and hellos); once it returns true, Create returns ABORTED at once.
  static StatusOr<std::unique_ptr<UcxTransport>> Create(
      BootstrapStore* store, const std::string& key_prefix, int rank, int size, uint64_t generation,
      const UcxContextOptions& options, Deadline deadline,
      const std::function<bool()>& cancelled = {});
  // How often a bootstrap wait polls its cancellation check.
  static constexpr int64_t kBootstrapPollMs = 20;
  ~UcxTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t generation() const { return generation_; }

  StatusOr<RequestId> PostSend(int peer, MessageTag tag, const void* data, size_t bytes) override;
  StatusOr<RequestId> PostRecv(int peer, MessageTag tag, void* data, size_t bytes) override;
  // Called per 1 MiB piece of a single-copy (CMA) receive; false for other receives.
  bool SetLandedCallback(RequestId request, std::function<void(size_t)> on_landed) override;
  Status Wait(RequestId request, const WaitControl& control) override;
  Status FinishOperation(Status status, const WaitControl& control) override;
  // Starts an operation of `kind` with `bytes` of payload (the collective's buffer): its
  // same-host sends share one CMA-or-FIFO choice, and its time to FinishOperation is measured
  // for the next of its kind and size.
  void BeginOperation(OperationKind kind, size_t bytes);

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
  // The transports UCX chose per peer (ucp_ep_print_info) and the CMA threshold per peer, as
  // of bootstrap: for logs and benchmarks.
  const std::string& description() const { return description_; }
  // The CMA threshold towards `peer` (bytes), 0 when CMA is not used with it.
  size_t cma_threshold(int peer) const { return peers_[peer].cma_threshold; }

  // Sends with an arbitrary generation in the wire tag: tests of generation fencing only.
  StatusOr<std::unique_ptr<Request>> PostDetachedSendWithGenerationForTesting(
      int peer, uint64_t generation, MessageTag tag, const void* data, size_t bytes);
  // The generation's data-plane key: tests that play an intruder holding it.
  uint64_t wire_key_for_testing() const { return wire_key_; }

 private:
  struct Peer {
    UcxTransport* transport = nullptr;
    int rank = 0;
    ucp_ep_h ep = nullptr;
    ucs_status_t error = UCS_OK;      // set by the error callback on the progress thread
    std::atomic<bool> failed{false};  // mirrors error != UCS_OK for other threads
    CmaIdentity cma;                  // from the peer's address record
    size_t cma_min_bytes = 0;         // the peer's own threshold (0: it refuses CMA)
    bool can_read = false;            // this process can read the peer's memory
    size_t cma_threshold = 0;         // agreed at the hello; 0: no CMA with this peer
    // The peer announced it closes its endpoints on purpose: a connection error from it
    // afterwards fails operations but does not name it in FailedPeers().
    bool said_goodbye = false;
  };
  // Active-message headers; `key` is the data-plane key (the message is ignored without it).
  struct CmaAck {
    uint64_t key = 0;
    uint64_t cookie = 0;
    int32_t code = 0;      // CmaAckCode
    int32_t reserved = 0;  // no padding bytes of unknown value on the wire
  };
  struct Goodbye {
    uint64_t key = 0;
    int32_t rank = -1;
    int32_t reserved = 0;
  };

  UcxTransport(int rank, int size, uint64_t generation);
  static void OnPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t OnCmaAck(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnGoodbye(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param);
  // The status for an operation on a peer whose endpoint reported an error.
  Status PeerFailure(const Peer& peer, const std::string& what) const;
  // Tells every connected peer that this rank closes its endpoints on purpose.
  void SayGoodbye();
  // Whether a message of `bytes` to or from `peer` may go through CMA (the agreed threshold,
  // and room for a descriptor in the receive).
  bool UseCma(int peer, size_t bytes) const;
  // An operation's send to `peer`: whether it goes through CMA (one choice per operation,
  // cma_chooser_'s), counting its bytes for the operation's measurement.
  bool ChooseCmaForOperationSend(int peer, size_t bytes);
  // A receive that could take either protocol arrived: sets r.cma from the tag's CMA flag and
  // takes the descriptor out of the landing buffer.
  void ReadProtocolOfArrival(Request& r);
  // Feeds the finished operation's time to cma_chooser_ (debug log when its choice changes).
  void RecordOperationProtocol();
  // Receive side of the CMA rendezvous once the descriptor arrived: copy, check, acknowledge.
  Status CompleteCmaReceive(Request& request);
  void SendCmaAck(int peer, uint64_t cookie, int32_t code);
  // Progresses the worker until no acknowledgement is queued in UCX (see above), within the
  // operation's deadline.
  Status FlushCmaAcks(const WaitControl& control);
  // The one progress loop (Wait, FlushCmaAcks): spins on ucp_worker_progress until `done()`,
  // yielding the CPU after a quiet spell; fails when a peer this operation waits on fails, the
  // operation is aborted or the deadline passes ("ucx: timed out " + waiting_for()). Defined in
  // ucx_transport.cc, its only user.
  template <typename Done, typename WaitingFor>
  Status ProgressUntil(const Done& done, const WaitControl& control, const WaitingFor& waiting_for);
  // Send side on cancellation: the receiver must not trust the buffer from now on.
  void WithdrawCmaSend(Request& request);
  std::string Describe();
  Status Connect(BootstrapStore* store, const std::string& key_prefix, Deadline deadline,
                 const std::function<bool()>& cancelled);
  Status ExchangeHello(Deadline deadline, const std::function<bool()>& cancelled);
  // ABORTED naming the generation and what bootstrap was waiting for.
  Status BootstrapCancelled(const std::string& waiting_for) const;
  // TagFields (ucx_wire.h) XOR the data-plane key.
  uint64_t WireTag(uint64_t generation, int source, MessageTag tag) const;
  // A send goes through CMA when `cma` (the caller's choice; false for receives, which take
  // whichever protocol arrives from a CMA peer).
  StatusOr<std::unique_ptr<Request>> Post(bool send, int peer, uint64_t wire_tag, void* data,
                                          size_t bytes, bool cma);
  bool Poll(Request& request);
  Status Result(const Request& request) const;
  // Fails when a peer this operation still waits on has failed (a peer that closed its
  // communicator on purpose after its last message to us is not waited on).
  Status CheckPeers();
  // Whether a request of the current operation to or from `peer` is still unfinished.
  bool WaitingOn(int peer);
  void CloseEndpoints(bool force);

  const int rank_;
  const int size_;
  const uint64_t generation_;
  uint64_t nonce_ = 0;     // this rank's share of the data-plane key
  uint64_t wire_key_ = 0;  // XOR of every rank's nonce, complete once Connect has read them
  UcpContext context_;     // declared before worker_: destroyed after it
  UcpWorker worker_;
  std::vector<Peer> peers_;  // sized once; callbacks hold pointers into it
  bool closed_ = false;
  std::chrono::microseconds spin_before_yield_{20};   // from UcxContextOptions
  std::chrono::microseconds spin_before_sleep_{200};  // from UcxContextOptions
  std::chrono::microseconds sleep_quantum_{50};       // from UcxContextOptions
  // Whether waits yield from the start; on/off from
  // UcxContextOptions::yield_early_when_cpu_shared.
  CpuSharingDetector cpu_sharing_;
  std::vector<std::unique_ptr<Request>> operation_requests_;
  // The current operation, for cma_chooser_: its payload and start (BeginOperation), the
  // protocol its same-host sends use (decided at the first) and their bytes.
  CmaChooser cma_chooser_;
  OperationKind operation_kind_ = OperationKind::kBarrier;
  size_t operation_bytes_ = 0;
  SteadyClock::time_point operation_start_;
  std::optional<bool> operation_cma_;
  size_t operation_same_host_bytes_ = 0;
  CmaIdentity local_cma_;
  size_t cma_min_bytes_ = 0;  // from UcxContextOptions
  uint64_t next_cookie_ = 1;
  std::unordered_map<uint64_t, Request*> awaiting_ack_;  // CMA sends by cookie
  // Acknowledgements handed to UCX that it has not sent yet. Shared with their completion
  // callbacks, which may run while the worker is destroyed, after this object's members.
  std::shared_ptr<size_t> acks_in_flight_ = std::make_shared<size_t>(0);
  std::string description_;
};

}  // namespace retort::collectives::ucx
