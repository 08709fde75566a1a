#include "rpc/health_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>

#include <chrono>

namespace retort::rpc {
namespace {

// Drops every server builder plugin (e.g. server reflection, which the coordinator's main
// server registers process-wide): the health port serves the health service and nothing else.
class NoPlugins final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->clear();
  }
};

}  // namespace

// Every method but the health service's: UNIMPLEMENTED, as gRPC answers an unknown method. (A
// server needs at least one callback or synchronous method besides the built-in health service
// to start; this is it.)
class HealthServer::EverythingElse final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Refuse final : public grpc::ServerGenericBidiReactor {
     public:
      Refuse() {
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                            "this port serves only grpc.health.v1.Health"));
      }
      void OnDone() override { delete this; }
    };
    return new Refuse;
  }
};

StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& listen,
                                                            std::vector<std::string> services) {
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<HealthServer> s(new HealthServer());
  s->services_ = std::move(services);
  s->everything_else_ = std::make_unique<EverythingElse>();
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<NoPlugins>());
  builder.RegisterCallbackGenericService(s->everything_else_.get());
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &s->port_);
  // Health checks are tiny; refuse anything big before it is read.
  builder.SetMaxReceiveMessageSize(4 << 10);
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0)
    return UnavailableError("cannot serve health checks on " + listen);
  s->SetServing(true);
  return s;
}

HealthServer::HealthServer() = default;

HealthServer::~HealthServer() {
  Shutdown(0);
  server_.reset();  // before the generic service it calls
}

void HealthServer::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  for (const std::string& name : services_) health->SetServingStatus(name, serving);
}

void HealthServer::SetServing(const std::string& service, bool serving) {
  if (shut_down_) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(service, serving);
}

void HealthServer::Shutdown(int64_t grace_ms) {
  if (!server_ || shut_down_.exchange(true)) return;
  SetServing(false);
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
}

}  // namespace retort::rpc
