// The coordinator's gRPC surface in-process: health checking, size limits, status codes over
// the wire, generation streams.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "coordinator/server.h"
#include "testing/generic_call.h"
#include "testing/in_process_coordinator.h"
#include "worker/coordinator_client.h"
#include "worker/worker_agent.h"

namespace retort::coordinator {
namespace {

class GrpcServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(server_.Start(testing::InProcessJob("grpc-test")));
    address_ = server_.address();
    coordinator_ = &server_.coordinator();
    channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  }
  v1::JoinRequest Join(const std::string& node) {
    v1::JoinRequest r;
    r.mutable_identity()->set_node(node);
    r.mutable_identity()->set_incarnation("x");
    return r;
  }

  testing::InProcessCoordinator server_;
  Coordinator* coordinator_ = nullptr;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcServiceTest, StandardHealthCheckReportsServing) {
  // Empty HealthCheckRequest: service "" = the whole server.
  const testing::GenericReply r =
      testing::CallGeneric(channel_, testing::kHealthCheckMethod, "", std::chrono::seconds(5));
  ASSERT_TRUE(r.answered);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.bytes, testing::kHealthServing) << "HealthCheckResponse{status: SERVING}";
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

// A worker that comes to a job that already completed (a late start, or a re-run) is told so
// in the Join response's ended_state, not by an error message it would have to parse: its agent
// stops with FAILED_PRECONDITION and reports the state (retort-worker then exits 0).
TEST_F(GrpcServiceTest, WorkerJoiningACompletedJobLearnsTheStateFromTheResponse) {
  worker::CoordinatorClient client(address_, 5000);
  auto a = client.Join(Join("n0"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->ended_state(), v1::JOB_STATE_UNSPECIFIED) << "a running job takes members";
  auto watch = client.WatchGenerations(a->member_id(), 0);
  v1::Generation g;
  ASSERT_TRUE(watch->Read(&g)) << "no generation formed";
  watch->Cancel();
  while (watch->Read(&g)) {
  }
  v1::LeaveRequest done;
  done.set_member_id(a->member_id());
  done.set_reason("completed");
  done.set_job_completed(true);
  ASSERT_TRUE(client.Leave(done).ok());
  ASSERT_EQ(coordinator_->GetStatus().state(), v1::JOB_STATE_COMPLETED);

  auto late = client.Join(Join("n1"));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->ended_state(), v1::JOB_STATE_COMPLETED);
  EXPECT_EQ(late->member_id(), "");

  worker::WorkerOptions opts;
  opts.identity = Join("n2").identity();
  opts.join_timeout_ms = 10000;
  worker::WorkerAgent agent(opts, &client, nullptr);
  Status s = agent.Run();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), "job is completed; not accepting members");
  EXPECT_EQ(agent.ended_state(), v1::JOB_STATE_COMPLETED);
  EXPECT_EQ(agent.member_id(), "") << "never a member";
}

}  // namespace
}  // namespace retort::coordinator
