#include "coordinator/services.h"

#include "coordinator/grpc_status.h"
#include "coordinator/streams.h"

namespace retort::coordinator {
namespace {

// Finishes a unary call with the result of a StatusOr-returning Coordinator method.
template <typename Resp, typename Result>
grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* ctx, Resp* resp,
                                     Result&& result) {
  auto* reactor = ctx->DefaultReactor();
  if (result.ok()) {
    *resp = std::move(result).value();
    reactor->Finish(grpc::Status::OK);
  } else {
    reactor->Finish(ToGrpcStatus(result.status()));
  }
  return reactor;
}

grpc::ServerUnaryReactor* FinishStatus(grpc::CallbackServerContext* ctx, const retort::Status& s) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* WorkerServiceImpl::Join(grpc::CallbackServerContext* ctx,
                                                  const v1::JoinRequest* req,
                                                  v1::JoinResponse* resp) {
  return FinishWith(ctx, resp, c_->Join(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                       const v1::HeartbeatRequest* req,
                                                       v1::HeartbeatResponse* resp) {
  return FinishWith(ctx, resp, c_->Heartbeat(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::Leave(grpc::CallbackServerContext* ctx,
                                                   const v1::LeaveRequest* req,
                                                   v1::LeaveResponse*) {
  return FinishStatus(ctx, c_->Leave(*req));
}
grpc::ServerWriteReactor<v1::Generation>* WorkerServiceImpl::WatchGenerations(
    grpc::CallbackServerContext*, const v1::WatchGenerationsRequest* req) {
  return new GenerationStream(c_, req->member_id(), req->after_generation());
}
grpc::ServerUnaryReactor* WorkerServiceImpl::ReportPeerFailure(grpc::CallbackServerContext* ctx,
                                                               const v1::PeerFailureReport* req,
                                                               v1::PeerFailureResponse* resp) {
  return FinishWith(ctx, resp, c_->ReportPeerFailure(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::KvPut(grpc::CallbackServerContext* ctx,
                                                   const v1::KvPutRequest* req,
                                                   v1::KvPutResponse*) {
  return FinishStatus(ctx, c_->KvPut(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::KvGet(grpc::CallbackServerContext* ctx,
                                                   const v1::KvGetRequest* req,
                                                   v1::KvGetResponse* resp) {
  return FinishWith(ctx, resp, c_->KvGet(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::BeginCheckpoint(grpc::CallbackServerContext* ctx,
                                                             const v1::BeginCheckpointRequest* req,
                                                             v1::BeginCheckpointResponse* resp) {
  return FinishWith(ctx, resp, c_->BeginCheckpoint(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::AckCheckpoint(grpc::CallbackServerContext* ctx,
                                                           const v1::AckCheckpointRequest* req,
                                                           v1::AckCheckpointResponse* resp) {
  return FinishWith(ctx, resp, c_->AckCheckpoint(*req));
}
grpc::ServerUnaryReactor* WorkerServiceImpl::GetCheckpoint(grpc::CallbackServerContext* ctx,
                                                           const v1::GetCheckpointRequest* req,
                                                           v1::GetCheckpointResponse* resp) {
  return FinishWith(ctx, resp, c_->GetCheckpoint(*req));
}

grpc::ServerUnaryReactor* ControlServiceImpl::Status(grpc::CallbackServerContext* ctx,
                                                     const v1::StatusRequest*,
                                                     v1::StatusResponse* resp) {
  *resp = c_->GetStatus();
  return FinishStatus(ctx, retort::Status::Ok());
}
grpc::ServerWriteReactor<v1::Event>* ControlServiceImpl::Watch(grpc::CallbackServerContext*,
                                                               const v1::WatchRequest*) {
  return new EventStream(c_);
}
grpc::ServerUnaryReactor* ControlServiceImpl::Pause(grpc::CallbackServerContext* ctx,
                                                    const v1::PauseRequest*,
                                                    v1::ControlResponse* resp) {
  return FinishWith(ctx, resp, c_->Pause());
}
grpc::ServerUnaryReactor* ControlServiceImpl::Resume(grpc::CallbackServerContext* ctx,
                                                     const v1::ResumeRequest*,
                                                     v1::ControlResponse* resp) {
  return FinishWith(ctx, resp, c_->Resume());
}
grpc::ServerUnaryReactor* ControlServiceImpl::Checkpoint(grpc::CallbackServerContext* ctx,
                                                         const v1::CheckpointRequest*,
                                                         v1::CheckpointResponse* resp) {
  return FinishWith(ctx, resp, c_->RequestCheckpoint());
}
grpc::ServerUnaryReactor* ControlServiceImpl::Scale(grpc::CallbackServerContext* ctx,
                                                    const v1::ScaleRequest* req,
                                                    v1::ControlResponse* resp) {
  return FinishWith(ctx, resp, c_->Scale(*req));
}
grpc::ServerUnaryReactor* ControlServiceImpl::Drain(grpc::CallbackServerContext* ctx,
                                                    const v1::DrainRequest* req,
                                                    v1::ControlResponse* resp) {
  return FinishWith(ctx, resp, c_->Drain(*req));
}
grpc::ServerUnaryReactor* ControlServiceImpl::Stop(grpc::CallbackServerContext* ctx,
                                                   const v1::StopRequest* req,
                                                   v1::ControlResponse* resp) {
  return FinishWith(ctx, resp, c_->Stop(*req));
}

}  // namespace retort::coordinator
