// libFuzzer harness: the Coordinator's worker- and operator-facing methods (coordinator.h), the
// domain objects behind every RPC, fed with sequences of arbitrary serialized requests
// (fuzz_requests.h has the input format). Each input starts from the same state: a fresh
// coordinator (fake clock, state file kept in memory) whose two workers have joined and formed
// generation 1; member ids, generations and secrets can be taken from that state so the fuzzer
// gets past the fences. Any sequence must give answers or errors, never a crash, a hang, an
// exception or a broken invariant (the checks at the end).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "common/clock.h"
#include "common/logging.h"
#include "coordinator/coordinator.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_requests.h"
#include "tests/fuzz/fuzz_util.h"

namespace retort {
namespace {

using coordinator::Coordinator;

// state.json in memory: the harness tests the state machine, not the disk.
class MemoryStateWriter final : public coordinator::StateFileWriter {
 public:
  Status WriteAtomically(const std::string&, const std::string&) override { return Status::Ok(); }
};

struct Member {
  std::string id, secret;
};

class Session {
 public:
  Session() {
    dir_ = fuzz::ScratchDir() + "/coordinator";
    fuzz::ResetDir(dir_);
    coordinator::CoordinatorOptions opts;
    opts.state_dir = dir_;
    opts.settle_ms = 100;
    opts.heartbeat_interval_ms = 500;
    opts.eviction_timeout_ms = 2000;
    opts.rejoin_grace_ms = 0;
    opts.state_writer = &writer_;
    v1::JobSpec job;
    job.set_name("fuzz-job");
    job.mutable_teacher()->set_preset("fm-teacher");
    job.mutable_student()->set_preset("fm-student");
    job.set_steps(100);
    job.mutable_elastic()->set_min_workers(1);
    job.mutable_elastic()->set_max_workers(4);
    job.mutable_checkpoint()->set_keep(2);
    job.mutable_checkpoint()->set_every_steps(20);
    auto c = Coordinator::Create(opts, job, &clock_);
    if (!c.ok()) std::abort();
    c_ = std::move(c).value();
    for (const char* node : {"node-a", "node-b"}) {
      // The parameter count is left to the fuzzed requests (the first Join or heartbeat that
      // carries one fixes the job's and re-plans).
      v1::JoinRequest join = fuzz::SeedJoin(node);
      join.set_parameter_count(0);
      auto r = c_->Join(join);
      if (!r.ok()) std::abort();
      members_.push_back({r->member_id(), r->member_secret()});
    }
    clock_.Advance(std::chrono::milliseconds(opts.settle_ms + 1));
    c_->Tick();
  }

  void Run(const fuzz::Record& rec) {
    using namespace fuzz;
    const Member* who = nullptr;
    if ((rec.flags & kKnownMember) && !members_.empty())
      who = &members_[(rec.flags >> 4) % members_.size()];
    auto parse = [&](google::protobuf::Message* m) {
      if (!m->ParseFromArray(rec.payload.data(), static_cast<int>(rec.payload.size()))) m->Clear();
      if (who) SetStringField(m, "member_id", who->id);
      if (rec.flags & kCurrentGeneration) {
        auto g = c_->CurrentGeneration();
        SetUInt64Field(m, "generation", g ? g->number() : 0);
      }
    };
    // The gRPC layer authenticates every call made for a member before the method runs.
    auto admitted = [&](const google::protobuf::Message& m) {
      const auto* f = m.GetDescriptor()->FindFieldByName("member_id");
      const std::string id = f ? m.GetReflection()->GetString(m, f) : "";
      std::string secret;
      if (rec.flags & kWithSecret) {
        for (const auto& mem : members_)
          if (mem.id == id) secret = mem.secret;
        if (rec.flags & kWrongSecret) secret = members_.empty() ? "x" : members_[0].secret;
      }
      return c_->AuthenticateMember(id, secret).ok();
    };
    switch (rec.op) {
      case kJoin: {
        v1::JoinRequest r;
        parse(&r);
        auto resp = c_->Join(r);
        if (resp.ok() && !resp->member_id().empty() && members_.size() < 16)
          members_.push_back({resp->member_id(), resp->member_secret()});
        break;
      }
      case kHeartbeat: {
        v1::HeartbeatRequest r;
        parse(&r);
        if (admitted(r)) (void)c_->Heartbeat(r);
        break;
      }
      case kLeave: {
        v1::LeaveRequest r;
        parse(&r);
        if (admitted(r)) (void)c_->Leave(r);
        break;
      }
      case kReportPeerFailure: {
        v1::PeerFailureReport r;
        parse(&r);
        if (admitted(r)) (void)c_->ReportPeerFailure(r);
        break;
      }
      case kKvPut: {
        v1::KvPutRequest r;
        parse(&r);
        if (admitted(r)) (void)c_->KvPut(r);
        break;
      }
      case kKvGet: {
        v1::KvGetRequest r;
        parse(&r);
        if (admitted(r)) (void)c_->KvGet(r);
        break;
      }
      case kBeginCheckpoint: {
        v1::BeginCheckpointRequest r;
        parse(&r);
        if (admitted(r)) (void)c_->BeginCheckpoint(r);
        break;
      }
      case kAckCheckpoint: {
        v1::AckCheckpointRequest r;
        parse(&r);
        if (!admitted(r)) break;
        // The shards a worker would have written (plain names, at most 4 KiB), so that acks
        // can commit.
        char name[32];
        std::snprintf(name, sizeof(name), "/ckpt-%08llu",
                      static_cast<unsigned long long>(r.checkpoint_id()));
        const std::string ckpt = c_->options().checkpoint_dir + name;
        for (const auto& f : r.files()) {
          const std::string& p = f.path();
          if (p.empty() || p.size() > 64 || p.find('/') != std::string::npos || p == "." ||
              p == ".." || f.size_bytes() < 0 || f.size_bytes() > 4096)
            continue;
          fuzz::MakeDir(ckpt);
          fuzz::WriteFile(ckpt + "/" + p, std::string(static_cast<size_t>(f.size_bytes()), 'x'));
        }
        (void)c_->AckCheckpoint(r);
        break;
      }
      case kGetCheckpoint: {
        v1::GetCheckpointRequest r;
        parse(&r);
        if (admitted(r)) (void)c_->GetCheckpoint(r);
        break;
      }
      case kStatus:
        (void)c_->GetStatus();
        break;
      case kPause:
        (void)c_->Pause();
        break;
      case kResume:
        (void)c_->Resume();
        break;
      case kCheckpoint:
        (void)c_->RequestCheckpoint();
        break;
      case kScale: {
        v1::ScaleRequest r;
        parse(&r);
        (void)c_->Scale(r);
        break;
      }
      case kDrain: {
        v1::DrainRequest r;
        parse(&r);
        (void)c_->Drain(r);
        break;
      }
      case kStop: {
        v1::StopRequest r;
        parse(&r);
        (void)c_->Stop(r);
        break;
      }
      case kTrace: {
        v1::TraceRequest r;
        parse(&r);
        (void)c_->RequestTrace(r);
        break;
      }
      case kWatchGenerations: {
        v1::WatchGenerationsRequest r;
        parse(&r);
        if (!admitted(r)) break;
        auto kind = c_->WatchOpened(r.member_id());
        if (kind.ok() && !(rec.flags & 0x80))
          c_->WatchClosed(r.member_id(), *kind);
        else if (kind.ok())
          open_watches_.push_back({r.member_id(), *kind});
        break;
      }
      case kTick:
        clock_.Advance(std::chrono::milliseconds(10 * static_cast<int64_t>(rec.payload.size())));
        c_->Tick();
        break;
      case kOpCount:
        break;
    }
  }

  // What must hold after any sequence.
  void Check() {
    const v1::StatusResponse status = c_->GetStatus();
    auto g = c_->CurrentGeneration();
    if (g) fuzz::CheckGenerationInvariants(*g);
    for (const auto& [id, kind] : open_watches_) c_->WatchClosed(id, kind);
    (void)status;
  }

 private:
  std::string dir_;
  FakeClock clock_;
  MemoryStateWriter writer_;
  std::unique_ptr<Coordinator> c_;
  std::vector<Member> members_;
  std::vector<std::pair<std::string, Coordinator::WatchKind>> open_watches_;
};

}  // namespace
}  // namespace retort

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  retort::fuzz::QuietLogsForFuzzing();
  if (const char* out = std::getenv("RETORT_FUZZ_WRITE_SEEDS")) {
    retort::fuzz::WriteSeeds(out);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  retort::Session session;
  for (const auto& rec : retort::fuzz::ParseRecords({reinterpret_cast<const char*>(data), size}))
    session.Run(rec);
  session.Check();
  return 0;
}
