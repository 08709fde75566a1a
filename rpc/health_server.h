// A plaintext gRPC server that serves only the standard health service (grpc.health.v1.Health):
// for probes that cannot present a client certificate (Kubernetes' native gRPC probes) while the
// real services run behind mutual TLS on another port. Nothing else is registered on it: no
// application service, no server reflection, so a call to any other method is UNIMPLEMENTED.
// The overall status ("") and each name in `services` are SERVING until SetServing(false) or
// Shutdown.
//
// Thread-safe: SetServing and Shutdown may be called from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace retort::rpc {

class HealthServer {
 public:
  // Binds `listen` ("host:port"; port 0 picks a free one). UNAVAILABLE when it cannot bind.
  static StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& listen,
                                                       std::vector<std::string> services = {});
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  int port() const { return port_; }
  // Every status this server reports: SERVING (true) or NOT_SERVING (false).
  void SetServing(bool serving);
  // One service's status (a name given to Start), e.g. a readiness signal apart from the
  // liveness one (""). Ignored after Shutdown.
  void SetServing(const std::string& service, bool serving);
  // Reports NOT_SERVING, finishes in-flight checks within `grace_ms`, stops listening.
  // Idempotent.
  void Shutdown(int64_t grace_ms = 500);

 private:
  class EverythingElse;
  HealthServer();
  std::unique_ptr<EverythingElse> everything_else_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::string> services_;
  int port_ = 0;
  std::atomic<bool> shut_down_{false};
};

}  // namespace retort::rpc
