// libFuzzer harness: the coordinator's gRPC services (coordinator/services.h, server.h) fed with
// arbitrary request bytes through the real server: gRPC's deserialization, the per-RPC size
// caps, member-secret checks, the handlers and the status mapping. One server per process on
// 127.0.0.1 (insecure, every caller holds every role: the authorization paths have their own
// tests); its coordinator runs on the real clock and keeps its state from input to input, as a
// long-lived coordinator facing a stream of hostile calls would. fuzz_requests.h has the input
// format; the bytes of a record go unchanged onto the wire unless a flag asks for a known
// member id or the current generation (then the request is parsed, patched and re-serialized).
// Every call has a deadline; the server must answer each (any status) and never crash.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "common/logging.h"
#include "coordinator/coordinator.h"
#include "coordinator/member_secret.h"
#include "coordinator/server.h"
#include "rpc/metadata.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_requests.h"
#include "tests/fuzz/fuzz_util.h"

namespace retort {
namespace {

using namespace fuzz;

struct Method {
  const char* path;
  const google::protobuf::Message* prototype;  // the request type
};

Method MethodOf(Op op) {
  switch (op) {
    case kJoin:
      return {"/retort.v1.WorkerService/Join", &v1::JoinRequest::default_instance()};
    case kHeartbeat:
      return {"/retort.v1.WorkerService/Heartbeat", &v1::HeartbeatRequest::default_instance()};
    case kLeave:
      return {"/retort.v1.WorkerService/Leave", &v1::LeaveRequest::default_instance()};
    case kReportPeerFailure:
      return {"/retort.v1.WorkerService/ReportPeerFailure",
              &v1::PeerFailureReport::default_instance()};
    case kKvPut:
      return {"/retort.v1.WorkerService/KvPut", &v1::KvPutRequest::default_instance()};
    case kKvGet:
      return {"/retort.v1.WorkerService/KvGet", &v1::KvGetRequest::default_instance()};
    case kBeginCheckpoint:
      return {"/retort.v1.WorkerService/BeginCheckpoint",
              &v1::BeginCheckpointRequest::default_instance()};
    case kAckCheckpoint:
      return {"/retort.v1.WorkerService/AckCheckpoint",
              &v1::AckCheckpointRequest::default_instance()};
    case kGetCheckpoint:
      return {"/retort.v1.WorkerService/GetCheckpoint",
              &v1::GetCheckpointRequest::default_instance()};
    case kStatus:
      return {"/retort.v1.ControlService/Status", &v1::StatusRequest::default_instance()};
    case kPause:
      return {"/retort.v1.ControlService/Pause", &v1::PauseRequest::default_instance()};
    case kResume:
      return {"/retort.v1.ControlService/Resume", &v1::ResumeRequest::default_instance()};
    case kCheckpoint:
      return {"/retort.v1.ControlService/Checkpoint", &v1::CheckpointRequest::default_instance()};
    case kScale:
      return {"/retort.v1.ControlService/Scale", &v1::ScaleRequest::default_instance()};
    case kDrain:
      return {"/retort.v1.ControlService/Drain", &v1::DrainRequest::default_instance()};
    case kStop:
      return {"/retort.v1.ControlService/Stop", &v1::StopRequest::default_instance()};
    case kTrace:
      return {"/retort.v1.ControlService/Trace", &v1::TraceRequest::default_instance()};
    case kWatchGenerations:
      return {"/retort.v1.WorkerService/WatchGenerations",
              &v1::WatchGenerationsRequest::default_instance()};
    default:
      return {nullptr, nullptr};
  }
}

struct Member {
  std::string id, secret;
};

class Harness {
 public:
  Harness() {
    const std::string dir = ScratchDir() + "/grpc";
    ResetDir(dir);
    coordinator::CoordinatorOptions opts;
    opts.state_dir = dir;
    opts.settle_ms = 50;
    opts.heartbeat_interval_ms = 200;
    opts.eviction_timeout_ms = 1000;
    opts.rejoin_grace_ms = 0;
    v1::JobSpec job;
    job.set_name("fuzz-job");
    job.mutable_teacher()->set_preset("fm-teacher");
    job.mutable_student()->set_preset("fm-student");
    job.set_steps(1000000);
    job.mutable_elastic()->set_min_workers(1);
    job.mutable_elastic()->set_max_workers(4);
    auto c = coordinator::Coordinator::Create(opts, job, &clock_);
    if (!c.ok()) std::abort();
    coordinator_ = std::move(c).value();
    coordinator_->Start();
    auto s = coordinator::CoordinatorServer::Start(coordinator_.get(), "127.0.0.1:0");
    if (!s.ok()) std::abort();
    server_ = std::move(s).value();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = std::make_unique<grpc::GenericStub>(channel_);
    worker_stub_ = v1::WorkerService::NewStub(channel_);
  }

  void Run(const Record& rec) {
    if (rec.op == kTick) {
      std::this_thread::sleep_for(std::chrono::milliseconds(rec.payload.size() % 20));
      return;
    }
    const Method method = MethodOf(rec.op);
    if (method.path == nullptr) return;
    const Member* who = nullptr;
    if ((rec.flags & kKnownMember) && !members_.empty())
      who = &members_[(rec.flags >> 4) % members_.size()];
    std::string bytes(rec.payload);
    std::string member_id;
    if (who || (rec.flags & kCurrentGeneration) || rec.op == kWatchGenerations) {
      std::unique_ptr<google::protobuf::Message> m(method.prototype->New());
      if (!m->ParseFromString(bytes)) m->Clear();
      if (who) SetStringField(m.get(), "member_id", who->id);
      if (rec.flags & kCurrentGeneration) {
        auto g = coordinator_->CurrentGeneration();
        SetUInt64Field(m.get(), "generation", g ? g->number() : 0);
      }
      const auto* f = m->GetDescriptor()->FindFieldByName("member_id");
      if (f) member_id = m->GetReflection()->GetString(*m, f);
      bytes = m->SerializeAsString();
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (rec.flags & kWithSecret) {
      std::string secret = (rec.flags & kWrongSecret) ? "0123" : "";
      for (const auto& m : members_)
        if (m.id == member_id && !(rec.flags & kWrongSecret)) secret = m.secret;
      ctx.AddMetadata(rpc::kMemberSecretMetadata, secret);
    }
    if (rec.op == kWatchGenerations) {
      // A stream: read what comes within a short deadline, then go.
      v1::WatchGenerationsRequest req;
      (void)req.ParseFromString(bytes);
      grpc::ClientContext watch;
      watch.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
      if (rec.flags & kWithSecret)
        for (const auto& m : members_)
          if (m.id == member_id) watch.AddMetadata(rpc::kMemberSecretMetadata, m.secret);
      auto reader = worker_stub_->WatchGenerations(&watch, req);
      v1::Generation g;
      while (reader->Read(&g)) {
      }
      (void)reader->Finish();
      return;
    }
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    stub_->UnaryCall(&ctx, method.path, grpc::StubOptions(), &request, &response,
                     [&](grpc::Status s) {
                       std::lock_guard<std::mutex> lock(mu);
                       status = std::move(s);
                       done = true;
                       cv.notify_one();
                     });
    std::unique_lock<std::mutex> lock(mu);
    // The call's own deadline ends it; this wait only guards against a lost callback.
    if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; })) std::abort();
    // No unary handler waits: one that never answered within the (generous) deadline is a bug.
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) std::abort();
    if (rec.op == kJoin && status.ok() && members_.size() < 16) {
      std::vector<grpc::Slice> slices;
      v1::JoinResponse joined;
      if (response.Dump(&slices).ok()) {
        std::string out;
        for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
        if (joined.ParseFromString(out) && !joined.member_id().empty())
          members_.push_back({joined.member_id(), joined.member_secret()});
      }
    }
  }

 private:
  RealClock clock_;
  std::unique_ptr<coordinator::Coordinator> coordinator_;
  std::unique_ptr<coordinator::CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  std::unique_ptr<v1::WorkerService::Stub> worker_stub_;
  std::vector<Member> members_;
};

}  // namespace
}  // namespace retort

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  retort::fuzz::QuietLogsForFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Built on first use and never destroyed: gRPC's threads outlive any static destructor order.
  static auto* harness = new retort::Harness();
  for (const auto& rec :
       retort::fuzz::ParseRecords({reinterpret_cast<const char*>(data), size}, 16))
    harness->Run(rec);
  return 0;
}
