// The coordinator's gRPC surface in-process: health checking, size limits, status codes over
// the wire, generation streams.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "coordinator/server.h"
#include "testing/subprocess.h"
#include "worker/coordinator_client.h"

namespace retort::coordinator {
namespace {

class GrpcServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions opts;
    opts.state_dir = testing::MakeTempDir("retort_grpc") + "/state";
    opts.settle_ms = 50;
    opts.tick_ms = 10;
    v1::JobSpec job;
    job.set_name("grpc-test");
    job.mutable_teacher()->set_preset("fm-teacher");
    job.mutable_student()->set_preset("fm-student");
    job.mutable_elastic()->set_min_workers(1);
    job.mutable_elastic()->set_max_workers(4);
    auto c = Coordinator::Create(opts, job, &clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(c).value();
    coordinator_->Start();
    auto s = CoordinatorServer::Start(coordinator_.get(), "127.0.0.1:0");
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(s).value();
    address_ = "127.0.0.1:" + std::to_string(server_->port());
    channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    server_->Shutdown(100);
    coordinator_->Shutdown();
  }
  v1::JoinRequest Join(const std::string& node) {
    v1::JoinRequest r;
    r.mutable_identity()->set_node(node);
    r.mutable_identity()->set_incarnation("x");
    return r;
  }

  RealClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorServer> server_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcServiceTest, StandardHealthCheckReportsServing) {
  grpc::GenericStub generic(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty(std::string(""));
  grpc::ByteBuffer request(&empty, 1);  // empty HealthCheckRequest: service "" = the whole server
  grpc::ByteBuffer response;
  grpc::Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard<std::mutex> l(mu);
                      status = s;
                      done = true;
                      cv.notify_all();
                    });
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(5), [&] { return done; }));
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2)) << "HealthCheckResponse{status: SERVING}";
}

TEST_F(GrpcServiceTest, StatusCodesTravelOverTheWire) {
  worker::CoordinatorClient client(address_, 5000);
  v1::HeartbeatRequest hb;
  hb.set_member_id("nobody");
  EXPECT_EQ(client.Heartbeat(hb).status().code(), StatusCode::kNotFound);
  auto bad = Join("has space");
  EXPECT_EQ(client.Join(bad).status().code(), StatusCode::kInvalidArgument);
  auto ok = client.Join(Join("n0"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->job().name(), "grpc-test");
  EXPECT_EQ(client.Join(Join("n0")).status().code(), StatusCode::kAlreadyExists);

  auto control = v1::ControlService::NewStub(channel_);
  grpc::ClientContext ctx;
  v1::ScaleRequest scale;
  scale.set_min_workers(5);
  scale.set_max_workers(2);
  v1::ControlResponse resp;
  EXPECT_EQ(control->Scale(&ctx, scale, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(GrpcServiceTest, OversizedRequestIsResourceExhaustedAndChangesNothing) {
  worker::CoordinatorClient client(address_, 5000);
  auto joined = client.Join(Join("n0"));
  ASSERT_TRUE(joined.ok());
  v1::KvPutRequest put;
  put.set_member_id(joined->member_id());
  put.set_key("big");
  put.set_value(std::string(kMaxRequestBytes + 1024, 'x'));
  EXPECT_EQ(client.KvPut(put).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(coordinator_->GetStatus().members_size(), 1);
}

TEST_F(GrpcServiceTest, GenerationStreamDeliversNewGenerations) {
  worker::CoordinatorClient client(address_, 5000);
  auto a = client.Join(Join("n0"));
  ASSERT_TRUE(a.ok());
  auto watch = client.WatchGenerations(a->member_id(), 0);
  v1::Generation g;
  ASSERT_TRUE(watch->Read(&g));
  EXPECT_EQ(g.members_size(), 1);
  ASSERT_TRUE(client.Join(Join("n1")).ok());
  ASSERT_TRUE(watch->Read(&g));
  EXPECT_EQ(g.members_size(), 2);
  EXPECT_EQ(g.number(), 2u);
  watch->Cancel();
  EXPECT_FALSE(watch->Read(&g));
  EXPECT_EQ(watch->Finish().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace retort::coordinator
