// Client side of the coordinator's gRPC services, with a deadline on every call.
// Thread-safe: one instance is shared by a worker's heartbeat, watch and training threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/mutex.h"
#include "common/status.h"
#include "retort/v1/retort.grpc.pb.h"
#include "rpc/client_channel.h"

namespace retort::worker {

// Every call carries the bearer token of `security` (if any) and, when made for the member this
// client last joined as, that member's secret (JoinResponse.member_secret).
class CoordinatorClient {
 public:
  CoordinatorClient(const std::string& address, int64_t rpc_timeout_ms,
                    rpc::ClientSecurity security = {});

  StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& r);
  StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& r);
  Status Leave(const v1::LeaveRequest& r);
  StatusOr<v1::PeerFailureResponse> ReportPeerFailure(const v1::PeerFailureReport& r);
  Status KvPut(const v1::KvPutRequest& r);
  StatusOr<v1::KvGetResponse> KvGet(const v1::KvGetRequest& r);
  StatusOr<v1::BeginCheckpointResponse> BeginCheckpoint(const v1::BeginCheckpointRequest& r);
  StatusOr<v1::AckCheckpointResponse> AckCheckpoint(const v1::AckCheckpointRequest& r);
  StatusOr<v1::GetCheckpointResponse> GetCheckpoint(const v1::GetCheckpointRequest& r);

  // A server stream of generations. Read() blocks until the next generation or the stream ends;
  // Cancel() (any thread) makes a blocked Read() return false promptly.
  class GenerationWatch {
   public:
    bool Read(v1::Generation* out) { return reader_->Read(out); }
    void Cancel() { context_.TryCancel(); }
    Status Finish();

   private:
    friend class CoordinatorClient;
    grpc::ClientContext context_;
    std::unique_ptr<grpc::ClientReader<v1::Generation>> reader_;
  };
  std::unique_ptr<GenerationWatch> WatchGenerations(const std::string& member_id, uint64_t after);

  const std::string& address() const { return address_; }

 private:
  using Stub = v1::WorkerService::Stub;
  template <typename Req, typename Resp>
  using UnaryRpc = grpc::Status (Stub::*)(grpc::ClientContext*, const Req&, Resp*);
  // One unary call with this client's deadline and the credentials for `member_id`; an error
  // names the method and the coordinator's address.
  template <typename Req, typename Resp>
  StatusOr<Resp> Call(const char* method, UnaryRpc<Req, Resp> rpc, const std::string& member_id,
                      const Req& r);
  void SetDeadline(grpc::ClientContext* ctx) const;
  // Token and, for `member_id` when it is the member last joined as, its secret.
  void AddCredentials(const std::string& member_id, grpc::ClientContext* ctx) const
      RETORT_EXCLUDES(mu_);
  void RememberMember(const v1::JoinResponse& joined) RETORT_EXCLUDES(mu_);

  const std::string address_;
  const rpc::ClientSecurity security_;
  mutable Mutex mu_;
  // From the last successful Join.
  std::string member_id_ RETORT_GUARDED_BY(mu_);
  std::string member_secret_ RETORT_GUARDED_BY(mu_);
  const int64_t rpc_timeout_ms_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
};

}  // namespace retort::worker
