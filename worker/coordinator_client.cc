#include "worker/coordinator_client.h"

#include <chrono>

#include "rpc/grpc_status.h"
#include "rpc/metadata.h"

namespace retort::worker {

CoordinatorClient::CoordinatorClient(const std::string& address, int64_t rpc_timeout_ms,
                                     rpc::ClientSecurity security)
    : address_(address),
      security_(std::move(security)),
      rpc_timeout_ms_(rpc_timeout_ms),
      channel_(rpc::MakeCoordinatorChannel(address, security_)),
      stub_(v1::WorkerService::NewStub(channel_)) {}

void CoordinatorClient::AddCredentials(const std::string& member_id,
                                       grpc::ClientContext* ctx) const {
  rpc::AddTokenMetadata(security_, ctx);
  MutexLock lock(mu_);
  if (!member_id.empty() && member_id == member_id_)
    ctx->AddMetadata(rpc::kMemberSecretMetadata, member_secret_);
}

void CoordinatorClient::RememberMember(const v1::JoinResponse& joined) {
  MutexLock lock(mu_);
  member_id_ = joined.member_id();
  member_secret_ = joined.member_secret();
}

void CoordinatorClient::SetDeadline(grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(rpc_timeout_ms_));
}

#define RETORT_UNARY(Method, Req, Resp)                                        \
  StatusOr<Resp> CoordinatorClient::Method(const Req& r) {                     \
    grpc::ClientContext ctx;                                                   \
    SetDeadline(&ctx);                                                         \
    AddCredentials(r.member_id(), &ctx);                                       \
    Resp resp;                                                                 \
    grpc::Status s = stub_->Method(&ctx, r, &resp);                            \
    if (!s.ok()) return FromGrpcStatus(s).WithContext(#Method " " + address_); \
    return resp;                                                               \
  }

RETORT_UNARY(Heartbeat, v1::HeartbeatRequest, v1::HeartbeatResponse)
RETORT_UNARY(ReportPeerFailure, v1::PeerFailureReport, v1::PeerFailureResponse)
RETORT_UNARY(KvGet, v1::KvGetRequest, v1::KvGetResponse)
RETORT_UNARY(BeginCheckpoint, v1::BeginCheckpointRequest, v1::BeginCheckpointResponse)
RETORT_UNARY(AckCheckpoint, v1::AckCheckpointRequest, v1::AckCheckpointResponse)
RETORT_UNARY(GetCheckpoint, v1::GetCheckpointRequest, v1::GetCheckpointResponse)
#undef RETORT_UNARY

StatusOr<v1::JoinResponse> CoordinatorClient::Join(const v1::JoinRequest& r) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  AddCredentials("", &ctx);
  v1::JoinResponse resp;
  grpc::Status s = stub_->Join(&ctx, r, &resp);
  if (!s.ok()) return FromGrpcStatus(s).WithContext("Join " + address_);
  RememberMember(resp);
  return resp;
}

Status CoordinatorClient::Leave(const v1::LeaveRequest& r) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  AddCredentials(r.member_id(), &ctx);
  v1::LeaveResponse resp;
  return FromGrpcStatus(stub_->Leave(&ctx, r, &resp));
}

Status CoordinatorClient::KvPut(const v1::KvPutRequest& r) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  AddCredentials(r.member_id(), &ctx);
  v1::KvPutResponse resp;
  return FromGrpcStatus(stub_->KvPut(&ctx, r, &resp));
}

std::unique_ptr<CoordinatorClient::GenerationWatch> CoordinatorClient::WatchGenerations(
    const std::string& member_id, uint64_t after) {
  auto w = std::make_unique<GenerationWatch>();
  v1::WatchGenerationsRequest req;
  req.set_member_id(member_id);
  req.set_after_generation(after);
  AddCredentials(member_id, &w->context_);
  w->reader_ = stub_->WatchGenerations(&w->context_, req);
  return w;
}

Status CoordinatorClient::GenerationWatch::Finish() { return FromGrpcStatus(reader_->Finish()); }

}  // namespace retort::worker
