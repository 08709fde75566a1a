// gRPC adapters: each handler validates nothing itself and delegates to the Coordinator, mapping
// retort::Status to grpc::Status. Callback API: handlers never block.
#pragma once

#include "coordinator/coordinator.h"
#include "retort/v1/retort.grpc.pb.h"

namespace retort::coordinator {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  explicit WorkerServiceImpl(Coordinator* c) : c_(c) {}
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
};

class ControlServiceImpl final : public v1::ControlService::CallbackService {
 public:
  explicit ControlServiceImpl(Coordinator* c) : c_(c) {}
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

 private:
  Coordinator* const c_;
};

}  // namespace retort::coordinator
