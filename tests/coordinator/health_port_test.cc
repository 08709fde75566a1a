// The coordinator's plaintext health port (--health-listen, rpc/health_server.h) beside a
// mutual-TLS control plane: probes without a client certificate get grpc.health.v1 answers there,
// and nothing else is served on it (WorkerService, ControlService and server reflection are
// UNIMPLEMENTED).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/clock.h"
#include "coordinator/coordinator.h"
#include "coordinator/server.h"
#include "retort/v1/retort.grpc.pb.h"
#include "rpc/health_server.h"
#include "testing/generic_call.h"
#include "testing/in_process_coordinator.h"
#include "testing/subprocess.h"
#include "tools/cert_generator.h"

namespace retort::coordinator {
namespace {

using testing::CallGeneric;
using testing::GenericReply;
const std::string& kServing = testing::kHealthServing;
const std::string& kNotServing = testing::kHealthNotServing;

// A unary call of `method` with the serialized `request`; its completion is expected.
GenericReply Call(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                  const std::string& request) {
  GenericReply r = CallGeneric(channel, method, request);
  EXPECT_TRUE(r.answered) << method;
  return r;
}

class HealthPortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::MakeTempDir("retort_health_port");
    tools::CertOptions certs;
    certs.out_dir = dir + "/certs";
    ASSERT_TRUE(tools::GenerateClusterCertificates(certs).ok());
    CoordinatorOptions opts;
    opts.state_dir = dir + "/state";
    opts.settle_ms = 50;
    opts.tick_ms = 10;
    auto c = Coordinator::Create(opts, testing::InProcessJob("health-port"), &clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
    coordinator_->Start();
    ServerSecurity security;
    security.tls_cert = certs.out_dir + "/coordinator.crt";
    security.tls_key = certs.out_dir + "/coordinator.key";
    security.tls_ca = certs.out_dir + "/ca.crt";
    auto s = CoordinatorServer::Start(coordinator_.get(), "127.0.0.1:0", security);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    auto h = rpc::HealthServer::Start("127.0.0.1:0", {v1::WorkerService::service_full_name(),
                                                      v1::ControlService::service_full_name()});
    ASSERT_TRUE(h.ok()) << h.status();
    health_ = std::move(*h);
    health_channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(health_->port()),
                                          grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (health_) health_->Shutdown(100);
    if (server_) server_->Shutdown(100);
    if (coordinator_) coordinator_->Shutdown();
  }

  RealClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<rpc::HealthServer> health_;
  std::shared_ptr<grpc::Channel> health_channel_;
};

TEST_F(HealthPortTest, PlaintextHealthCheckAnswersServingWhileTheControlPlaneNeedsCertificates) {
  // The probe's view of the mutual-TLS port: no client certificate, no answer.
  auto main_plain = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                        grpc::InsecureChannelCredentials());
  EXPECT_EQ(Call(main_plain, "/grpc.health.v1.Health/Check", "").status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  for (const std::string& service : {std::string(), std::string("retort.v1.WorkerService"),
                                     std::string("retort.v1.ControlService")}) {
    SCOPED_TRACE("service '" + service + "'");
    const GenericReply r =
        Call(health_channel_, "/grpc.health.v1.Health/Check", testing::HealthCheckRequest(service));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.bytes, kServing) << "HealthCheckResponse{status: SERVING}";
  }
  EXPECT_EQ(
      Call(health_channel_, "/grpc.health.v1.Health/Check", testing::HealthCheckRequest("no.Such"))
          .status.error_code(),
      grpc::StatusCode::NOT_FOUND);
  health_->SetServing(false);
  const GenericReply down = Call(health_channel_, "/grpc.health.v1.Health/Check", "");
  ASSERT_TRUE(down.status.ok()) << down.status.error_message();
  EXPECT_EQ(down.bytes, kNotServing);
}

TEST_F(HealthPortTest, HealthPortServesNoOtherService) {
  auto worker = v1::WorkerService::NewStub(health_channel_);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::JoinRequest join;
    join.mutable_identity()->set_node("intruder");
    join.mutable_identity()->set_incarnation("x");
    v1::JoinResponse joined;
    EXPECT_EQ(worker->Join(&ctx, join, &joined).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::HeartbeatRequest hb;
    hb.set_member_id("m-0");
    v1::HeartbeatResponse r;
    EXPECT_EQ(worker->Heartbeat(&ctx, hb, &r).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  auto control = v1::ControlService::NewStub(health_channel_);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::StatusResponse r;
    EXPECT_EQ(control->Status(&ctx, v1::StatusRequest(), &r).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::StopRequest stop;
    v1::ControlResponse r;
    EXPECT_EQ(control->Stop(&ctx, stop, &r).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  // Server reflection, which the control plane's server registers for every server builder of
  // the process, is not served here either.
  EXPECT_EQ(
      Call(health_channel_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "")
          .status.error_code(),
      grpc::StatusCode::UNIMPLEMENTED);
  // Nothing reached the coordinator.
  EXPECT_EQ(coordinator_->GetStatus().members_size(), 0);
  EXPECT_EQ(coordinator_->GetStatus().state(), v1::JOB_STATE_WAITING);
}

}  // namespace
}  // namespace retort::coordinator
