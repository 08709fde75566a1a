// The input format of the RPC harnesses (fuzz_coordinator.cc: the Coordinator's methods;
// fuzz_grpc.cc: the gRPC services): a sequence of records
//
//   u8 op   u8 flags   u16 length (little-endian)   `length` bytes: the serialized request
//
// `op` (modulo kOpCount) names the RPC; flags bit 0 replaces the request's member_id with a
// member the harness knows (flags >> 4 picks which), bit 1 replaces its generation with the
// current one, bit 2 sends the member secret of that member (else none, or a wrong one when
// bit 3 is set). Bits 0-1 let the fuzzer reach code behind the member and generation checks
// without guessing random ids. kTick advances the clock by `length` x 10 ms and ticks.
// WriteSeeds() writes a few well-formed sessions (join, heartbeat, checkpoint, kv, control).
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "retort/v1/retort.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace retort::fuzz {

enum Op : uint8_t {
  kJoin,
  kHeartbeat,
  kLeave,
  kReportPeerFailure,
  kKvPut,
  kKvGet,
  kBeginCheckpoint,
  kAckCheckpoint,
  kGetCheckpoint,
  kStatus,
  kPause,
  kResume,
  kCheckpoint,
  kScale,
  kDrain,
  kStop,
  kTrace,
  kWatchGenerations,
  kTick,
  kOpCount
};

enum Flags : uint8_t {
  kKnownMember = 1,
  kCurrentGeneration = 2,
  kWithSecret = 4,
  kWrongSecret = 8,
};

struct Record {
  Op op;
  uint8_t flags;
  std::string_view payload;
};

// Splits `input` into records; a truncated last record keeps what is there.
inline std::vector<Record> ParseRecords(std::string_view input, size_t max_records = 64) {
  std::vector<Record> out;
  size_t i = 0;
  while (i + 4 <= input.size() && out.size() < max_records) {
    Record r;
    r.op = static_cast<Op>(static_cast<uint8_t>(input[i]) % kOpCount);
    r.flags = static_cast<uint8_t>(input[i + 1]);
    size_t len = static_cast<uint8_t>(input[i + 2]) | (static_cast<uint8_t>(input[i + 3]) << 8);
    i += 4;
    len = std::min(len, input.size() - i);
    r.payload = input.substr(i, len);
    i += len;
    out.push_back(r);
  }
  return out;
}

// Sets `field` (a string or uint64 field of `m`, if it has one) by reflection.
inline void SetStringField(google::protobuf::Message* m, const char* field,
                           const std::string& value) {
  const auto* f = m->GetDescriptor()->FindFieldByName(field);
  if (f && !f->is_repeated() && f->type() == google::protobuf::FieldDescriptor::TYPE_STRING)
    m->GetReflection()->SetString(m, f, value);
}
inline void SetUInt64Field(google::protobuf::Message* m, const char* field, uint64_t value) {
  const auto* f = m->GetDescriptor()->FindFieldByName(field);
  if (f && !f->is_repeated() && f->type() == google::protobuf::FieldDescriptor::TYPE_UINT64)
    m->GetReflection()->SetUInt64(m, f, value);
}

inline void AppendRecord(std::string* out, Op op, uint8_t flags,
                         const google::protobuf::Message& request) {
  const std::string bytes = request.SerializeAsString();
  out->push_back(static_cast<char>(op));
  out->push_back(static_cast<char>(flags));
  out->push_back(static_cast<char>(bytes.size() & 0xff));
  out->push_back(static_cast<char>((bytes.size() >> 8) & 0xff));
  *out += bytes;
}
inline void AppendTick(std::string* out, uint16_t times_10ms) {
  out->push_back(static_cast<char>(kTick));
  out->push_back(0);
  out->push_back(static_cast<char>(times_10ms & 0xff));
  out->push_back(static_cast<char>(times_10ms >> 8));
  *out += std::string(times_10ms, '\0');
}

inline v1::JoinRequest SeedJoin(const std::string& node) {
  v1::JoinRequest r;
  r.mutable_identity()->set_node(node);
  r.mutable_identity()->set_local_rank(0);
  r.mutable_identity()->set_incarnation("i1");
  r.mutable_identity()->set_data_address("127.0.0.1:1");
  r.set_parameter_count(10000);
  return r;
}

// Writes seed inputs into `dir` (one file per session).
inline void WriteSeeds(const std::string& dir) {
  ResetDir(dir);
  const uint8_t member = kKnownMember | kCurrentGeneration | kWithSecret;
  {  // a third worker joins, heartbeats at a step, then leaves
    std::string s;
    AppendRecord(&s, kJoin, 0, SeedJoin("node-c"));
    AppendTick(&s, 30);
    v1::HeartbeatRequest hb;
    hb.set_step(7);
    hb.mutable_metrics()->set_step_seconds(0.1);
    AppendRecord(&s, kHeartbeat, member, hb);
    AppendRecord(&s, kWatchGenerations, member, v1::WatchGenerationsRequest());
    AppendRecord(&s, kLeave, member | 0x10, v1::LeaveRequest());
    WriteFile(dir + "/join_heartbeat_leave", s);
  }
  {  // a coordinated checkpoint: begin, both members ack
    std::string s;
    v1::BeginCheckpointRequest begin;
    begin.set_step(10);
    AppendRecord(&s, kBeginCheckpoint, member, begin);
    for (int m = 0; m < 2; ++m) {
      v1::AckCheckpointRequest ack;
      ack.set_checkpoint_id(1);
      auto* f = ack.add_files();
      f->set_path("shard-0000" + std::to_string(m) + ".bin");
      f->set_size_bytes(16);
      f->set_rank(m);
      AppendRecord(&s, kAckCheckpoint, member | static_cast<uint8_t>(m << 4), ack);
    }
    v1::GetCheckpointRequest get;
    AppendRecord(&s, kGetCheckpoint, member, get);
    WriteFile(dir + "/checkpoint", s);
  }
  {  // bootstrap key-value exchange and a peer-failure report
    std::string s;
    v1::KvPutRequest put;
    put.set_key("ucx/0");
    put.set_value("address-bytes");
    AppendRecord(&s, kKvPut, member, put);
    v1::KvGetRequest get;
    get.set_key("ucx/0");
    AppendRecord(&s, kKvGet, member | 0x10, get);
    v1::PeerFailureReport report;
    report.set_failed_member_id("w1-2");
    report.set_failed_rank(1);
    report.set_detail("ucx: connection reset");
    AppendRecord(&s, kReportPeerFailure, member, report);
    WriteFile(dir + "/kv_and_report", s);
  }
  {  // an operator: status, pause, resume, scale, checkpoint, drain, trace, stop
    std::string s;
    AppendRecord(&s, kStatus, 0, v1::StatusRequest());
    AppendRecord(&s, kPause, 0, v1::PauseRequest());
    AppendRecord(&s, kResume, 0, v1::ResumeRequest());
    v1::ScaleRequest scale;
    scale.set_min_workers(1);
    scale.set_max_workers(3);
    AppendRecord(&s, kScale, 0, scale);
    AppendRecord(&s, kCheckpoint, 0, v1::CheckpointRequest());
    v1::DrainRequest drain;
    AppendRecord(&s, kDrain, kKnownMember, drain);
    AppendRecord(&s, kTrace, 0, v1::TraceRequest());
    AppendTick(&s, 50);
    AppendRecord(&s, kStop, 0, v1::StopRequest());
    WriteFile(dir + "/operator", s);
  }
}

}  // namespace retort::fuzz
