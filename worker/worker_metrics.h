// The worker's Prometheus metrics (retort_worker_*), fed by the training thread as a
// StepObserver: step time histograms by phase, throughput, loss, learning rate, gradient norm,
// steps and skipped steps, the generation and rank it runs as.
//
// WorkerMetricsEndpoint bundles them with the HTTP exporter for retort-worker --metrics-listen.
// Threading: OnStep/OnGenerationStarted on the training thread; scrapes on the exporter's
// thread (prometheus-cpp metrics are atomic).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "metrics/endpoint.h"
#include "metrics/step_phases.h"
#include "worker/step_record.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace retort::metrics {
class MetricsExporter;
}

namespace retort::worker {

class WorkerMetrics final : public StepObserver {
 public:
  // Adds its families to `registry`, which must outlive this object.
  explicit WorkerMetrics(prometheus::Registry& registry);
  void OnStep(const StepRecord& r) override;
  void OnGenerationStarted(uint64_t generation, int rank, int world_size, int64_t unix_us) override;

 private:
  prometheus::Histogram* phase_[metrics::kStepPhaseCount];
  prometheus::Histogram& step_seconds_;
  prometheus::Counter& steps_;
  prometheus::Counter& skipped_;
  prometheus::Counter& samples_;
  prometheus::Gauge& samples_per_second_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& learning_rate_;
  prometheus::Gauge& grad_norm_;
  prometheus::Gauge& step_;
  prometheus::Gauge& generation_;
  prometheus::Gauge& rank_;
  prometheus::Gauge& world_size_;
  prometheus::Gauge& local_batch_;
  prometheus::Gauge& compute_samples_per_second_;
  // retort_worker_model_flops_utilization_ratio: registered at the first step whose value is
  // known, so a worker that cannot know it (CPU) exports no zero that would read as a value.
  prometheus::Registry& registry_;
  prometheus::Gauge* model_flops_utilization_ = nullptr;
};

using WorkerMetricsEndpoint = metrics::Endpoint<WorkerMetrics>;

}  // namespace retort::worker
