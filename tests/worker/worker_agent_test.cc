// The worker's control-plane agent against a coordinator in this process: join, generations to
// the handler, a clean leave on stop, a setup failure, a recurring failure that fails the job
// through the agent's Leave, and an evicted worker's re-join.
#include "worker/worker_agent.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "testing/in_process_coordinator.h"
#include "worker/coordinator_client.h"

namespace retort::worker {
namespace {

using std::chrono::milliseconds;

// Records what the agent tells it; OnJoined answers with `join_result`.
class RecordingHandler : public GenerationHandler {
 public:
  void OnGeneration(const v1::Generation& generation, const std::string& member_id,
                    int rank) override {
    std::lock_guard<std::mutex> lock(mu);
    generations.push_back(generation.number());
    ranks.push_back(rank);
    last_member_id = member_id;
  }
  StatusOr<int64_t> OnJoined(const v1::JoinResponse& response) override {
    ++joins;
    job_name = response.job().name();
    return join_result;
  }
  void OnLeaving(const std::string& reason, Deadline) override {
    std::lock_guard<std::mutex> lock(mu);
    leaving_reason = reason;
  }
  // Whether the newest generation handed over ranks this worker as `member_id`.
  bool NewestRanks(const std::string& member_id) {
    std::lock_guard<std::mutex> lock(mu);
    return !ranks.empty() && ranks.back() >= 0 && last_member_id == member_id;
  }
  bool RankedInSomeGeneration() {
    std::lock_guard<std::mutex> lock(mu);
    for (int r : ranks)
      if (r >= 0) return true;
    return false;
  }

  std::mutex mu;
  std::vector<uint64_t> generations;
  std::vector<int> ranks;
  std::string last_member_id, leaving_reason, job_name;
  std::atomic<int> joins{0};
  StatusOr<int64_t> join_result = int64_t{1000};
};

// An agent running on its own thread with a RecordingHandler; joined at the latest when
// destroyed (Run ends once a stop, completion or failure was asked for).
class RunningAgent {
 public:
  RunningAgent(const WorkerOptions& options, CoordinatorClient* client)
      : agent_(options, client, &handler_), thread_([this] { result_ = agent_.Run(); }) {}
  ~RunningAgent() {
    if (thread_.joinable()) {
      agent_.RequestStop("test over");
      thread_.join();
    }
  }
  // Waits (bounded) until a generation ranks this agent.
  bool WaitUntilRanked() {
    return testing::WaitFor([&] { return handler_.RankedInSomeGeneration(); }, milliseconds(10000));
  }
  // Waits for Run to return and gives its status.
  Status Finish() {
    thread_.join();
    return result_;
  }
  WorkerAgent& agent() { return agent_; }
  RecordingHandler& handler() { return handler_; }

 private:
  RecordingHandler handler_;
  WorkerAgent agent_;
  Status result_ = InternalError("not run");
  std::thread thread_;
};

class WorkerAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(server_.Start(testing::InProcessJob("agent-test")));
    client_ = std::make_unique<CoordinatorClient>(server_.address(), 5000);
    options_.identity.set_node("n0");
    options_.identity.set_data_address("127.0.0.1:1");
    options_.join_timeout_ms = 10000;
  }
  int Members() { return server_.coordinator().GetStatus().members_size(); }

  testing::InProcessCoordinator server_;
  std::unique_ptr<CoordinatorClient> client_;
  WorkerOptions options_;
};

TEST_F(WorkerAgentTest, JoinsFollowsGenerationsAndLeavesWhenStopped) {
  RunningAgent run(options_, client_.get());
  EXPECT_TRUE(run.WaitUntilRanked()) << "the agent never saw a generation that ranks it";
  RecordingHandler& handler = run.handler();
  EXPECT_EQ(handler.joins.load(), 1);
  EXPECT_EQ(handler.job_name, "agent-test");
  EXPECT_EQ(Members(), 1);
  EXPECT_FALSE(run.agent().member_id().empty());
  EXPECT_EQ(handler.last_member_id, run.agent().member_id());
  run.agent().RequestStop("operator stop");
  const Status result = run.Finish();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(handler.leaving_reason, "operator stop");
  EXPECT_EQ(Members(), 0) << "the agent left the job before Run returned";
  EXPECT_NE(server_.coordinator().GetStatus().state(), v1::JOB_STATE_COMPLETED)
      << "a stop is not a completion";
}

TEST_F(WorkerAgentTest, CompleteJobLeavesAndCompletesTheJob) {
  RunningAgent run(options_, client_.get());
  ASSERT_TRUE(run.WaitUntilRanked());
  run.agent().CompleteJob();
  const Status result = run.Finish();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(server_.coordinator().GetStatus().state(), v1::JOB_STATE_COMPLETED);
  EXPECT_EQ(Members(), 0);
}

TEST_F(WorkerAgentTest, ASetupFailureLeavesTheJobAndIsReturned) {
  RecordingHandler handler;
  handler.join_result = NotFoundError("dataset /data/missing: no such directory");
  WorkerAgent agent(options_, client_.get(), &handler);
  const Status result = agent.Run();
  EXPECT_EQ(result.code(), StatusCode::kNotFound) << result;
  EXPECT_NE(result.message().find("/data/missing"), std::string::npos) << result;
  EXPECT_EQ(Members(), 0) << "a worker whose setup failed must not hold a place in the job";
}

TEST_F(WorkerAgentTest, FailJobFailsTheJobOnceWithTheFirstError) {
  RunningAgent run(options_, client_.get());
  ASSERT_TRUE(run.WaitUntilRanked());
  WorkerAgent& agent = run.agent();
  v1::JobFailure first;
  first.set_kind(v1::FAILURE_KIND_RECURRING);
  first.set_message("INVALID_ARGUMENT: image_size 30 is not a multiple of the patch size 7");
  first.set_phase("step");
  agent.FailJob(first);
  v1::JobFailure second = first;
  second.set_message("a later error");
  agent.FailJob(second);  // the first call wins
  (void)run.Finish();
  const v1::StatusResponse status = server_.coordinator().GetStatus();
  EXPECT_EQ(status.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(status.failure().message(), first.message());
  EXPECT_EQ(status.failure().member_id(), run.handler().last_member_id);
  EXPECT_EQ(status.failure().node(), "n0");
}

// An evicted worker re-joins under a new member id. The generation its re-join forms may reach
// it on the stream opened under the old id before the new id does (it then has no rank there);
// it must still end up ranked under its new id, or its peers would wait for it for ever.
TEST_F(WorkerAgentTest, AnEvictedWorkerReJoinsAndIsRankedUnderItsNewId) {
  CoordinatorClient client_b(server_.address(), 5000);
  WorkerOptions options_b = options_;
  options_b.identity.set_node("n1");
  RunningAgent a(options_, client_.get());
  ASSERT_TRUE(a.WaitUntilRanked());
  RunningAgent b(options_b, &client_b);
  coordinator::Coordinator& coord = server_.coordinator();
  const auto world = [&] {
    auto g = coord.CurrentGeneration();
    return g ? g->members_size() : 0;
  };
  ASSERT_TRUE(testing::WaitFor(
      [&] { return world() == 2 && b.handler().NewestRanks(b.agent().member_id()); },
      milliseconds(10000)))
      << "the two workers never trained in one generation";
  const std::string evicted = b.agent().member_id();
  v1::PeerFailureReport report;
  report.set_member_id(a.agent().member_id());
  report.set_generation(coord.CurrentGeneration()->number());
  report.set_failed_member_id(evicted);
  report.set_detail("test: evicted on purpose");
  auto answer = coord.ReportPeerFailure(report);
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_TRUE(answer->evicted());
  std::string rejoined;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        rejoined = b.agent().member_id();
        return rejoined != evicted && b.handler().NewestRanks(rejoined) && world() == 2;
      },
      milliseconds(15000)))
      << "worker b (" << evicted << ", then " << rejoined
      << ") was not ranked under its new id in a generation of two";
  EXPECT_EQ(b.handler().joins.load(), 2);
}

}  // namespace
}  // namespace retort::worker
