// gRPC adapters: every handler, unary or streaming, passes one admission path (services.cc:
// Admit) that checks the caller's role (authorizer.h), the request's size (request_limits.h)
// and, for calls made for a member, its member secret (member_secret.h); then it delegates to the
// Coordinator, mapping retort::Status to grpc::Status. Every refusal is logged with the peer and
// its identity (RefusalLog) and changes nothing. Callback API: handlers never block.
#pragma once

#include <map>
#include <string>

#include "common/mutex.h"
#include "coordinator/authorizer.h"
#include "coordinator/coordinator.h"
#include "coordinator/refusal_log.h"
#include "retort/v1/retort.grpc.pb.h"

namespace retort::coordinator {

// What both services share: who may call (Authorizer), the refusal log and the per-host count
// of event streams. Thread-safe.
class ServiceGuards {
 public:
  // `authorizer` (borrowed; null: every caller holds every role) must outlive the guards.
  explicit ServiceGuards(Authorizer* authorizer) : authorizer_(authorizer) {}
  // OK when the caller holds `role` (UNAUTHENTICATED / PERMISSION_DENIED otherwise).
  Status Admit(const grpc::ServerContextBase& ctx, Role role);
  // "ipv4:127.0.0.1:41234 (worker cert '...')", for the refusal log.
  std::string DescribePeer(const grpc::ServerContextBase& ctx);
  RefusalLog& refusals() { return refusals_; }
  // Takes one of the kMaxEventStreamsPerHost event streams of `host`; false when none is left.
  bool AcquireEventStream(const std::string& host) RETORT_EXCLUDES(mu_);
  void ReleaseEventStream(const std::string& host) RETORT_EXCLUDES(mu_);

 private:
  Authorizer* const authorizer_;
  RefusalLog refusals_;
  Mutex mu_;
  std::map<std::string, int> event_streams_ RETORT_GUARDED_BY(mu_);  // by host
};

// The member secret a call carries (member_secret.h), or "".
std::string MemberSecretOf(const grpc::ServerContextBase& ctx);

// The host part of a gRPC peer string ("ipv4:10.0.0.2:41234" -> "ipv4:10.0.0.2").
std::string PeerHost(const std::string& peer);

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  WorkerServiceImpl(Coordinator* c, ServiceGuards* guards) : c_(c), guards_(guards) {}
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext*, const v1::JoinRequest*,
                                 v1::JoinResponse*) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext*, const v1::HeartbeatRequest*,
                                      v1::HeartbeatResponse*) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext*, const v1::LeaveRequest*,
                                  v1::LeaveResponse*) override;
  grpc::ServerWriteReactor<v1::Generation>* WatchGenerations(
      grpc::CallbackServerContext*, const v1::WatchGenerationsRequest*) override;
  grpc::ServerUnaryReactor* ReportPeerFailure(grpc::CallbackServerContext*,
                                              const v1::PeerFailureReport*,
                                              v1::PeerFailureResponse*) override;
  grpc::ServerUnaryReactor* KvPut(grpc::CallbackServerContext*, const v1::KvPutRequest*,
                                  v1::KvPutResponse*) override;
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext*, const v1::KvGetRequest*,
                                  v1::KvGetResponse*) override;
  grpc::ServerUnaryReactor* BeginCheckpoint(grpc::CallbackServerContext*,
                                            const v1::BeginCheckpointRequest*,
                                            v1::BeginCheckpointResponse*) override;
  grpc::ServerUnaryReactor* AckCheckpoint(grpc::CallbackServerContext*,
                                          const v1::AckCheckpointRequest*,
                                          v1::AckCheckpointResponse*) override;
  grpc::ServerUnaryReactor* GetCheckpoint(grpc::CallbackServerContext*,
                                          const v1::GetCheckpointRequest*,
                                          v1::GetCheckpointResponse*) override;

 private:
  Coordinator* const c_;
  ServiceGuards* const guards_;
};

class ControlServiceImpl final : public v1::ControlService::CallbackService {
 public:
  ControlServiceImpl(Coordinator* c, ServiceGuards* guards) : c_(c), guards_(guards) {}
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext*, const v1::StatusRequest*,
                                   v1::StatusResponse*) override;
  grpc::ServerWriteReactor<v1::Event>* Watch(grpc::CallbackServerContext*,
                                             const v1::WatchRequest*) override;
  grpc::ServerUnaryReactor* Pause(grpc::CallbackServerContext*, const v1::PauseRequest*,
                                  v1::ControlResponse*) override;
  grpc::ServerUnaryReactor* Resume(grpc::CallbackServerContext*, const v1::ResumeRequest*,
                                   v1::ControlResponse*) override;
  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext*, const v1::CheckpointRequest*,
                                       v1::CheckpointResponse*) override;
  grpc::ServerUnaryReactor* Scale(grpc::CallbackServerContext*, const v1::ScaleRequest*,
                                  v1::ControlResponse*) override;
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext*, const v1::DrainRequest*,
                                  v1::ControlResponse*) override;
  grpc::ServerUnaryReactor* Stop(grpc::CallbackServerContext*, const v1::StopRequest*,
                                 v1::ControlResponse*) override;
  grpc::ServerUnaryReactor* Trace(grpc::CallbackServerContext*, const v1::TraceRequest*,
                                  v1::TraceResponse*) override;

 private:
  Coordinator* const c_;
  ServiceGuards* const guards_;
};

}  // namespace retort::coordinator
