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

template <typename Req, typename Resp>
StatusOr<Resp> CoordinatorClient::Call(const char* method, UnaryRpc<Req, Resp> rpc,
                                       const std::string& member_id, const Req& r) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  AddCredentials(member_id, &ctx);
  Resp resp;
  grpc::Status s = (stub_.get()->*rpc)(&ctx, r, &resp);
  if (!s.ok()) return FromGrpcStatus(s).WithContext(std::string(method) + " " + address_);
  return resp;
}

StatusOr<v1::JoinResponse> CoordinatorClient::Join(const v1::JoinRequest& r) {
  RETORT_ASSIGN_OR_RETURN(v1::JoinResponse resp, Call("Join", &Stub::Join, "", r));
  RememberMember(resp);
  return resp;
}
StatusOr<v1::HeartbeatResponse> CoordinatorClient::Heartbeat(const v1::HeartbeatRequest& r) {
  return Call("Heartbeat", &Stub::Heartbeat, r.member_id(), r);
}
Status CoordinatorClient::Leave(const v1::LeaveRequest& r) {
  return Call("Leave", &Stub::Leave, r.member_id(), r).status();
}
StatusOr<v1::PeerFailureResponse> CoordinatorClient::ReportPeerFailure(
    const v1::PeerFailureReport& r) {
  return Call("ReportPeerFailure", &Stub::ReportPeerFailure, r.member_id(), r);
}
Status CoordinatorClient::KvPut(const v1::KvPutRequest& r) {
  return Call("KvPut", &Stub::KvPut, r.member_id(), r).status();
}
StatusOr<v1::KvGetResponse> CoordinatorClient::KvGet(const v1::KvGetRequest& r) {
  return Call("KvGet", &Stub::KvGet, r.member_id(), r);
}
StatusOr<v1::BeginCheckpointResponse> CoordinatorClient::BeginCheckpoint(
    const v1::BeginCheckpointRequest& r) {
  return Call("BeginCheckpoint", &Stub::BeginCheckpoint, r.member_id(), r);
}
StatusOr<v1::AckCheckpointResponse> CoordinatorClient::AckCheckpoint(
    const v1::AckCheckpointRequest& r) {
  return Call("AckCheckpoint", &Stub::AckCheckpoint, r.member_id(), r);
}
StatusOr<v1::GetCheckpointResponse> CoordinatorClient::GetCheckpoint(
    const v1::GetCheckpointRequest& r) {
  return Call("GetCheckpoint", &Stub::GetCheckpoint, r.member_id(), r);
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
