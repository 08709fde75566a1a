#include "tools/ctl_top.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "rpc/grpc_status.h"
#include "rpc/job_state.h"

namespace retort::tools {
std::vector<TopRow> TopRows(const v1::StatusResponse& status) {
  int64_t fastest = 0;
  for (const auto& m : status.members()) fastest = std::max(fastest, m.step());
  std::vector<TopRow> rows;
  for (const auto& m : status.members()) {
    TopRow r;
    r.member = m.member_id();
    r.node = m.node();
    r.rank = m.rank();
    r.local_rank = m.local_rank();
    r.generation = m.generation();
    r.step = m.step();
    r.lag_steps = fastest - m.step();
    const v1::StepMetrics& x = m.metrics();
    r.samples_per_second = x.samples_per_second();
    r.step_seconds = x.step_seconds();
    r.data_wait_seconds = x.data_wait_seconds();
    const double phases[metrics::kStepPhaseCount] = {
        x.data_wait_seconds(), x.teacher_forward_seconds(), x.student_forward_seconds(),
        x.backward_seconds(),  x.comm_exposed_seconds(),    x.optimizer_seconds(),
        x.checkpoint_seconds()};
    double total = 0;
    for (double p : phases) total += p;
    for (int i = 0; i < metrics::kStepPhaseCount; ++i)
      r.phase_share[i] = total > 0 ? phases[i] / total : 0;
    r.heartbeat_ms_ago = m.last_heartbeat_ms_ago();
    r.draining = m.draining();
    rows.push_back(r);
  }
  return rows;
}

std::string FormatTop(const v1::StatusResponse& s, const std::vector<TopRow>& rows) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "job %s: %s, generation %llu, step %lld/%lld, %d worker(s)\n\n",
                s.job_name().c_str(), rpc::JobStateName(s.state()),
                static_cast<unsigned long long>(s.generation()), static_cast<long long>(s.step()),
                static_cast<long long>(s.total_steps()), s.members_size());
  out += buf;
  if (s.last_evaluation().step() > 0) {
    std::snprintf(buf, sizeof(buf),
                  "evaluation at step %lld: top-1 %.4f, top-5 %.4f (best %.4f)\n\n",
                  static_cast<long long>(s.last_evaluation().step()), s.last_evaluation().top1(),
                  s.last_evaluation().top5(), s.best_evaluation().top1());
    out += buf;
  }
  if (s.checkpoint_health().consecutive_failures() > 0) {
    std::snprintf(
        buf, sizeof(buf),
        "CHECKPOINTS FAILING: %d in a row (%lld in all), the last at step %lld: %.300s\n\n",
        s.checkpoint_health().consecutive_failures(),
        static_cast<long long>(s.checkpoint_health().failures_total()),
        static_cast<long long>(s.checkpoint_health().last_failure_step()),
        s.checkpoint_health().last_failure().c_str());
    out += buf;
  }
  std::snprintf(buf, sizeof(buf), "%-4s %-10s %-16s %-4s %-8s %-4s %-9s %-8s %-9s %s\n", "RANK",
                "MEMBER", "NODE/LOCAL", "GEN", "STEP", "LAG", "SAMPLES/S", "STEP_MS", "DATA_MS",
                "PHASES (% of step: data tfwd sfwd bwd comm opt ckpt)");
  out += buf;
  for (const TopRow& r : rows) {
    std::string phases;
    for (int i = 0; i < 7; ++i) {
      char p[16];
      std::snprintf(p, sizeof(p), "%s%3.0f", i ? " " : "", 100 * r.phase_share[i]);
      phases += p;
    }
    const std::string rank = r.rank < 0 ? "-" : std::to_string(r.rank);
    const std::string where = r.node + "/" + std::to_string(r.local_rank);
    std::snprintf(buf, sizeof(buf),
                  "%-4s %-10s %-16s %-4llu %-8lld %-4lld %-9.1f %-8.1f %-9.1f %s%s\n", rank.c_str(),
                  r.member.c_str(), where.c_str(), static_cast<unsigned long long>(r.generation),
                  static_cast<long long>(r.step), static_cast<long long>(r.lag_steps),
                  r.samples_per_second, 1000 * r.step_seconds, 1000 * r.data_wait_seconds,
                  phases.c_str(), r.draining ? " (draining)" : "");
    out += buf;
  }
  return out;
}

nlohmann::json TopJson(const v1::StatusResponse& s, const std::vector<TopRow>& rows) {
  nlohmann::json workers = nlohmann::json::array();
  for (const TopRow& r : rows) {
    nlohmann::json phases = nlohmann::json::object();
    for (int i = 0; i < metrics::kStepPhaseCount; ++i)
      phases[metrics::kStepPhaseNames[i]] = r.phase_share[i];
    workers.push_back({{"member_id", r.member},
                       {"rank", r.rank},
                       {"node", r.node},
                       {"local_rank", r.local_rank},
                       {"generation", r.generation},
                       {"step", r.step},
                       {"lag_steps", r.lag_steps},
                       {"samples_per_second", r.samples_per_second},
                       {"step_seconds", r.step_seconds},
                       {"data_wait_seconds", r.data_wait_seconds},
                       {"phase_share", phases},
                       {"last_heartbeat_ms_ago", r.heartbeat_ms_ago},
                       {"draining", r.draining}});
  }
  return nlohmann::json{
      {"job", s.job_name()},
      {"state", rpc::JobStateName(s.state())},
      {"generation", s.generation()},
      {"step", s.step()},
      {"total_steps", s.total_steps()},
      {"checkpoint_failures", s.checkpoint_health().failures_total()},
      {"checkpoint_consecutive_failures", s.checkpoint_health().consecutive_failures()},
      {"workers", workers}};
}

int RunTop(v1::ControlService::Stub& stub, const std::string& coordinator, const TopOptions& o) {
  if (o.interval_ms <= 0 || o.count < 0) {
    std::fprintf(stderr, "retortctl: top: --interval-ms must be > 0 and --count >= 0\n");
    return 2;
  }
  const bool tty = !o.json && isatty(STDOUT_FILENO);
  for (int64_t n = 0;; ++n) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o.timeout_ms));
    if (o.prepare_call) o.prepare_call(&ctx);
    v1::StatusResponse r;
    grpc::Status s = stub.Status(&ctx, v1::StatusRequest(), &r);
    if (!s.ok()) {
      std::fprintf(stderr, "retortctl: top %s: %s\n", coordinator.c_str(),
                   FromGrpcStatus(s).ToString().c_str());
      return 1;
    }
    const auto rows = TopRows(r);
    if (o.json) {
      std::cout << TopJson(r, rows).dump() << std::endl;
    } else {
      if (tty)
        std::printf("\033[H\033[2J");
      else if (n > 0)
        std::printf("\n");
      std::printf("%s", FormatTop(r, rows).c_str());
      std::fflush(stdout);
    }
    if (o.once || (o.count > 0 && n + 1 >= o.count)) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
  }
}

}  // namespace retort::tools
