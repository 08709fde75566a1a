// RPC metrics of the coordinator's gRPC server, recorded by a server interceptor (no handler
// changes): retort_coordinator_rpcs_total{method,code} and
// retort_coordinator_rpc_duration_seconds{method,code} (from the call's start to its status;
// for streams that is the stream's life), plus retort_coordinator_heartbeat_latency_seconds
// (WorkerService/Heartbeat handling time). method is "Service/Method" without the package.
//
// Threading: the factory and its interceptors are called on gRPC's threads; all thread-safe.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

namespace prometheus {
class Registry;
}

namespace retort::coordinator {

// A factory for grpc::ServerBuilder::experimental().SetInterceptorCreators. Its families live in
// `registry`, which must outlive the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRpcMetricsInterceptor(
    prometheus::Registry& registry);

// "OK", "ABORTED", ... (the gRPC code's canonical name).
const char* GrpcCodeName(int code);

}  // namespace retort::coordinator
