#include "coordinator/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <chrono>

#include "common/credential_files.h"

namespace retort::coordinator {
namespace {

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& s) {
  if (!s.tls()) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      s.tls_key, s.tls_cert, s.tls_ca, static_cast<unsigned int>(s.refresh_s));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!s.tls_ca.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace

Status ValidateServerSecurity(const ServerSecurity& s) {
  if (s.tls_cert.empty() != s.tls_key.empty())
    return InvalidArgumentError("--tls-cert and --tls-key go together");
  if (!s.tls_ca.empty() && !s.tls())
    return InvalidArgumentError("--tls-ca (mutual TLS) needs --tls-cert and --tls-key");
  if (s.refresh_s <= 0) return InvalidArgumentError("--tls-refresh-s must be > 0");
  RETORT_RETURN_IF_ERROR(CheckReadableFlagFile(s.tls_cert, "tls-cert"));
  RETORT_RETURN_IF_ERROR(CheckReadableFlagFile(s.tls_key, "tls-key"));
  RETORT_RETURN_IF_ERROR(CheckReadableFlagFile(s.tls_ca, "tls-ca"));
  return Status::Ok();
}

StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    Coordinator* c, const std::string& listen, const ServerSecurity& security,
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors) {
  RETORT_RETURN_IF_ERROR(ValidateServerSecurity(security));
  AuthOptions auth;
  auth.client_certificates = !security.tls_ca.empty();
  auth.worker_token_file = security.worker_token_file;
  auth.operator_token_file = security.operator_token_file;
  RETORT_ASSIGN_OR_RETURN(std::unique_ptr<Authorizer> authorizer, Authorizer::Create(auth));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer(c, std::move(authorizer)));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, MakeServerCredentials(security), &s->port_);
  builder.RegisterService(&s->worker_);
  builder.RegisterService(&s->control_);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  if (!interceptors.empty()) builder.experimental().SetInterceptorCreators(std::move(interceptors));
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
