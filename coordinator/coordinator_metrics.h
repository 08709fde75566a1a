// The coordinator's Prometheus metrics (names: retort_coordinator_*; units in the name, counters
// end in _total). Two parts:
// - CoordinatorMetrics: counters the coordinator bumps as things happen (evictions and
//   recoveries by cause, checkpoint commits and bytes, the coordinator's own pauses), as its
//   CoordinatorObserver;
// - MakeStatusCollector: gauges read from Coordinator::GetStatus() at every scrape (members,
//   generation, job step and state, per-member step, heartbeat age and throughput).
// RPC counts and latencies are rpc_metrics.h's.
//
// Threading: all methods are thread-safe (prometheus-cpp metrics are atomic).
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <vector>

#include "coordinator/coordinator.h"
#include "coordinator/coordinator_observer.h"
#include "metrics/endpoint.h"

namespace prometheus {
class Collectable;
class Counter;
template <typename T>
class Family;
class Registry;
}  // namespace prometheus

namespace retort::coordinator {

class CoordinatorMetrics final : public CoordinatorObserver {
 public:
  // Adds its families to `registry`, which must outlive this object.
  explicit CoordinatorMetrics(prometheus::Registry& registry);
  void OnEviction(const std::string& cause) override;
  void OnRecovery(const std::string& cause) override;
  void OnCheckpointCommitted(int64_t bytes) override;
  void OnCheckpointAborted() override;
  void OnOwnPause(double seconds) override;

 private:
  prometheus::Family<prometheus::Counter>& evictions_;
  prometheus::Family<prometheus::Counter>& recoveries_;
  prometheus::Counter& checkpoints_committed_;
  prometheus::Counter& checkpoint_bytes_;
  prometheus::Counter& checkpoints_aborted_;
  prometheus::Counter& own_pauses_;
  prometheus::Counter& own_pause_seconds_;
};

// Gauges from `coordinator`'s status at each scrape; `coordinator` must outlive the collector's
// last scrape (stop the exporter first).
std::shared_ptr<prometheus::Collectable> MakeStatusCollector(const Coordinator* coordinator);

// Everything retort-coordinator --metrics-listen needs, in start-up order:
//   auto m = CoordinatorMetricsEndpoint::Start(listen);   // serves /metrics
//   options.observer = (*m)->metrics();                    // before Coordinator::Create
//   AttachStatusCollector(**m, coordinator);               // scrape-time gauges
//   CoordinatorServer::Start(coordinator, addr, RpcMetricsInterceptors(**m));
// Destroy it before the Coordinator (it stops serving first).
using CoordinatorMetricsEndpoint = metrics::Endpoint<CoordinatorMetrics>;
void AttachStatusCollector(CoordinatorMetricsEndpoint& endpoint, const Coordinator* coordinator);
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors(CoordinatorMetricsEndpoint& endpoint);

}  // namespace retort::coordinator
