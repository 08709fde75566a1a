#include "coordinator/services.h"

#include "coordinator/request_limits.h"
#include "coordinator/streams.h"
#include "rpc/grpc_status.h"
#include "rpc/metadata.h"

namespace retort::coordinator {
namespace {

// RESOURCE_EXHAUSTED when `req` is larger than `cap` bytes; OK otherwise.
template <typename Req>
retort::Status CheckSize(const Req& req, size_t cap, const char* method) {
  const size_t bytes = req.ByteSizeLong();
  if (bytes <= cap) return retort::Status::Ok();
  return ResourceExhaustedError(std::string(method) + " request of " + std::to_string(bytes) +
                                " bytes exceeds its limit of " + std::to_string(cap));
}

grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx, ServiceGuards* guards,
                                 const char* method, const retort::Status& s) {
  guards->refusals().Refused(method, guards->DescribePeer(*ctx), s.ToString());
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

// Finishes a unary call with the result of a StatusOr-returning Coordinator method.
template <typename Resp, typename Result>
grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* ctx, ServiceGuards* guards,
                                     const char* method, Resp* resp, Result&& result) {
  if (!result.ok()) return Refuse(ctx, guards, method, result.status());
  *resp = std::move(result).value();
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* FinishStatus(grpc::CallbackServerContext* ctx, ServiceGuards* guards,
                                       const char* method, const retort::Status& s) {
  if (!s.ok()) return Refuse(ctx, guards, method, s);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace

std::string PeerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string::npos || colon == scheme) return peer;
  return peer.substr(0, colon);
}

bool ServiceGuards::AcquireEventStream(const std::string& host) {
  MutexLock lock(mu_);
  int& n = event_streams_[host];
  if (n >= kMaxEventStreamsPerHost) return false;
  ++n;
  return true;
}

void ServiceGuards::ReleaseEventStream(const std::string& host) {
  MutexLock lock(mu_);
  auto it = event_streams_.find(host);
  if (it == event_streams_.end()) return;
  if (--it->second <= 0) event_streams_.erase(it);
}

std::string ServiceGuards::DescribePeer(const grpc::ServerContextBase& ctx) {
  return ctx.peer() + " (" + (authorizer_ ? authorizer_->Describe(ctx) : "no identity") + ")";
}

retort::Status ServiceGuards::Admit(const grpc::ServerContextBase& ctx, Role role) {
  return authorizer_ ? authorizer_->Authorize(ctx, role) : retort::Status::Ok();
}

std::string MemberSecretOf(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(rpc::kMemberSecretMetadata);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

// The checks every call passes before it reaches the Coordinator, in order: the caller's role,
// the request's size, and (for calls made for a member) that member's secret.
#define RETORT_ADMIT(role, method, cap, member_id)                      \
  do {                                                                  \
    retort::Status admitted = guards_->Admit(*ctx, role);               \
    if (admitted.ok()) admitted = CheckSize(*req, cap, method);         \
    const std::string* member = (member_id);                            \
    if (admitted.ok() && member != nullptr)                             \
      admitted = c_->AuthenticateMember(*member, MemberSecretOf(*ctx)); \
    if (!admitted.ok()) return Refuse(ctx, guards_, method, admitted);  \
  } while (0)

// A worker call made for the request's member.
#define RETORT_MEMBER_CALL(method, cap, finish, ...)             \
  do {                                                           \
    RETORT_ADMIT(Role::kWorker, method, cap, &req->member_id()); \
    return finish(ctx, guards_, method, __VA_ARGS__);            \
  } while (0)

// A call made for no member (Join, operator calls).
#define RETORT_SIZED_CALL(role, method, cap, finish, ...)                      \
  do {                                                                         \
    RETORT_ADMIT(role, method, cap, static_cast<const std::string*>(nullptr)); \
    return finish(ctx, guards_, method, __VA_ARGS__);                          \
  } while (0)

grpc::ServerUnaryReactor* WorkerServiceImpl::Join(grpc::CallbackServerContext* ctx,
                                                  const v1::JoinRequest* req,
                                                  v1::JoinResponse* resp) {
  RETORT_SIZED_CALL(Role::kWorker, "Join", kMaxJoinRequestBytes, FinishWith, resp, c_->Join(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                       const v1::HeartbeatRequest* req,
                                                       v1::HeartbeatResponse* resp) {
  RETORT_MEMBER_CALL("Heartbeat", kMaxHeartbeatRequestBytes, FinishWith, resp, c_->Heartbeat(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::Leave(grpc::CallbackServerContext* ctx,
                                                   const v1::LeaveRequest* req,
                                                   v1::LeaveResponse*) {
  RETORT_MEMBER_CALL("Leave", kMaxLeaveRequestBytes, FinishStatus, c_->Leave(*req));
}
grpc::ServerWriteReactor<v1::Generation>* WorkerServiceImpl::WatchGenerations(
    grpc::CallbackServerContext* ctx, const v1::WatchGenerationsRequest* req) {
  retort::Status admitted = guards_->Admit(*ctx, Role::kWorker);
  if (admitted.ok()) admitted = CheckSize(*req, kMaxSmallRequestBytes, "WatchGenerations");
  if (admitted.ok()) admitted = c_->AuthenticateMember(req->member_id(), MemberSecretOf(*ctx));
  return new GenerationStream(c_, req->member_id(), req->after_generation(), &guards_->refusals(),
                              guards_->DescribePeer(*ctx), admitted);
}
grpc::ServerUnaryReactor* WorkerServiceImpl::ReportPeerFailure(grpc::CallbackServerContext* ctx,
                                                               const v1::PeerFailureReport* req,
                                                               v1::PeerFailureResponse* resp) {
  RETORT_MEMBER_CALL("ReportPeerFailure", kMaxPeerFailureReportBytes, FinishWith, resp,
                     c_->ReportPeerFailure(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::KvPut(grpc::CallbackServerContext* ctx,
                                                   const v1::KvPutRequest* req,
                                                   v1::KvPutResponse*) {
  RETORT_MEMBER_CALL("KvPut", kMaxKvPutRequestBytes, FinishStatus, c_->KvPut(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::KvGet(grpc::CallbackServerContext* ctx,
                                                   const v1::KvGetRequest* req,
                                                   v1::KvGetResponse* resp) {
  RETORT_MEMBER_CALL("KvGet", kMaxSmallRequestBytes, FinishWith, resp, c_->KvGet(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::BeginCheckpoint(grpc::CallbackServerContext* ctx,
                                                             const v1::BeginCheckpointRequest* req,
                                                             v1::BeginCheckpointResponse* resp) {
  RETORT_MEMBER_CALL("BeginCheckpoint", kMaxSmallRequestBytes, FinishWith, resp,
                     c_->BeginCheckpoint(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::AckCheckpoint(grpc::CallbackServerContext* ctx,
                                                           const v1::AckCheckpointRequest* req,
                                                           v1::AckCheckpointResponse* resp) {
  RETORT_MEMBER_CALL("AckCheckpoint", kMaxAckCheckpointRequestBytes, FinishWith, resp,
                     c_->AckCheckpoint(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::GetCheckpoint(grpc::CallbackServerContext* ctx,
                                                           const v1::GetCheckpointRequest* req,
                                                           v1::GetCheckpointResponse* resp) {
  RETORT_MEMBER_CALL("GetCheckpoint", kMaxSmallRequestBytes, FinishWith, resp,
                     c_->GetCheckpoint(*req));
}

grpc::ServerUnaryReactor* ControlServiceImpl::Status(grpc::CallbackServerContext* ctx,
                                                     const v1::StatusRequest* req,
                                                     v1::StatusResponse* resp) {
  RETORT_ADMIT(Role::kOperator, "Status", kMaxControlRequestBytes,
               static_cast<const std::string*>(nullptr));
  *resp = c_->GetStatus();
  return FinishStatus(ctx, guards_, "Status", retort::Status::Ok());
}
grpc::ServerWriteReactor<v1::Event>* ControlServiceImpl::Watch(grpc::CallbackServerContext* ctx,
                                                               const v1::WatchRequest* req) {
  retort::Status admitted = guards_->Admit(*ctx, Role::kOperator);
  if (admitted.ok()) admitted = CheckSize(*req, kMaxControlRequestBytes, "Watch");
  return new EventStream(c_, guards_, ctx->peer(), guards_->DescribePeer(*ctx), admitted);
}
grpc::ServerUnaryReactor* ControlServiceImpl::Pause(grpc::CallbackServerContext* ctx,
                                                    const v1::PauseRequest* req,
                                                    v1::ControlResponse* resp) {
  RETORT_SIZED_CALL(Role::kOperator, "Pause", kMaxControlRequestBytes, FinishWith, resp,
                    c_->Pause());
}
grpc::ServerUnaryReactor* ControlServiceImpl::Resume(grpc::CallbackServerContext* ctx,
                                                     const v1::ResumeRequest* req,
                                                     v1::ControlResponse* resp) {
  RETORT_SIZED_CALL(Role::kOperator, "Resume", kMaxControlRequestBytes, FinishWith, resp,
                    c_->Resume());
}
grpc::ServerUnaryReactor* ControlServiceImpl::Checkpoint(grpc::CallbackServerContext* ctx,
                                                         const v1::CheckpointRequest* req,
                                                         v1::CheckpointResponse* resp) {
  RETORT_SIZED_CALL(Role::kOperator, "Checkpoint", kMaxControlRequestBytes, FinishWith, resp,
                    c_->RequestCheckpoint());
}
grpc::ServerUnaryReactor* ControlServiceImpl::Scale(grpc::CallbackServerContext* ctx,
                                                    const v1::ScaleRequest* req,
                                                    v1::ControlResponse* resp) {
  RETORT_SIZED_CALL(Role::kOperator, "Scale", kMaxControlRequestBytes, FinishWith, resp,
                    c_->Scale(*req));
}
grpc::ServerUnaryReactor* ControlServiceImpl::Drain(grpc::CallbackServerContext* ctx,
                                                    const v1::DrainRequest* req,
                                                    v1::ControlResponse* resp) {
  RETORT_SIZED_CALL(Role::kOperator, "Drain", kMaxControlRequestBytes, FinishWith, resp,
                    c_->Drain(*req));
}
grpc::ServerUnaryReactor* ControlServiceImpl::Stop(grpc::CallbackServerContext* ctx,
                                                   const v1::StopRequest* req,
                                                   v1::ControlResponse* resp) {
  RETORT_SIZED_CALL(Role::kOperator, "Stop", kMaxControlRequestBytes, FinishWith, resp,
                    c_->Stop(*req));
}

grpc::ServerUnaryReactor* ControlServiceImpl::Trace(grpc::CallbackServerContext* ctx,
                                                    const v1::TraceRequest* req,
                                                    v1::TraceResponse* resp) {
  RETORT_SIZED_CALL(Role::kOperator, "Trace", kMaxControlRequestBytes, FinishWith, resp,
                    c_->RequestTrace(*req));
}

#undef RETORT_SIZED_CALL
#undef RETORT_MEMBER_CALL
#undef RETORT_ADMIT

}  // namespace retort::coordinator
