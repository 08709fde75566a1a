#include "coordinator/coordinator_metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <limits>

#include "coordinator/rpc_metrics.h"
#include "rpc/job_state.h"

namespace retort::coordinator {
namespace {

constexpr const char* kEvictionCauses[] = {"heartbeat_timeout", "disconnected", "peer_failure"};
constexpr const char* kRecoveryCauses[] = {"heartbeat_timeout", "disconnected", "peer_failure",
                                           "worker_restart", "coordinator_restart"};

prometheus::MetricFamily Family(const std::string& name, const std::string& help) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = prometheus::MetricType::Gauge;
  return f;
}

void AddGauge(prometheus::MetricFamily* f, double value,
              std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f->metric.push_back(std::move(m));
}

class StatusCollector final : public prometheus::Collectable {
 public:
  explicit StatusCollector(const Coordinator* c) : c_(c) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const v1::StatusResponse s = c_->GetStatus();
    auto members = Family("retort_coordinator_members", "Members (workers) currently joined.");
    auto generation = Family("retort_coordinator_generation", "Newest generation number.");
    auto step = Family("retort_coordinator_job_step", "Highest step any member completed.");
    auto total = Family("retort_coordinator_job_total_steps", "Steps the job runs in all.");
    auto state = Family("retort_coordinator_job_state",
                        "1 for the job's current state (label state), 0 for the others.");
    auto min_w = Family("retort_coordinator_min_workers", "Elastic lower bound.");
    auto max_w = Family("retort_coordinator_max_workers", "Elastic upper bound.");
    auto ckpt = Family("retort_coordinator_last_checkpoint_step",
                       "Step of the newest committed checkpoint (0 = none).");
    auto ckpt_row = Family("retort_coordinator_checkpoint_consecutive_failures",
                           "Checkpoints that failed to commit since the last committed one.");
    auto eval_top1 = Family("retort_coordinator_evaluation_top1",
                            "Top-1 on the test split of the latest evaluation during training.");
    auto eval_best = Family("retort_coordinator_evaluation_best_top1",
                            "Best top-1 of the evaluations during training so far.");
    auto uptime = Family("retort_coordinator_uptime_seconds", "Seconds since this process began.");
    auto m_step = Family("retort_coordinator_member_step", "Last step each member completed.");
    auto m_age = Family("retort_coordinator_member_heartbeat_age_seconds",
                        "Seconds since each member's last heartbeat.");
    auto m_sps = Family("retort_coordinator_member_samples_per_second",
                        "Each member's last reported training throughput (global samples/s).");
    AddGauge(&members, s.members_size());
    AddGauge(&generation, static_cast<double>(s.generation()));
    AddGauge(&step, static_cast<double>(s.step()));
    AddGauge(&total, static_cast<double>(s.total_steps()));
    for (int st = v1::JOB_STATE_WAITING; st <= v1::JOB_STATE_FAILED; ++st)
      AddGauge(&state, s.state() == st ? 1 : 0,
               {{"state", rpc::JobStateName(static_cast<v1::JobState>(st))}});
    AddGauge(&min_w, s.min_workers());
    AddGauge(&max_w, s.max_workers());
    AddGauge(&ckpt, static_cast<double>(s.last_checkpoint_step()));
    AddGauge(&ckpt_row, s.checkpoint_health().consecutive_failures());
    // NaN before the first evaluation (0 would read as a student that gets nothing right).
    const double none = std::numeric_limits<double>::quiet_NaN();
    AddGauge(&eval_top1, s.has_last_evaluation() ? s.last_evaluation().top1() : none);
    AddGauge(&eval_best, s.has_last_evaluation() ? s.best_evaluation().top1() : none);
    AddGauge(&uptime, static_cast<double>(s.uptime_ms()) / 1000.0);
    for (const auto& m : s.members()) {
      std::vector<prometheus::ClientMetric::Label> labels = {
          {"member", m.member_id()},
          {"node", m.node()},
          {"local_rank", std::to_string(m.local_rank())},
          {"rank", std::to_string(m.rank())}};
      AddGauge(&m_step, static_cast<double>(m.step()), labels);
      AddGauge(&m_age, static_cast<double>(m.last_heartbeat_ms_ago()) / 1000.0, labels);
      AddGauge(&m_sps, m.metrics().samples_per_second(), labels);
    }
    return {members,  generation, step,      total,  state,  min_w, max_w, ckpt,
            ckpt_row, eval_top1,  eval_best, uptime, m_step, m_age, m_sps};
  }

 private:
  const Coordinator* const c_;
};

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(prometheus::Registry& registry)
    : evictions_(prometheus::BuildCounter()
                     .Name("retort_coordinator_evictions_total")
                     .Help("Members evicted, by cause.")
                     .Register(registry)),
      recoveries_(prometheus::BuildCounter()
                      .Name("retort_coordinator_recoveries_total")
                      .Help("Generations formed after members were lost, by the loss's cause.")
                      .Register(registry)),
      checkpoints_committed_(prometheus::BuildCounter()
                                 .Name("retort_coordinator_checkpoints_committed_total")
                                 .Help("Checkpoint manifests committed.")
                                 .Register(registry)
                                 .Add({})),
      checkpoint_bytes_(prometheus::BuildCounter()
                            .Name("retort_coordinator_checkpoint_bytes_total")
                            .Help("Bytes of the files of committed checkpoints.")
                            .Register(registry)
                            .Add({})),
      checkpoints_aborted_(prometheus::BuildCounter()
                               .Name("retort_coordinator_checkpoints_aborted_total")
                               .Help("Checkpoints aborted before their manifest was committed.")
                               .Register(registry)
                               .Add({})),
      own_pauses_(prometheus::BuildCounter()
                      .Name("retort_coordinator_own_pauses_total")
                      .Help("Gaps in the coordinator's own ticks (it was stopped, throttled or "
                            "migrated), after which every member got the time back.")
                      .Register(registry)
                      .Add({})),
      own_pause_seconds_(prometheus::BuildCounter()
                             .Name("retort_coordinator_own_pause_seconds_total")
                             .Help("Seconds the coordinator did not run, summed over its pauses.")
                             .Register(registry)
                             .Add({})) {
  // Every cause from the start, so that rates and dashboards see zeros rather than gaps.
  for (const char* c : kEvictionCauses) evictions_.Add({{"cause", c}});
  for (const char* c : kRecoveryCauses) recoveries_.Add({{"cause", c}});
}

void CoordinatorMetrics::OnEviction(const std::string& cause) {
  evictions_.Add({{"cause", cause}}).Increment();
}
void CoordinatorMetrics::OnRecovery(const std::string& cause) {
  recoveries_.Add({{"cause", cause}}).Increment();
}
void CoordinatorMetrics::OnCheckpointCommitted(int64_t bytes) {
  checkpoints_committed_.Increment();
  checkpoint_bytes_.Increment(static_cast<double>(bytes));
}
void CoordinatorMetrics::OnCheckpointAborted() { checkpoints_aborted_.Increment(); }
void CoordinatorMetrics::OnOwnPause(double seconds) {
  own_pauses_.Increment();
  own_pause_seconds_.Increment(seconds);
}

std::shared_ptr<prometheus::Collectable> MakeStatusCollector(const Coordinator* coordinator) {
  return std::make_shared<StatusCollector>(coordinator);
}

void AttachStatusCollector(CoordinatorMetricsEndpoint& endpoint, const Coordinator* coordinator) {
  endpoint.exporter().Add(MakeStatusCollector(coordinator));
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors(CoordinatorMetricsEndpoint& endpoint) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> v;
  v.push_back(MakeRpcMetricsInterceptor(endpoint.exporter().registry()));
  return v;
}

}  // namespace retort::coordinator
