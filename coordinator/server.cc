#include "coordinator/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>

namespace retort::coordinator {

StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(Coordinator* c,
                                                                      const std::string& listen) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer(c));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(&s->worker_);
  builder.RegisterService(&s->control_);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  // Keep idle worker connections alive and notice dead ones.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0) return UnavailableError("cannot listen on " + listen);
  return s;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(0); }

void CoordinatorServer::Shutdown(int64_t grace_ms) {
  if (shut_down_ || !server_) return;
  shut_down_ = true;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
}

}  // namespace retort::coordinator
