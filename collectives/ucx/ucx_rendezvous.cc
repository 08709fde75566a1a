// The UcxTransport parts beyond UCX's own tag matching: the single-copy CMA rendezvous for
// large same-host messages (protocol in ucx_transport.h) and the goodbye a rank sends before
// it closes its endpoints on purpose. Same threading as the rest of UcxTransport: the owning
// executor thread only (the active-message handlers run inside ucp_worker_progress there).
#include <algorithm>
#include <cstring>

#include "collectives/ucx/ucx_check.h"
#include "collectives/ucx/ucx_transport.h"
#include "collectives/ucx/ucx_wire.h"
#include "common/logging.h"

namespace retort::collectives::ucx {
namespace {

enum CmaAckCode : int32_t {
  kAckOk = 0,
  kAckLengthMismatch = 1,
  kAckReadFailed = 2,
  kAckSenderCancelled = 3
};

const char* AckCodeName(int32_t code) {
  switch (code) {
    case kAckLengthMismatch:
      return "the receive length differs (count or dtype differ between the ranks)";
    case kAckReadFailed:
      return "the receiver could not read this process's memory";
    case kAckSenderCancelled:
      return "the send was cancelled while the receiver read it";
    default:
      return "unknown acknowledgement code";
  }
}

// Copies an active message's header into `out`; false (drop the message) when it is not a
// Header or was not sent by a member of this generation (`wire_key`).
template <typename Header>
bool ReadHeader(const void* header, size_t header_length, uint64_t wire_key, Header* out) {
  if (header_length != sizeof(Header)) return false;
  std::memcpy(out, header, sizeof(Header));
  return out->key == wire_key;
}

}  // namespace

ucs_status_t UcxTransport::OnGoodbye(void* arg, const void* header, size_t header_length, void*,
                                     size_t, const ucp_am_recv_param_t*) {
  auto* t = static_cast<UcxTransport*>(arg);
  Goodbye goodbye;
  if (!ReadHeader(header, header_length, t->wire_key_, &goodbye)) return UCS_OK;
  const int32_t rank = goodbye.rank;
  if (rank >= 0 && rank < t->size_ && rank != t->rank_) t->peers_[rank].said_goodbye = true;
  return UCS_OK;
}

Status UcxTransport::PeerFailure(const Peer& peer, const std::string& what) const {
  if (peer.said_goodbye) {
    return UnavailableError(what + ": " + PeerName(peer.rank) +
                            " closed its communicator (after a failure of its own, an abort or "
                            "its destruction): " +
                            ucs_status_string(peer.error));
  }
  return UcxError(peer.error, what + ": " + PeerName(peer.rank) + " failed", __FILE__, __LINE__);
}

void UcxTransport::SayGoodbye() {
  for (Peer& peer : peers_) {
    if (peer.ep == nullptr || peer.error != UCS_OK || peer.rank == rank_) continue;
    auto* header = new Goodbye{wire_key_, rank_};  // UCX may keep the header until completion
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = [](void* request, ucs_status_t, void* user_data) {
      delete static_cast<Goodbye*>(user_data);
      ucp_request_free(request);
    };
    param.user_data = header;
    void* handle =
        ucp_am_send_nbx(peer.ep, kGoodbyeId, header, sizeof(*header), nullptr, 0, &param);
    if (handle == nullptr || UCS_PTR_IS_ERR(handle)) delete header;
  }
  // Give the messages a moment to leave (shared memory: they already have).
  const Deadline flush = Deadline::AfterMs(5);
  while (!flush.Expired() && ucp_worker_progress(worker_.get()) != 0) {
  }
}

bool UcxTransport::UseCma(int peer, size_t bytes) const {
  const size_t threshold = peers_[peer].cma_threshold;
  return threshold > 0 && bytes >= std::max(threshold, sizeof(CmaDescriptor));
}

void UcxTransport::ReadProtocolOfArrival(Request& r) {
  r.cma = ((r.info.sender_tag ^ wire_key_) & kCmaTagBit) != 0;
  if (r.cma) {
    // The descriptor landed at the start of the payload's buffer; CompleteCmaReceive checks
    // its length and magic before it trusts it.
    if (r.info.length == sizeof(CmaDescriptor)) {
      std::memcpy(&r.descriptor, r.landing, sizeof(CmaDescriptor));
    }
  } else if (r.on_landed && r.info.length == r.expected_bytes) {
    r.on_landed(r.expected_bytes);  // the payload came whole through UCX
  }
}

Status UcxTransport::CompleteCmaReceive(Request& r) {
  const CmaDescriptor& d = r.descriptor;
  const std::string what = "ucx: receive from " + PeerName(r.peer) + " of " +
                           std::to_string(r.expected_bytes) + " bytes";
  if (r.info.length != sizeof(CmaDescriptor) || d.magic != kCmaDescriptorMagic) {
    return InvalidArgumentError(what + ": the message was " + std::to_string(r.info.length) +
                                " bytes, not a large-message descriptor (count or dtype differ "
                                "between the ranks)");
  }
  if (d.bytes != r.expected_bytes) {
    SendCmaAck(r.peer, d.cookie, kAckLengthMismatch);
    return InvalidArgumentError(what + ": the message was " + std::to_string(d.bytes) +
                                " bytes (count or dtype differ between the ranks)");
  }
  const pid_t pid = peers_[r.peer].cma.pid;
  Status status = CmaRead(pid, r.landing, d.address, d.bytes, &r.on_landed);
  // The sender withdraws the cookie before it lets go of a cancelled buffer: still there
  // after the copy means the bytes were stable while they were read. (A failed copy is
  // checked the same way: a withdrawn buffer may already be unmapped.)
  uint64_t still_valid = 0;
  Status check = status.code() == StatusCode::kUnavailable
                     ? status
                     : CmaRead(pid, &still_valid, d.valid_address, sizeof(still_valid));
  if (check.code() == StatusCode::kUnavailable) {  // the sender's process is gone
    Peer& peer = peers_[r.peer];
    if (peer.error == UCS_OK) peer.error = UCS_ERR_CONNECTION_RESET;
    if (!peer.said_goodbye) peer.failed.store(true, std::memory_order_release);
    return check.WithContext(what);
  }
  if (!check.ok() || still_valid != d.cookie) {
    SendCmaAck(r.peer, d.cookie, kAckSenderCancelled);
    // The sender gave up on the operation (its own failure, abort or deadline): for this
    // rank the peer is unavailable, as if its connection had dropped.
    return UnavailableError(what + ": " + PeerName(r.peer) +
                            " withdrew the message while it was read (the sender cancelled "
                            "the operation)");
  }
  SendCmaAck(r.peer, d.cookie, status.ok() ? kAckOk : kAckReadFailed);
  return status.WithContext(what);
}

void UcxTransport::SendCmaAck(int peer, uint64_t cookie, int32_t code) {
  if (peers_[peer].ep == nullptr) return;
  // UCX may keep the header until completion; the counter outlives this transport.
  struct PendingAck {
    CmaAck ack;
    std::shared_ptr<size_t> in_flight;
  };
  auto* pending = new PendingAck{CmaAck{wire_key_, cookie, code}, acks_in_flight_};
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = [](void* request, ucs_status_t, void* user_data) {
    auto* sent = static_cast<PendingAck*>(user_data);
    --*sent->in_flight;
    delete sent;
    ucp_request_free(request);
  };
  param.user_data = pending;
  void* handle = ucp_am_send_nbx(peers_[peer].ep, kCmaAckId, &pending->ack, sizeof(CmaAck), nullptr,
                                 0, &param);
  if (handle == nullptr) {
    delete pending;  // completed in place; the callback does not run
  } else if (UCS_PTR_IS_ERR(handle)) {
    delete pending;
    LOG_WARN("ucx") << "acknowledging a message from " << PeerName(peer)
                    << " failed: " << ucs_status_string(UCS_PTR_STATUS(handle));
  } else {
    ++*acks_in_flight_;
  }
}

ucs_status_t UcxTransport::OnCmaAck(void* arg, const void* header, size_t header_length, void*,
                                    size_t, const ucp_am_recv_param_t*) {
  auto* t = static_cast<UcxTransport*>(arg);
  CmaAck ack;
  if (!ReadHeader(header, header_length, t->wire_key_, &ack)) return UCS_OK;
  auto it = t->awaiting_ack_.find(ack.cookie);
  if (it == t->awaiting_ack_.end()) return UCS_OK;  // the send was withdrawn meanwhile
  Request& r = *it->second;
  t->awaiting_ack_.erase(it);
  r.acked = true;
  if (ack.code != kAckOk) {
    r.cma_status = (ack.code == kAckLengthMismatch ? InvalidArgumentError : InternalError)(
        "ucx: send to " + PeerName(r.peer) + " of " + std::to_string(r.expected_bytes) +
        " bytes: " + AckCodeName(ack.code));
  }
  return UCS_OK;
}

void UcxTransport::WithdrawCmaSend(Request& r) {
  if (!r.cma || !r.send || r.acked) return;
  r.valid.store(0, std::memory_order_seq_cst);
  awaiting_ack_.erase(r.descriptor.cookie);
  r.acked = true;
  if (r.cma_status.ok())
    r.cma_status = AbortedError("ucx: send to " + PeerName(r.peer) + " cancelled");
}

}  // namespace retort::collectives::ucx
