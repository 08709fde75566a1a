#include "coordinator/rpc_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <string>

#include "common/status.h"
#include "metrics/buckets.h"

namespace retort::coordinator {
namespace {

using grpc::experimental::InterceptionHookPoints;

struct RpcFamilies {
  prometheus::Family<prometheus::Counter>& calls;
  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Histogram& heartbeat;
};

// "/retort.v1.WorkerService/Heartbeat" -> "WorkerService/Heartbeat".
std::string ShortMethod(const char* full) {
  std::string m = full ? full : "";
  if (!m.empty() && m[0] == '/') m.erase(0, 1);
  const auto slash = m.find('/');
  const auto dot = m.rfind('.', slash);
  if (slash != std::string::npos && dot != std::string::npos) m.erase(0, dot + 1);
  return m;
}

class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(RpcFamilies* f, std::string method)
      : f_(f), method_(std::move(method)), start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      const std::string code = GrpcCodeName(methods->GetSendStatus().error_code());
      f_->calls.Add({{"method", method_}, {"code", code}}).Increment();
      f_->duration.Add({{"method", method_}, {"code", code}}, metrics::RpcLatencyBuckets())
          .Observe(s);
      if (method_ == "WorkerService/Heartbeat") f_->heartbeat.Observe(s);
    }
    methods->Proceed();
  }

 private:
  RpcFamilies* const f_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
};

class RpcMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsFactory(prometheus::Registry& r)
      : families_{prometheus::BuildCounter()
                      .Name("retort_coordinator_rpcs_total")
                      .Help("RPCs the coordinator answered, by method and status code.")
                      .Register(r),
                  prometheus::BuildHistogram()
                      .Name("retort_coordinator_rpc_duration_seconds")
                      .Help("Time from an RPC's start to its status, by method and status code.")
                      .Register(r),
                  prometheus::BuildHistogram()
                      .Name("retort_coordinator_heartbeat_latency_seconds")
                      .Help("Time the coordinator took to answer a worker's heartbeat.")
                      .Register(r)
                      .Add({}, metrics::RpcLatencyBuckets())} {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcMetricsInterceptor(&families_, ShortMethod(info->method()));
  }

 private:
  RpcFamilies families_;
};

}  // namespace

const char* GrpcCodeName(int code) {
  // StatusCode mirrors gRPC's numbering (rpc/grpc_status.h).
  return StatusCodeName(static_cast<StatusCode>(code));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRpcMetricsInterceptor(
    prometheus::Registry& registry) {
  return std::make_unique<RpcMetricsFactory>(registry);
}

}  // namespace retort::coordinator
