#include "coordinator/services.h"

#include <type_traits>

#include "coordinator/request_limits.h"
#include "coordinator/streams.h"
#include "rpc/grpc_status.h"
#include "rpc/metadata.h"

namespace retort::coordinator {
namespace {

// Who a call is made for, which decides what admits it besides its size.
enum class Caller {
  kWorker,    // the worker role (Join: before it has a member id)
  kMember,    // the worker role, and the member secret of the request's member_id
  kOperator,  // the operator role
};

// A call's name (for the refusal log and size errors) and its request size limit
// (request_limits.h).
struct CallRule {
  const char* method;
  size_t max_request_bytes;
};

// The one admission path of every RPC, unary and streaming, in order: the caller's role, the
// request's size, and for a member's call that member's secret. OK admits; anything else is the
// refusal to send (UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED).
template <Caller caller, typename Req>
retort::Status Admit(const grpc::ServerContextBase& ctx, ServiceGuards* guards, Coordinator* c,
                     const CallRule& rule, const Req& req) {
  retort::Status admitted =
      guards->Admit(ctx, caller == Caller::kOperator ? Role::kOperator : Role::kWorker);
  if (!admitted.ok()) return admitted;
  if (const size_t bytes = req.ByteSizeLong(); bytes > rule.max_request_bytes)
    return ResourceExhaustedError(std::string(rule.method) + " request of " +
                                  std::to_string(bytes) + " bytes exceeds its limit of " +
                                  std::to_string(rule.max_request_bytes));
  if constexpr (caller == Caller::kMember)
    return c->AuthenticateMember(req.member_id(), MemberSecretOf(ctx));
  return retort::Status::Ok();
}

grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx, ServiceGuards* guards,
                                 const char* method, const retort::Status& s) {
  guards->refusals().Refused(method, guards->DescribePeer(*ctx), s.ToString());
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

// A unary call: admitted (Admit), then `call` runs on the Coordinator and its result finishes
// the call. `call` returns the response, a StatusOr of it, or a Status (responses without
// fields); an error is refused (logged) like a failed admission.
template <Caller caller, typename Req, typename Resp, typename Call>
grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, ServiceGuards* guards,
                                Coordinator* c, const CallRule& rule, const Req& req, Resp* resp,
                                Call&& call) {
  if (retort::Status admitted = Admit<caller>(*ctx, guards, c, rule, req); !admitted.ok())
    return Refuse(ctx, guards, rule.method, admitted);
  auto result = call();
  using Result = decltype(result);
  if constexpr (std::is_same_v<Result, retort::Status>) {
    if (!result.ok()) return Refuse(ctx, guards, rule.method, result);
  } else if constexpr (std::is_same_v<Result, Resp>) {
    *resp = std::move(result);
  } else {
    if (!result.ok()) return Refuse(ctx, guards, rule.method, result.status());
    *resp = std::move(result).value();
  }
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

grpc::ServerUnaryReactor* WorkerServiceImpl::Join(grpc::CallbackServerContext* ctx,
                                                  const v1::JoinRequest* req,
                                                  v1::JoinResponse* resp) {
  return Unary<Caller::kWorker>(ctx, guards_, c_, {"Join", kMaxJoinRequestBytes}, *req, resp,
                                [&] { return c_->Join(*req); });
}
grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                       const v1::HeartbeatRequest* req,
                                                       v1::HeartbeatResponse* resp) {
  return Unary<Caller::kMember>(ctx, guards_, c_, {"Heartbeat", kMaxHeartbeatRequestBytes}, *req,
                                resp, [&] { return c_->Heartbeat(*req); });
}
grpc::ServerUnaryReactor* WorkerServiceImpl::Leave(grpc::CallbackServerContext* ctx,
                                                   const v1::LeaveRequest* req,
                                                   v1::LeaveResponse* resp) {
  return Unary<Caller::kMember>(ctx, guards_, c_, {"Leave", kMaxLeaveRequestBytes}, *req, resp,
                                [&] { return c_->Leave(*req); });
}
grpc::ServerWriteReactor<v1::Generation>* WorkerServiceImpl::WatchGenerations(
    grpc::CallbackServerContext* ctx, const v1::WatchGenerationsRequest* req) {
  const retort::Status admitted =
      Admit<Caller::kMember>(*ctx, guards_, c_, {"WatchGenerations", kMaxSmallRequestBytes}, *req);
  return new GenerationStream(c_, req->member_id(), req->after_generation(), &guards_->refusals(),
                              guards_->DescribePeer(*ctx), admitted);
}
grpc::ServerUnaryReactor* WorkerServiceImpl::ReportPeerFailure(grpc::CallbackServerContext* ctx,
                                                               const v1::PeerFailureReport* req,
                                                               v1::PeerFailureResponse* resp) {
  return Unary<Caller::kMember>(ctx, guards_, c_, {"ReportPeerFailure", kMaxPeerFailureReportBytes},
                                *req, resp, [&] { return c_->ReportPeerFailure(*req); });
}
grpc::ServerUnaryReactor* WorkerServiceImpl::KvPut(grpc::CallbackServerContext* ctx,
                                                   const v1::KvPutRequest* req,
                                                   v1::KvPutResponse* resp) {
  return Unary<Caller::kMember>(ctx, guards_, c_, {"KvPut", kMaxKvPutRequestBytes}, *req, resp,
                                [&] { return c_->KvPut(*req); });
}
grpc::ServerUnaryReactor* WorkerServiceImpl::KvGet(grpc::CallbackServerContext* ctx,
                                                   const v1::KvGetRequest* req,
                                                   v1::KvGetResponse* resp) {
  return Unary<Caller::kMember>(ctx, guards_, c_, {"KvGet", kMaxSmallRequestBytes}, *req, resp,
                                [&] { return c_->KvGet(*req); });
}
grpc::ServerUnaryReactor* WorkerServiceImpl::BeginCheckpoint(grpc::CallbackServerContext* ctx,
                                                             const v1::BeginCheckpointRequest* req,
                                                             v1::BeginCheckpointResponse* resp) {
  return Unary<Caller::kMember>(ctx, guards_, c_, {"BeginCheckpoint", kMaxSmallRequestBytes}, *req,
                                resp, [&] { return c_->BeginCheckpoint(*req); });
}
grpc::ServerUnaryReactor* WorkerServiceImpl::AckCheckpoint(grpc::CallbackServerContext* ctx,
                                                           const v1::AckCheckpointRequest* req,
                                                           v1::AckCheckpointResponse* resp) {
  return Unary<Caller::kMember>(ctx, guards_, c_, {"AckCheckpoint", kMaxAckCheckpointRequestBytes},
                                *req, resp, [&] { return c_->AckCheckpoint(*req); });
}
grpc::ServerUnaryReactor* WorkerServiceImpl::GetCheckpoint(grpc::CallbackServerContext* ctx,
                                                           const v1::GetCheckpointRequest* req,
                                                           v1::GetCheckpointResponse* resp) {
  return Unary<Caller::kMember>(ctx, guards_, c_, {"GetCheckpoint", kMaxSmallRequestBytes}, *req,
                                resp, [&] { return c_->GetCheckpoint(*req); });
}

grpc::ServerUnaryReactor* ControlServiceImpl::Status(grpc::CallbackServerContext* ctx,
                                                     const v1::StatusRequest* req,
                                                     v1::StatusResponse* resp) {
  return Unary<Caller::kOperator>(ctx, guards_, c_, {"Status", kMaxControlRequestBytes}, *req, resp,
                                  [&] { return c_->GetStatus(); });
}
grpc::ServerWriteReactor<v1::Event>* ControlServiceImpl::Watch(grpc::CallbackServerContext* ctx,
                                                               const v1::WatchRequest* req) {
  const retort::Status admitted =
      Admit<Caller::kOperator>(*ctx, guards_, c_, {"Watch", kMaxControlRequestBytes}, *req);
  return new EventStream(c_, guards_, ctx->peer(), guards_->DescribePeer(*ctx), admitted);
}
grpc::ServerUnaryReactor* ControlServiceImpl::Pause(grpc::CallbackServerContext* ctx,
                                                    const v1::PauseRequest* req,
                                                    v1::ControlResponse* resp) {
  return Unary<Caller::kOperator>(ctx, guards_, c_, {"Pause", kMaxControlRequestBytes}, *req, resp,
                                  [&] { return c_->Pause(); });
}
grpc::ServerUnaryReactor* ControlServiceImpl::Resume(grpc::CallbackServerContext* ctx,
                                                     const v1::ResumeRequest* req,
                                                     v1::ControlResponse* resp) {
  return Unary<Caller::kOperator>(ctx, guards_, c_, {"Resume", kMaxControlRequestBytes}, *req, resp,
                                  [&] { return c_->Resume(); });
}
grpc::ServerUnaryReactor* ControlServiceImpl::Checkpoint(grpc::CallbackServerContext* ctx,
                                                         const v1::CheckpointRequest* req,
                                                         v1::CheckpointResponse* resp) {
  return Unary<Caller::kOperator>(ctx, guards_, c_, {"Checkpoint", kMaxControlRequestBytes}, *req,
                                  resp, [&] { return c_->RequestCheckpoint(); });
}
grpc::ServerUnaryReactor* ControlServiceImpl::Scale(grpc::CallbackServerContext* ctx,
                                                    const v1::ScaleRequest* req,
                                                    v1::ControlResponse* resp) {
  return Unary<Caller::kOperator>(ctx, guards_, c_, {"Scale", kMaxControlRequestBytes}, *req, resp,
                                  [&] { return c_->Scale(*req); });
}
grpc::ServerUnaryReactor* ControlServiceImpl::Drain(grpc::CallbackServerContext* ctx,
                                                    const v1::DrainRequest* req,
                                                    v1::ControlResponse* resp) {
  return Unary<Caller::kOperator>(ctx, guards_, c_, {"Drain", kMaxControlRequestBytes}, *req, resp,
                                  [&] { return c_->Drain(*req); });
}
grpc::ServerUnaryReactor* ControlServiceImpl::Stop(grpc::CallbackServerContext* ctx,
                                                   const v1::StopRequest* req,
                                                   v1::ControlResponse* resp) {
  return Unary<Caller::kOperator>(ctx, guards_, c_, {"Stop", kMaxControlRequestBytes}, *req, resp,
                                  [&] { return c_->Stop(*req); });
}
grpc::ServerUnaryReactor* ControlServiceImpl::Trace(grpc::CallbackServerContext* ctx,
                                                    const v1::TraceRequest* req,
                                                    v1::TraceResponse* resp) {
  return Unary<Caller::kOperator>(ctx, guards_, c_, {"Trace", kMaxControlRequestBytes}, *req, resp,
                                  [&] { return c_->RequestTrace(*req); });
}

}  // namespace retort::coordinator
