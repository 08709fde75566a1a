// The worker's Prometheus metrics as a step observer: model-FLOPs utilisation is exported only
// once a step knows it (absent, not zero, on a device whose peak is unknown).
#include "worker/worker_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <optional>

namespace retort::worker {
namespace {

std::optional<double> GaugeValue(prometheus::Registry& registry, const std::string& name) {
  for (const auto& family : registry.Collect())
    if (family.name == name && !family.metric.empty()) return family.metric[0].gauge.value;
  return std::nullopt;
}

TEST(WorkerMetricsTest, ModelFlopsUtilizationIsAbsentUntilKnown) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry);
  StepRecord r;
  r.step = 1;
  r.global_batch = 64;
  r.samples_per_second = 100;
  metrics.OnStep(r);
  EXPECT_EQ(GaugeValue(registry, "retort_worker_samples_per_second"), 100.0);
  EXPECT_FALSE(GaugeValue(registry, "retort_worker_model_flops_utilization_ratio"));
  r.step = 2;
  r.model_flops_utilization = 0.42;
  metrics.OnStep(r);
  EXPECT_EQ(GaugeValue(registry, "retort_worker_model_flops_utilization_ratio"), 0.42);
  r.step = 3;
  r.model_flops_utilization = 0.40;
  metrics.OnStep(r);
  EXPECT_EQ(GaugeValue(registry, "retort_worker_model_flops_utilization_ratio"), 0.40);
}

}  // namespace
}  // namespace retort::worker
