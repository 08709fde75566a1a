// Builds and runs the coordinator's gRPC server: WorkerService, ControlService, standard health
// checking (grpc.health.v1) and server reflection. Owns the services; does not own the
// Coordinator. Thread-safe: Shutdown may be called from any thread (e.g. a signal watcher).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/coordinator.h"
#include "coordinator/services.h"

namespace retort::coordinator {

// Largest request the server accepts; bigger ones get RESOURCE_EXHAUSTED from gRPC.
constexpr int kMaxRequestBytes = 4 << 20;

// Transport security and who may call (see authorizer.h).
struct ServerSecurity {
  // PEM files of the coordinator's certificate and key: TLS. Re-read when they change
  // (FileWatcherCertificateProvider, every refresh_s), so they rotate without a restart.
  std::string tls_cert, tls_key;
  // A CA: client certificates are required and verified against it (mutual TLS); their subject
  // OU names the caller's role. Also re-read when it changes.
  std::string tls_ca;
  int64_t refresh_s = 5;
  // Bearer tokens of the two roles (files; empty: none).
  std::string worker_token_file, operator_token_file;

  bool tls() const { return !tls_cert.empty(); }
};

// INVALID_ARGUMENT naming the flag when `security` is incomplete (a key without a certificate,
// a CA without TLS) or a file cannot be read.
Status ValidateServerSecurity(const ServerSecurity& security);

class CoordinatorServer {
 public:
  // Binds `listen` ("host:port"; port 0 picks a free one) with `security`. Fails with
  // UNAVAILABLE if it cannot bind, INVALID_ARGUMENT for bad security settings. `interceptors`
  // (e.g. rpc_metrics.h's) see every call.
  static StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      Coordinator* coordinator, const std::string& listen, const ServerSecurity& security = {},
      std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
          interceptors = {});
  ~CoordinatorServer();
  int port() const { return port_; }
  // Cancels streams, finishes in-flight calls within `grace_ms`, stops listening.
  void Shutdown(int64_t grace_ms = 2000);
  void Wait() { server_->Wait(); }

 private:
  CoordinatorServer(Coordinator* c, std::unique_ptr<Authorizer> authorizer)
      : authorizer_(std::move(authorizer)),
        guards_(authorizer_.get()),
        worker_(c, &guards_),
        control_(c, &guards_) {}
  std::unique_ptr<Authorizer> authorizer_;
  ServiceGuards guards_;
  WorkerServiceImpl worker_;
  ControlServiceImpl control_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace retort::coordinator
