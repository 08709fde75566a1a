#include "worker/coordinator_client.h"

#include <chrono>

#include "coordinator/grpc_status.h"

namespace retort::worker {

std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly after a coordinator restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

CoordinatorClient::CoordinatorClient(const std::string& address, int64_t rpc_timeout_ms)
    : address_(address),
      rpc_timeout_ms_(rpc_timeout_ms),
      channel_(MakeCoordinatorChannel(address)),
      stub_(v1::WorkerService::NewStub(channel_)) {}

void CoordinatorClient::SetDeadline(grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(rpc_timeout_ms_));
}

#define RETORT_UNARY(Method, Req, Resp)                                        \
  StatusOr<Resp> CoordinatorClient::Method(const Req& r) {                     \
    grpc::ClientContext ctx;                                                   \
    SetDeadline(&ctx);                                                         \
    Resp resp;                                                                 \
    grpc::Status s = stub_->Method(&ctx, r, &resp);                            \
    if (!s.ok()) return FromGrpcStatus(s).WithContext(#Method " " + address_); \
    return resp;                                                               \
  }

RETORT_UNARY(Join, v1::JoinRequest, v1::JoinResponse)
RETORT_UNARY(Heartbeat, v1::HeartbeatRequest, v1::HeartbeatResponse)
RETORT_UNARY(ReportPeerFailure, v1::PeerFailureReport, v1::PeerFailureResponse)
RETORT_UNARY(KvGet, v1::KvGetRequest, v1::KvGetResponse)
RETORT_UNARY(BeginCheckpoint, v1::BeginCheckpointRequest, v1::BeginCheckpointResponse)
RETORT_UNARY(AckCheckpoint, v1::AckCheckpointRequest, v1::AckCheckpointResponse)
RETORT_UNARY(GetCheckpoint, v1::GetCheckpointRequest, v1::GetCheckpointResponse)
#undef RETORT_UNARY

Status CoordinatorClient::Leave(const v1::LeaveRequest& r) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::LeaveResponse resp;
  return FromGrpcStatus(stub_->Leave(&ctx, r, &resp));
}

Status CoordinatorClient::KvPut(const v1::KvPutRequest& r) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::KvPutResponse resp;
  return FromGrpcStatus(stub_->KvPut(&ctx, r, &resp));
}

std::unique_ptr<CoordinatorClient::GenerationWatch> CoordinatorClient::WatchGenerations(
    const std::string& member_id, uint64_t after) {
  auto w = std::make_unique<GenerationWatch>();
  v1::WatchGenerationsRequest req;
  req.set_member_id(member_id);
  req.set_after_generation(after);
  w->reader_ = stub_->WatchGenerations(&w->context_, req);
  return w;
}

Status CoordinatorClient::GenerationWatch::Finish() { return FromGrpcStatus(reader_->Finish()); }

}  // namespace retort::worker
