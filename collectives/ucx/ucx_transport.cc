#include "collectives/ucx/ucx_transport.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "collectives/bootstrap_wait.h"
#include "collectives/ucx/ucx_check.h"
#include "collectives/ucx/ucx_wire.h"
#include "common/logging.h"

namespace retort::collectives::ucx {
namespace {

constexpr uint64_t kFullMask = ~uint64_t{0};
constexpr uint64_t kHelloGeneration = 0x7ff;  // reserved generation field of the hello
constexpr uint32_t kHelloSequence = 0xfffff;
constexpr char kRecordMagic[] = "retort-ucx3";
constexpr auto kCloseGrace = std::chrono::seconds(2);

// Hello payload: the generation, and whether the sender can read the receiver's memory.
struct Hello {
  uint64_t generation = 0;
  uint64_t can_read_you = 0;
};

// 64 bits from the kernel's random number generator.
StatusOr<uint64_t> RandomNonce() {
  uint64_t nonce = 0;
  auto* out = reinterpret_cast<char*>(&nonce);
  size_t got = 0;
  while (got < sizeof(nonce)) {
    const ssize_t n = getrandom(out + got, sizeof(nonce) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return InternalError(std::string("ucx: getrandom: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  return nonce;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

UcxTransport::UcxTransport(int rank, int size, uint64_t generation)
    : rank_(rank), size_(size), generation_(generation), peers_(static_cast<size_t>(size)) {}

StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(
    BootstrapStore* store, const std::string& key_prefix, int rank, int size, uint64_t generation,
    const UcxContextOptions& options, Deadline deadline, const std::function<bool()>& cancelled) {
  if (size < 1 || size > kMaxUcxWorldSize) {
    return InvalidArgumentError("ucx: world size " + std::to_string(size) + " outside [1, " +
                                std::to_string(kMaxUcxWorldSize) + "]");
  }
  if (rank < 0 || rank >= size) {
    return InvalidArgumentError("ucx: rank " + std::to_string(rank) + " outside [0, " +
                                std::to_string(size) + ")");
  }
  std::unique_ptr<UcxTransport> t(new UcxTransport(rank, size, generation));
  UcxContextOptions context_options = options;
  context_options.estimated_num_eps = static_cast<size_t>(size);
  t->spin_before_yield_ = options.spin_before_yield;
  t->cpu_sharing_ = CpuSharingDetector(options.yield_early_when_cpu_shared);
  t->spin_before_sleep_ = options.spin_before_sleep;
  t->sleep_quantum_ = options.sleep_quantum;
  t->cma_min_bytes_ = options.cma_min_bytes;
  t->cma_chooser_ = CmaChooser(options.cma_policy);
  if (t->cma_min_bytes_ > 0) {
    t->local_cma_ = LocalCmaIdentity();
    if (options.cma_policy != CmaPolicy::kNever) AllowSameUserPeersToReadMemory();
  }
  RETORT_ASSIGN_OR_RETURN(t->nonce_, RandomNonce());
  t->wire_key_ = t->nonce_;
  RETORT_ASSIGN_OR_RETURN(t->context_, CreateUcpContext(context_options));
  RETORT_ASSIGN_OR_RETURN(t->worker_, CreateUcpWorker(t->context_.get()));
  ucp_am_handler_param_t am{};
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG;
  am.id = kCmaAckId;
  am.cb = &UcxTransport::OnCmaAck;
  am.arg = t.get();
  UCX_CHECK(ucp_worker_set_am_recv_handler(t->worker_.get(), &am),
            "registering the CMA acknowledgement handler");
  am.id = kGoodbyeId;
  am.cb = &UcxTransport::OnGoodbye;
  UCX_CHECK(ucp_worker_set_am_recv_handler(t->worker_.get(), &am),
            "registering the goodbye handler");
  RETORT_RETURN_IF_ERROR(t->Connect(store, key_prefix, deadline, cancelled));
  RETORT_RETURN_IF_ERROR(t->ExchangeHello(deadline, cancelled));
  t->description_ = t->Describe();
  return t;
}

UcxTransport::~UcxTransport() {
  if (worker_ == nullptr) return;
  CloseEndpoints(/*force=*/closed_);
}

Status UcxTransport::BootstrapCancelled(const std::string& waiting_for) const {
  return AbortedError("ucx: bootstrap of generation " + std::to_string(generation_) + " (rank " +
                      std::to_string(rank_) + " of " + std::to_string(size_) +
                      ") cancelled while waiting for " + waiting_for +
                      ": the communicator is obsolete (a newer generation was published)");
}

Status UcxTransport::Connect(BootstrapStore* store, const std::string& key_prefix,
                             Deadline deadline, const std::function<bool()>& cancelled) {
  RETORT_ASSIGN_OR_RETURN(std::string address, WorkerAddress(worker_.get()));
  std::ostringstream record;
  record << kRecordMagic << ' ' << generation_ << ' ' << rank_ << ' ' << size_ << ' '
         << cma_min_bytes_ << ' ' << (local_cma_.boot_id.empty() ? "-" : local_cma_.boot_id) << ' '
         << local_cma_.pid_namespace << ' ' << local_cma_.pid << ' ' << local_cma_.probe_address
         << ' ' << nonce_ << '\n'
         << address;
  RETORT_RETURN_IF_ERROR(
      store->Set(key_prefix + "/rank" + std::to_string(rank_), record.str(), deadline));
  for (int p = 0; p < size_; ++p) {
    peers_[p].transport = this;
    peers_[p].rank = p;
    if (p == rank_) continue;
    const std::string key = key_prefix + "/rank" + std::to_string(p);
    RETORT_ASSIGN_OR_RETURN(std::string value,
                            GetUnlessCancelled(
                                store, key, deadline, cancelled,
                                [&] { return BootstrapCancelled("the store key '" + key + "'"); },
                                std::chrono::milliseconds(kBootstrapPollMs)));
    const size_t newline = value.find('\n');
    std::istringstream header(value.substr(0, newline == std::string::npos ? 0 : newline));
    std::string magic;
    uint64_t peer_generation = 0;
    int peer_rank = -1;
    int peer_size = -1;
    Peer& peer = peers_[p];
    uint64_t peer_nonce = 0;
    header >> magic >> peer_generation >> peer_rank >> peer_size >> peer.cma_min_bytes >>
        peer.cma.boot_id >> peer.cma.pid_namespace >> peer.cma.pid >> peer.cma.probe_address >>
        peer_nonce;
    if (newline == std::string::npos || magic != kRecordMagic || header.fail()) {
      return DataLossError("ucx: store key '" + key + "' does not hold a UCX address record");
    }
    if (peer_generation != generation_) {
      return FailedPreconditionError(
          "ucx: " + PeerName(p) + " published generation " + std::to_string(peer_generation) +
          " under '" + key + "', this communicator is generation " + std::to_string(generation_) +
          ": refusing to connect to another generation");
    }
    if (peer_rank != p || peer_size != size_) {
      return FailedPreconditionError("ucx: record under '" + key + "' is rank " +
                                     std::to_string(peer_rank) + " of " +
                                     std::to_string(peer_size) + ", expected rank " +
                                     std::to_string(p) + " of " + std::to_string(size_));
    }
    wire_key_ ^= peer_nonce;
    if (cma_min_bytes_ > 0 && peer.cma_min_bytes > 0) {
      peer.can_read = CanReadPeerMemory(local_cma_, peer.cma);
    }
    const std::string peer_address = value.substr(newline + 1);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxTransport::OnPeerError;
    params.err_handler.arg = &peers_[p];
    UCX_CHECK(ucp_ep_create(worker_.get(), &params, &peers_[p].ep),
              "creating the endpoint to " + PeerName(p));
  }
  return Status::Ok();
}

Status UcxTransport::ExchangeHello(Deadline deadline, const std::function<bool()>& cancelled) {
  std::vector<Hello> received(static_cast<size_t>(size_));
  std::vector<Hello> mine(static_cast<size_t>(size_));
  for (int p = 0; p < size_; ++p) mine[p] = Hello{generation_, peers_[p].can_read ? 1u : 0u};
  // The wait loop calls `background` every few hundred polls; it checks `cancelled` at most
  // every kBootstrapPollMs (the check may take a lock) and raises the abort flag Wait watches.
  std::atomic<bool> cancel_requested{false};
  SteadyClock::time_point next_check = SteadyClock::now();
  const std::function<void()> poll_cancelled = [&] {
    const auto now = SteadyClock::now();
    if (now < next_check) return;
    next_check = now + std::chrono::milliseconds(kBootstrapPollMs);
    if (cancelled()) cancel_requested.store(true, std::memory_order_relaxed);
  };
  WaitControl control{deadline, cancelled ? &cancel_requested : nullptr, nullptr,
                      cancelled ? &poll_cancelled : nullptr};
  Status status;
  const MessageTag tag{true, kHelloSequence, 0};
  // Every receive is posted before any send; a hello's tag names its sender.
  for (const bool send : {false, true}) {
    for (int p = 0; p < size_ && status.ok(); ++p) {
      if (p == rank_) continue;
      auto id = Post(send, p, WireTag(kHelloGeneration, send ? rank_ : p, tag),
                     send ? &mine[p] : &received[p], sizeof(Hello), false);
      if (id.ok())
        operation_requests_.push_back(std::move(*id));
      else
        status = id.status();
    }
  }
  status = FinishOperation(status, control);
  if (cancel_requested.load(std::memory_order_relaxed)) {  // FinishOperation shut it down
    return BootstrapCancelled("the hello of every peer");
  }
  RETORT_RETURN_IF_ERROR(status.WithContext("ucx: hello exchange"));
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && received[p].generation != generation_) {
      closed_ = true;
      return FailedPreconditionError("ucx: " + PeerName(p) + " says it is generation " +
                                     std::to_string(received[p].generation) +
                                     ", this communicator is generation " +
                                     std::to_string(generation_) + ": refused");
    }
  }
  // CMA with a peer only when both ends allow it and each can read the other's memory, so
  // both agree on which messages take the rendezvous.
  for (int p = 0; p < size_; ++p) {
    Peer& peer = peers_[p];
    if (p == rank_ || !peer.can_read || received[p].can_read_you == 0) continue;
    peer.cma_threshold = std::max(cma_min_bytes_, peer.cma_min_bytes);
  }
  return Status::Ok();
}

void UcxTransport::OnPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  if (peer->error == UCS_OK) peer->error = status;
  if (!peer->said_goodbye) peer->failed.store(true, std::memory_order_release);
}

std::vector<int> UcxTransport::FailedPeers() const {
  std::vector<int> failed;
  for (const Peer& p : peers_)
    if (p.failed.load(std::memory_order_acquire)) failed.push_back(p.rank);
  return failed;
}

uint64_t UcxTransport::WireTag(uint64_t generation, int source, MessageTag tag) const {
  return TagFields(generation, source, tag) ^ wire_key_;
}

StatusOr<std::unique_ptr<UcxTransport::Request>> UcxTransport::Post(bool send, int peer,
                                                                    uint64_t wire_tag, void* data,
                                                                    size_t bytes, bool cma) {
  if (closed_) return AbortedError("ucx: transport shut down after an earlier failure");
  if (peers_[peer].error != UCS_OK) {
    return PeerFailure(peers_[peer], "ucx: posting to " + PeerName(peer));
  }
  auto request = std::make_unique<Request>();
  request->send = send;
  request->peer = peer;
  request->expected_bytes = bytes;
  void* wire_data = data;  // what UCX moves: the payload, or the CMA descriptor
  size_t wire_bytes = bytes;
  uint64_t mask = kFullMask;
  if (send && cma) {
    request->cma = true;
    wire_data = &request->descriptor;
    wire_bytes = sizeof(CmaDescriptor);
    wire_tag ^= kCmaTagBit;
    const uint64_t cookie = next_cookie_++;
    request->valid.store(cookie, std::memory_order_release);
    request->descriptor = CmaDescriptor{kCmaDescriptorMagic, reinterpret_cast<uint64_t>(data),
                                        bytes, cookie, reinterpret_cast<uint64_t>(&request->valid)};
    awaiting_ack_[cookie] = request.get();
  } else if (!send && peers_[peer].cma_threshold > 0) {
    // Either protocol may arrive (the sender chooses per message): match both, and read the
    // CMA flag of the tag that arrived in Poll. A descriptor lands at the start of `data`.
    request->cma_possible = true;
    request->landing = data;
    mask &= ~kCmaTagBit;
  }
  ucp_request_param_t param{};
  void* handle;
  if (send) {
    handle = ucp_tag_send_nbx(peers_[peer].ep, wire_data, wire_bytes, wire_tag, &param);
  } else {
    // UCX 1.13 leaves recv_info unset on immediate completion: always get a request so
    // ucp_tag_recv_request_test reports the received length and tag.
    param.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.recv_info.tag_info = &request->info;
    handle = ucp_tag_recv_nbx(worker_.get(), wire_data, wire_bytes, wire_tag, mask, &param);
  }
  if (UCS_PTR_IS_ERR(handle)) {
    if (request->cma && send) awaiting_ack_.erase(request->descriptor.cookie);
    return UcxError(UCS_PTR_STATUS(handle),
                    std::string("ucx: posting a ") + (send ? "send to " : "receive from ") +
                        PeerName(peer) + " of " + std::to_string(bytes) + " bytes",
                    __FILE__, __LINE__);
  }
  if (handle == nullptr) {  // sends only: receives always get a request
    request->ucx_done = true;
    request->finished = !request->cma;
  } else {
    request->ucx_request = handle;
  }
  return request;
}

void UcxTransport::BeginOperation(OperationKind kind, size_t bytes) {
  operation_kind_ = kind;
  operation_bytes_ = bytes;
  operation_start_ = SteadyClock::now();
  operation_cma_.reset();
  operation_same_host_bytes_ = 0;
}

bool UcxTransport::ChooseCmaForOperationSend(int peer, size_t bytes) {
  if (!UseCma(peer, bytes)) return false;
  if (!operation_cma_.has_value())
    operation_cma_ = cma_chooser_.UseCmaFor(operation_kind_, operation_bytes_);
  operation_same_host_bytes_ += bytes;
  return *operation_cma_;
}

StatusOr<Transport::RequestId> UcxTransport::PostSend(int peer, MessageTag tag, const void* data,
                                                      size_t bytes) {
  const bool cma = ChooseCmaForOperationSend(peer, bytes);
  RETORT_ASSIGN_OR_RETURN(auto request, Post(true, peer, WireTag(generation_, rank_, tag),
                                             const_cast<void*>(data), bytes, cma));
  operation_requests_.push_back(std::move(request));
  return operation_requests_.size() - 1;
}

StatusOr<Transport::RequestId> UcxTransport::PostRecv(int peer, MessageTag tag, void* data,
                                                      size_t bytes) {
  RETORT_ASSIGN_OR_RETURN(auto request,
                          Post(false, peer, WireTag(generation_, peer, tag), data, bytes, false));
  operation_requests_.push_back(std::move(request));
  return operation_requests_.size() - 1;
}

bool UcxTransport::SetLandedCallback(RequestId request, std::function<void(size_t)> on_landed) {
  Request& r = *operation_requests_[request];
  if (!r.cma_possible) return false;
  r.on_landed = std::move(on_landed);
  return true;
}

bool UcxTransport::Poll(Request& r) {
  if (r.finished) return true;
  if (!r.ucx_done) {
    ucs_status_t status = r.send ? ucp_request_check_status(r.ucx_request)
                                 : ucp_tag_recv_request_test(r.ucx_request, &r.info);
    if (status == UCS_INPROGRESS) return false;
    ucp_request_free(r.ucx_request);
    r.ucx_request = nullptr;
    r.ucx_done = true;
    r.status = status;
    if (r.cma_possible && status == UCS_OK) ReadProtocolOfArrival(r);
    if (!r.cma || status != UCS_OK) {
      if (r.cma && r.send) WithdrawCmaSend(r);
      r.finished = true;
      return true;
    }
  }
  // The CMA descriptor went through; the payload is still to be read (receive) or
  // acknowledged (send).
  if (r.send) {
    if (!r.acked) return false;
  } else {
    r.cma_status = CompleteCmaReceive(r);
  }
  r.finished = true;
  return true;
}

std::string UcxTransport::Describe() {
  std::string text;
  for (const Peer& peer : peers_) {
    if (peer.rank == rank_ || peer.ep == nullptr) continue;
    text += "rank " + std::to_string(rank_) + " -> " + PeerName(peer.rank) + ": cma " +
            (peer.cma_threshold > 0 ? ">= " + std::to_string(peer.cma_threshold) + " bytes"
                                    : std::string("off")) +
            "\n";
    char* buffer = nullptr;
    size_t length = 0;
    FILE* stream = open_memstream(&buffer, &length);
    if (stream == nullptr) continue;
    ucp_ep_print_info(peer.ep, stream);
    std::fclose(stream);
    text.append(buffer, length);
    std::free(buffer);
  }
  return text;
}

Status UcxTransport::Result(const Request& r) const {
  const bool ok = r.status == UCS_OK && (r.send || r.cma || r.info.length == r.expected_bytes);
  if (ok) return r.cma_status;
  const std::string what = std::string("ucx: ") + (r.send ? "send to " : "receive from ") +
                           PeerName(r.peer) + " of " + std::to_string(r.expected_bytes) + " bytes";
  if (r.status != UCS_OK) {
    if (peers_[r.peer].error != UCS_OK) {
      return PeerFailure(peers_[r.peer], what + " failed");
    }
    return UcxError(r.status, what, __FILE__, __LINE__);
  }
  return InvalidArgumentError(what + ": the message was " + std::to_string(r.info.length) +
                              " bytes (count or dtype differ between the ranks)");
}

bool UcxTransport::WaitingOn(int peer) {
  for (auto& r : operation_requests_)
    if (r->peer == peer && !Poll(*r)) return true;
  return false;
}

Status UcxTransport::CheckPeers() {
  for (const Peer& peer : peers_) {
    if (peer.error == UCS_OK) continue;
    // A peer that said goodbye finished (or gave up) on its own; once everything this
    // operation exchanges with it is done, its closed endpoint is no failure of ours (a rank
    // that completed a collective may close before its neighbours have). A peer that vanished
    // without a goodbye fails the operation at once.
    if (peer.said_goodbye && !WaitingOn(peer.rank)) continue;
    return PeerFailure(peer, "ucx");
  }
  return Status::Ok();
}

template <typename Done, typename WaitingFor>
Status UcxTransport::ProgressUntil(const Done& done, const WaitControl& control,
                                   const WaitingFor& waiting_for) {
  uint64_t spins = 0;
  unsigned idle = 0;
  SteadyClock::time_point idle_since;
  for (;;) {
    if (done()) return Status::Ok();
    if (ucp_worker_progress(worker_.get()) != 0) {
      idle = 0;
    } else {
      // The peer may be a hyperthread sibling copying our data (CMA): spin politely.
      CpuRelax();
      if ((++idle & 63) == 0) {
        // Spin while the peer is likely to answer soon; give the CPU away only after a longer
        // quiet spell, since on a busy host a yield can cost a whole scheduler time slice;
        // but from the start while other waiters share this CPU (cpu_sharing.h), since then
        // spinning only delays the peer.
        const auto now = SteadyClock::now();
        if (idle == 64) idle_since = now;
        if (spin_before_sleep_.count() >= 0 && now - idle_since > spin_before_sleep_) {
          std::this_thread::sleep_for(sleep_quantum_);
        } else if (spin_before_yield_.count() >= 0 &&
                   (cpu_sharing_.shared() || now - idle_since > spin_before_yield_)) {
          cpu_sharing_.Yield();
        }
      }
    }
    if ((++spins & 127) == 0) {
      if (control.background != nullptr) (*control.background)();
      RETORT_RETURN_IF_ERROR(CheckPeers());
      if (control.Aborted()) return AbortedError("ucx: operation aborted");
      if (control.deadline.Expired())
        return DeadlineExceededError("ucx: timed out " + waiting_for());
    }
  }
}

Status UcxTransport::Wait(RequestId id, const WaitControl& control) {
  Request& request = *operation_requests_[id];
  RETORT_RETURN_IF_ERROR(ProgressUntil([&] { return Poll(request); }, control,
                                       [&] {
                                         return std::string("waiting for a ") +
                                                (request.send ? "send to " : "receive from ") +
                                                PeerName(request.peer) + " of " +
                                                std::to_string(request.expected_bytes) + " bytes";
                                       }));
  return Result(request);
}

Status UcxTransport::FlushCmaAcks(const WaitControl& control) {
  return ProgressUntil([&] { return *acks_in_flight_ == 0; }, control,
                       [&] {
                         return "sending " + std::to_string(*acks_in_flight_) +
                                " large-message acknowledgement(s)";
                       });
}

Status UcxTransport::FinishOperation(Status status, const WaitControl& control) {
  for (size_t i = 0; i < operation_requests_.size() && status.ok(); ++i) {
    status = Wait(i, control);
  }
  if (status.ok()) status = FlushCmaAcks(control);
  if (!status.ok()) {
    std::vector<Request*> none;
    Shutdown(none);
  } else if (operation_cma_.has_value()) {
    RecordOperationProtocol();
  }
  operation_requests_.clear();
  operation_cma_.reset();
  operation_same_host_bytes_ = 0;
  return status;
}

void UcxTransport::RecordOperationProtocol() {
  const OperationKind kind = operation_kind_;
  const size_t bytes = operation_bytes_;
  const std::optional<bool> before = cma_chooser_.PrefersCma(kind, bytes);
  cma_chooser_.Record(kind, bytes, *operation_cma_, operation_same_host_bytes_,
                      SteadyClock::now() - operation_start_);
  const std::optional<bool> after = cma_chooser_.PrefersCma(kind, bytes);
  if (after.has_value() && after != before) {
    LOG_DEBUG("ucx") << "rank " << rank_ << " of " << size_ << ": same-host sends of "
                     << OperationKindName(kind) << "s of " << bytes << " bytes now go through "
                     << (*after ? "CMA" : "the FIFO") << " (CMA "
                     << cma_chooser_.RateFor(kind, bytes, true) / 1e9 << " GB/s, FIFO "
                     << cma_chooser_.RateFor(kind, bytes, false) / 1e9 << " GB/s)";
  }
}

StatusOr<std::unique_ptr<UcxTransport::Request>> UcxTransport::PostDetachedSend(int peer,
                                                                                MessageTag tag,
                                                                                const void* data,
                                                                                size_t bytes) {
  return Post(true, peer, WireTag(generation_, rank_, tag), const_cast<void*>(data), bytes,
              UseCma(peer, bytes) && cma_chooser_.UseCmaUnmeasured());
}

StatusOr<std::unique_ptr<UcxTransport::Request>> UcxTransport::PostDetachedRecv(int peer,
                                                                                MessageTag tag,
                                                                                void* data,
                                                                                size_t bytes) {
  return Post(false, peer, WireTag(generation_, peer, tag), data, bytes, false);
}

StatusOr<std::unique_ptr<UcxTransport::Request>>
UcxTransport::PostDetachedSendWithGenerationForTesting(int peer, uint64_t generation,
                                                       MessageTag tag, const void* data,
                                                       size_t bytes) {
  return Post(true, peer, WireTag(generation, rank_, tag), const_cast<void*>(data), bytes, false);
}

std::optional<Status> UcxTransport::PollDetached(Request& request) {
  if (!request.finished || *acks_in_flight_ > 0) ucp_worker_progress(worker_.get());
  // A finished receive reports once its acknowledgement has left (see the header).
  if (Poll(request) && *acks_in_flight_ == 0) return Result(request);
  if (peers_[request.peer].error != UCS_OK) {
    return PeerFailure(peers_[request.peer], "ucx");
  }
  Status peers = CheckPeers();
  if (!peers.ok()) return peers;
  return std::nullopt;
}

void UcxTransport::Shutdown(std::vector<Request*> detached) {
  std::vector<Request*> all = std::move(detached);
  for (auto& r : operation_requests_) all.push_back(r.get());
  for (Request* r : all) {
    if (r->finished) continue;
    WithdrawCmaSend(*r);  // first: a receiver reading the buffer now will not trust it
    if (!r->send && !r->ucx_done) ucp_request_cancel(worker_.get(), r->ucx_request);
  }
  if (!closed_) CloseEndpoints(/*force=*/true);  // completes outstanding sends with errors
  closed_ = true;
  const Deadline grace = Deadline::After(kCloseGrace);
  for (Request* r : all) {
    while (!Poll(*r) && !grace.Expired()) ucp_worker_progress(worker_.get());
    if (!r->finished) {
      LOG_ERROR("ucx") << "request to " << PeerName(r->peer) << " did not finish after cancel";
    }
  }
}

void UcxTransport::CloseEndpoints(bool force) {
  SayGoodbye();
  const Deadline deadline = Deadline::After(kCloseGrace);
  std::vector<void*> pending;
  for (Peer& peer : peers_) {
    if (peer.ep == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force || peer.error != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* request = ucp_ep_close_nbx(peer.ep, &param);
    peer.ep = nullptr;
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) pending.push_back(request);
  }
  for (void* request : pending) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS && !deadline.Expired()) {
      ucp_worker_progress(worker_.get());
    }
    // Released also when still in progress (a peer cut off over TCP can hold a close past the
    // grace): UCX finishes it internally, and destroying the worker with a close request the
    // application never released aborts the process (ucp_ep.c assertion in UCX 1.13).
    ucp_request_free(request);
  }
}

}  // namespace retort::collectives::ucx
