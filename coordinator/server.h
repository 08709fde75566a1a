// Builds and runs the coordinator's gRPC server: WorkerService, ControlService, standard health
// checking (grpc.health.v1) and server reflection. Owns the services; does not own the
// Coordinator. Thread-safe: Shutdown may be called from any thread (e.g. a signal watcher).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/coordinator.h"
#include "coordinator/services.h"

namespace retort::coordinator {

// Largest request the server accepts; bigger ones get RESOURCE_EXHAUSTED from gRPC.
constexpr int kMaxRequestBytes = 4 << 20;

class CoordinatorServer {
 public:
  // Binds `listen` ("host:port"; port 0 picks a free one). Fails with UNAVAILABLE if it cannot
  // bind.
  static StatusOr<std::unique_ptr<CoordinatorServer>> Start(Coordinator* coordinator,
                                                            const std::string& listen);
  ~CoordinatorServer();
  int port() const { return port_; }
  // Cancels streams, finishes in-flight calls within `grace_ms`, stops listening.
  void Shutdown(int64_t grace_ms = 2000);
  void Wait() { server_->Wait(); }

 private:
  CoordinatorServer(Coordinator* c) : worker_(c), control_(c) {}
  WorkerServiceImpl worker_;
  ControlServiceImpl control_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace retort::coordinator
