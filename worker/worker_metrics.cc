#include "worker/worker_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cmath>

#include "metrics/buckets.h"
#include "metrics/exporter.h"

namespace retort::worker {
namespace {

prometheus::Gauge& Gauge(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}
prometheus::Counter& Counter(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

WorkerMetrics::WorkerMetrics(prometheus::Registry& r)
    : step_seconds_(prometheus::BuildHistogram()
                        .Name("retort_worker_step_seconds")
                        .Help("Wall time of a whole training step.")
                        .Register(r)
                        .Add({}, metrics::StepPhaseBuckets())),
      steps_(Counter(r, "retort_worker_steps_total", "Training steps completed by this worker.")),
      skipped_(Counter(r, "retort_worker_skipped_steps_total",
                       "Steps whose update was skipped (non-finite gradients).")),
      samples_(Counter(r, "retort_worker_samples_total",
                       "Samples of the global batches of the steps this worker took part in.")),
      samples_per_second_(Gauge(r, "retort_worker_samples_per_second",
                                "Global batch / wall time of the last step.")),
      loss_(Gauge(r, "retort_worker_loss", "Global-batch loss of the last step.")),
      learning_rate_(
          Gauge(r, "retort_worker_learning_rate", "Learning rate used by the last step.")),
      grad_norm_(Gauge(r, "retort_worker_grad_norm",
                       "Global L2 gradient norm of the last finite step, before clipping.")),
      step_(Gauge(r, "retort_worker_step", "Last global step this worker completed.")),
      generation_(Gauge(r, "retort_worker_generation", "Generation this worker runs in.")),
      rank_(Gauge(r, "retort_worker_rank", "This worker's rank in its generation.")),
      world_size_(Gauge(r, "retort_worker_world_size", "Ranks in this worker's generation.")),
      local_batch_(Gauge(r, "retort_worker_local_batch",
                         "Samples of the last step's global batch this worker trained (its "
                         "share; straggler rebalancing changes it).")),
      compute_samples_per_second_(
          Gauge(r, "retort_worker_compute_samples_per_second",
                "Samples per second of this worker's own forward and backward at the last step "
                "(its waits excluded).")),
      registry_(r) {
  auto& phases = prometheus::BuildHistogram()
                     .Name("retort_worker_step_phase_seconds")
                     .Help("Time of each phase of a training step (label phase).")
                     .Register(r);
  for (int i = 0; i < metrics::kStepPhaseCount; ++i)
    phase_[i] = &phases.Add({{"phase", metrics::kStepPhaseNames[i]}}, metrics::StepPhaseBuckets());
}

void WorkerMetrics::OnStep(const StepRecord& r) {
  const auto phases = PhaseSeconds(r);
  for (int i = 0; i < metrics::kStepPhaseCount; ++i) phase_[i]->Observe(phases[i]);
  step_seconds_.Observe(r.step_seconds);
  steps_.Increment();
  if (r.skipped) skipped_.Increment();
  samples_.Increment(static_cast<double>(r.global_batch));
  samples_per_second_.Set(r.samples_per_second);
  loss_.Set(r.loss);
  learning_rate_.Set(r.learning_rate);
  if (std::isfinite(r.grad_norm)) grad_norm_.Set(r.grad_norm);
  step_.Set(static_cast<double>(r.step));
  local_batch_.Set(static_cast<double>(r.local_batch));
  compute_samples_per_second_.Set(r.compute_samples_per_second);
  if (r.model_flops_utilization >= 0) {
    if (!model_flops_utilization_)
      model_flops_utilization_ =
          &Gauge(registry_, "retort_worker_model_flops_utilization_ratio",
                 "Model FLOPs per second of the job over the bf16 peak of its devices (MFU) "
                 "at the last step; only where the device's peak is known.");
    model_flops_utilization_->Set(r.model_flops_utilization);
  }
}

void WorkerMetrics::OnGenerationStarted(uint64_t generation, int rank, int world_size, int64_t) {
  generation_.Set(static_cast<double>(generation));
  rank_.Set(rank);
  world_size_.Set(world_size);
}

}  // namespace retort::worker
