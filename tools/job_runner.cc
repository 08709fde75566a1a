#include "tools/job_runner.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "common/port_file.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_spec.h"
#include "retort/v1/retort.grpc.pb.h"
#include "rpc/client_channel.h"
#include "tools/cert_generator.h"
#include "tools/process_group.h"
#include "tools/run_layout.h"

namespace retort::tools {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string FormatDuration(double seconds) {
  int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%d:%02d", s / 60, s % 60);
  return buf;
}

std::string Seconds(milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f s", d.count() / 1000.0);
  return buf;
}

bool Terminal(v1::JobState s) {
  return s == v1::JOB_STATE_COMPLETED || s == v1::JOB_STATE_STOPPED || s == v1::JOB_STATE_FAILED;
}

// One worker of the launcher: the process now in it and its restart budget.
struct Slot {
  int process = -1;  // index in the ProcessGroup
  bool exited = false;
  int restarts = 0;
  std::optional<Clock::time_point> restart_at;
};

// "student top-1 0.8712 on 10000 test images" or "not evaluated", from result.json.
std::string ResultSummary(const std::string& dir) {
  auto text = ReadFileToString(dir + "/result.json");
  if (!text.ok()) return "";
  try {
    auto r = nlohmann::json::parse(*text);
    if (!r.value("evaluated", r.contains("student_top1")))
      return "student top-1 not evaluated (the job sets evaluate: false)";
    char buf[128];
    std::snprintf(buf, sizeof(buf), "student top-1 %.4f on %lld test images",
                  r.value("student_top1", 0.0),
                  static_cast<long long>(r.value("test_samples", int64_t{0})));
    return buf;
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

}  // namespace

int RunJob(const RunOptions& o, const v1::JobSpec& job_in, std::atomic<int>& interrupts,
           std::string* results_dir) {
  const RunLayout layout = ResolveLayout(o.output_flag, o.state_flag, job_in);
  if (results_dir) *results_dir = layout.output_dir;
  const int min_workers = job_in.elastic().min_workers();
  if (o.workers < min_workers) {
    std::fprintf(stderr,
                 "retort-run: --workers=%d is below the job's elastic.min_workers=%d: the job "
                 "could never start\n",
                 o.workers, min_workers);
    return 2;
  }
  if (o.fresh) {
    auto removed = RemovePreviousRun(layout);
    if (!removed.ok()) {
      std::fprintf(stderr, "retort-run: %s\n", removed.status().message().c_str());
      return 1;
    }
    for (const auto& p : *removed) std::printf("retort-run: --fresh: removed %s\n", p.c_str());
  }
  const PreviousRun previous = InspectPreviousRun(layout, job_in);
  switch (previous.kind) {
    case PreviousRun::Kind::kCompleted:
      if (results_dir) *results_dir = previous.results_dir;
      std::printf("retort-run: job '%s' already completed; results in %s (--fresh runs it again)\n",
                  job_in.name().c_str(), previous.results_dir.c_str());
      return 0;
    case PreviousRun::Kind::kStopped:
      std::fprintf(stderr,
                   "retort-run: job '%s' in %s was stopped before it completed and cannot be "
                   "resumed; --fresh starts it again\n",
                   job_in.name().c_str(), layout.state_dir.c_str());
      return 1;
    case PreviousRun::Kind::kFailed:
      std::fprintf(stderr,
                   "retort-run: job '%s' in %s failed earlier%s%s; --fresh starts it again\n",
                   job_in.name().c_str(), layout.state_dir.c_str(),
                   previous.detail.empty() ? "" : ": ", previous.detail.c_str());
      return 1;
    case PreviousRun::Kind::kOtherJob:
      std::fprintf(stderr,
                   "retort-run: %s holds the state of job '%s', not '%s'; choose another "
                   "--output-dir (or --state-dir)\n",
                   layout.state_dir.c_str(), previous.job_name.c_str(), job_in.name().c_str());
      return 2;
    case PreviousRun::Kind::kUnreadable:
      std::fprintf(stderr, "retort-run: cannot read the state in %s: %s\n",
                   layout.state_dir.c_str(), previous.detail.c_str());
      return 1;
    case PreviousRun::Kind::kResumable:
      std::printf("retort-run: resuming job '%s' from %s (last checkpoint at step %lld)\n",
                  job_in.name().c_str(), layout.state_dir.c_str(),
                  static_cast<long long>(previous.last_checkpoint_step));
      break;
    case PreviousRun::Kind::kNone:
      break;
  }

  // The spec the coordinator hands to workers names the run's output directory, so metrics,
  // weights and results land next to the state.
  v1::JobSpec job = job_in;
  job.set_output_dir(layout.output_dir);
  if (Status mk = MakeDirectories(layout.output_dir); !mk.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", mk.message().c_str());
    return 1;
  }
  const std::string spec_path = layout.output_dir + "/job.json",
                    port_path = layout.output_dir + "/coordinator.port";
  ::unlink(port_path.c_str());
  if (Status s = WriteFileAtomically(spec_path, coordinator::JobSpecToJson(job) + "\n"); !s.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", s.message().c_str());
    return 1;
  }

  std::string tls_dir = o.tls_dir;
  if (tls_dir.empty() && o.tls) {
    tls_dir = layout.output_dir + "/tls";
    if (!PathExists(tls_dir + "/coordinator.crt")) {
      CertOptions certs;
      certs.out_dir = tls_dir;
      if (auto made = GenerateClusterCertificates(certs); !made.ok()) {
        std::fprintf(stderr, "retort-run: making certificates: %s\n",
                     made.status().message().c_str());
        return 1;
      }
    }
  }
  // Each process's TLS flags for `role` (coordinator, worker, operator); none without TLS.
  auto tls_flags = [&](const std::string& role) -> std::vector<std::string> {
    if (tls_dir.empty()) return {};
    return {"--tls-cert=" + tls_dir + "/" + role + ".crt",
            "--tls-key=" + tls_dir + "/" + role + ".key", "--tls-ca=" + tls_dir + "/ca.crt"};
  };
  rpc::ClientSecurity control_security;
  if (!tls_dir.empty()) {
    control_security.tls_cert = tls_dir + "/operator.crt";
    control_security.tls_key = tls_dir + "/operator.key";
    control_security.tls_ca = tls_dir + "/ca.crt";
  }

  ProcessGroup group;
  std::vector<std::string> coord_argv = {
      o.bin_dir + "/retort-coordinator", "--listen=127.0.0.1:0",
      "--state-dir=" + layout.state_dir, "--job=" + spec_path,
      "--port-file=" + port_path,        "--log-level=" + o.log_level};
  if (!layout.checkpoint_dir.empty())
    coord_argv.push_back("--checkpoint-dir=" + layout.checkpoint_dir);
  for (const auto& f : tls_flags("coordinator")) coord_argv.push_back(f);
  const int coord = group.Spawn("coordinator", coord_argv);
  std::printf("retort-run: coordinator started (pid %d)\n", static_cast<int>(group.pid(coord)));
  const auto start = Clock::now();
  auto took = [&] {
    return FormatDuration(std::chrono::duration<double>(Clock::now() - start).count());
  };
  const StatusOr<int> port = WaitForPortFile(port_path, Deadline::After(std::chrono::seconds(30)),
                                             [&] { return group.Poll(coord).has_value(); });
  if (!port.ok()) {
    if (auto rc = group.Poll(coord)) {
      group.WaitForOutput();
      std::printf("retort-run: FAILED: %s before it listened\n",
                  DescribeCoordinatorExit(*rc).c_str());
    } else if (port.status().code() == StatusCode::kDeadlineExceeded) {
      std::printf("retort-run: FAILED: the coordinator did not start within 30 s\n");
    } else {
      std::printf("retort-run: FAILED: %s\n", port.status().message().c_str());
    }
    return 1;
  }
  const std::string address = "127.0.0.1:" + std::to_string(*port);

  std::vector<Slot> slots(static_cast<size_t>(o.workers));
  auto spawn_worker = [&](int i) {
    const int node = o.workers_per_node > 0 ? i / o.workers_per_node : 0;
    const int local = o.workers_per_node > 0 ? i % o.workers_per_node : i;
    std::vector<std::string> argv = {
        o.bin_dir + "/retort-worker",          "--coordinator=" + address,
        "--node=local" + std::to_string(node), "--local-rank=" + std::to_string(local),
        "--log-level=" + o.log_level,          "--output-dir=" + layout.output_dir};
    if (!o.train) argv.push_back("--no-train");
    for (const auto& f : tls_flags("worker")) argv.push_back(f);
    if (o.threads > 0) argv.push_back("--threads=" + std::to_string(o.threads));
    if (o.gpus_per_node > 0) argv.push_back("--device=cuda:" + std::to_string(local));
    argv.insert(argv.end(), o.worker_args.begin(), o.worker_args.end());
    Slot& s = slots[static_cast<size_t>(i)];
    s.process = group.Spawn("worker " + std::to_string(i), argv);
    s.exited = false;
    s.restart_at.reset();
    std::printf("retort-run: worker %d started (pid %d)\n", i,
                static_cast<int>(group.pid(s.process)));
  };
  std::printf(
      "retort-run: job '%s' with %d worker(s) (min_workers=%d, --max-restarts=%d); coordinator "
      "at %s; output in %s\n",
      job.name().c_str(), o.workers, min_workers, o.restarts.max_restarts, address.c_str(),
      layout.output_dir.c_str());
  for (int i = 0; i < o.workers; ++i) spawn_worker(i);
  std::fflush(stdout);

  auto control = v1::ControlService::NewStub(
      grpc::CreateChannel(address, rpc::MakeChannelCredentials(control_security)));
  auto call_stop = [&](const std::string& reason) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(2000));
    v1::StopRequest req;
    req.set_reason(reason);
    v1::ControlResponse resp;
    return control->Stop(&ctx, req, &resp).ok();
  };
  std::optional<v1::StatusResponse> last_status;
  auto poll_status = [&]() -> bool {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(500));
    v1::StatusResponse st;
    if (!control->Status(&ctx, v1::StatusRequest(), &st).ok()) return false;
    last_status = st;
    return true;
  };
  auto job_terminal = [&] { return last_status && Terminal(last_status->state()); };

  int handled_interrupts = interrupts.load();
  bool stop_requested = false;
  std::string stopped_because;      // --timeout-s / --stop-when-formed
  std::string cannot_continue;      // why the launcher gave up on the job
  std::vector<std::string> deaths;  // "worker 1 exited with status 137 (...)", in order
  std::string crash_after_end;      // a process that died of a signal once the job had ended
  std::optional<int> coord_rc;
  std::optional<Clock::time_point> ended_at;
  bool sent_term = false, sent_coord_term = false, sent_kill = false;
  uint64_t shown_generation = 0;
  int64_t shown_step = -1;
  auto last_progress = Clock::now();
  const auto grace = std::chrono::seconds(o.exit_grace_s);

  auto live_workers = [&] {
    int n = 0;
    for (const auto& s : slots) n += (!s.exited || s.restart_at.has_value()) ? 1 : 0;
    return n;
  };
  auto cancel_restarts = [&] {
    for (auto& s : slots) s.restart_at.reset();
  };

  while (true) {
    std::this_thread::sleep_for(milliseconds(200));
    const int n = interrupts.load();
    if (n > handled_interrupts) {
      handled_interrupts = n;
      if (n == 1) {
        std::printf("retort-run: stopping the job (Ctrl-C again to terminate)\n");
        if (!call_stop("interrupted")) group.SignalAll(SIGTERM);
      } else if (n == 2) {
        group.SignalAll(SIGTERM);
      } else {
        group.SignalAll(SIGKILL);
      }
      stop_requested = true;
      cancel_restarts();
    }
    if (!coord_rc) poll_status();
    const bool ending = stop_requested || coord_rc.has_value() || job_terminal();

    // Workers that exited since the last round.
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[i];
      if (s.exited) continue;
      auto rc = group.Poll(s.process);
      if (!rc) continue;
      s.exited = true;
      const std::string who =
          "worker " + std::to_string(i) + " (pid " + std::to_string(group.pid(s.process)) + ")";
      if (*rc == 0) {
        // A worker leaves before the launcher sees the job complete: ask before calling it early.
        if (!ending && !(poll_status() && job_terminal()))
          std::printf(
              "retort-run: %s left the job before it ended (drained or scaled down); "
              "not restarted\n",
              who.c_str());
        continue;
      }
      if (ending) {
        std::printf("retort-run: %s exited with %s while the job was ending\n", who.c_str(),
                    DescribeExit(*rc).c_str());
        if (DiedOfSignal(*rc) && !sent_term && !sent_kill && handled_interrupts == 0 &&
            crash_after_end.empty())
          crash_after_end = who + " exited with " + DescribeExit(*rc);
        continue;
      }
      deaths.push_back("worker " + std::to_string(i) + " exited with " + DescribeExit(*rc));
      std::string next;
      if (!WorthRestarting(*rc)) {
        next = "not restarted (status 2 is a usage error)";
      } else if (s.restarts >= o.restarts.max_restarts) {
        next = "not restarted (--max-restarts=" + std::to_string(o.restarts.max_restarts) +
               (o.restarts.max_restarts > 0 ? " used up)" : ")");
      } else {
        const auto delay = RestartDelay(o.restarts, s.restarts + 1);
        s.restart_at = Clock::now() + delay;
        next = "restarting it in " + Seconds(delay) + " (restart " +
               std::to_string(s.restarts + 1) + " of " + std::to_string(o.restarts.max_restarts) +
               ")";
      }
      const int live = live_workers();
      const int needed = last_status ? last_status->min_workers() : min_workers;
      std::printf("retort-run: %s exited with %s; %d of %d worker(s) left (min_workers=%d); %s\n",
                  who.c_str(), DescribeExit(*rc).c_str(), live, o.workers, needed, next.c_str());
      if (live < needed && cannot_continue.empty()) {
        // The job may have just completed (this exit being part of its end): check first.
        poll_status();
        if (job_terminal()) continue;
        std::string list;
        for (const auto& d : deaths) list += (list.empty() ? "" : "; ") + d;
        cannot_continue =
            "only " + std::to_string(live) + " of " + std::to_string(o.workers) +
            " worker(s) left and the job needs min_workers=" + std::to_string(needed) + " (" +
            list + ")";
        std::printf("retort-run: the job cannot continue: %s; stopping it\n",
                    cannot_continue.c_str());
        if (!call_stop("retort-run: fewer than min_workers workers left")) group.SignalAll(SIGTERM);
        stop_requested = true;
        cancel_restarts();
      }
    }

    // Restarts that are due.
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[i];
      if (!s.restart_at || Clock::now() < *s.restart_at) continue;
      if (stop_requested || coord_rc || job_terminal()) {
        s.restart_at.reset();
        continue;
      }
      s.restarts++;
      std::printf("retort-run: restarting worker %zu (restart %d of %d)\n", i, s.restarts,
                  o.restarts.max_restarts);
      spawn_worker(static_cast<int>(i));
    }

    // The coordinator's exit. A crash stops the workers at once; otherwise, once the job has
    // ended (the coordinator exited, or reports a terminal state), workers get exit_grace_s to
    // leave by themselves, then SIGTERM; the coordinator too after twice that; SIGKILL after
    // three times.
    if (!coord_rc) {
      if (auto rc = group.Poll(coord)) {
        coord_rc = rc;
        cancel_restarts();
        if (*rc != 0 && !group.AllExited()) {
          std::printf("retort-run: %s; stopping the workers\n",
                      DescribeCoordinatorExit(*rc).c_str());
          group.SignalAll(SIGTERM);
          sent_term = true;
        }
      }
    }
    if (!ended_at && (coord_rc || job_terminal())) ended_at = Clock::now();
    if (ended_at && !group.AllExited()) {
      const auto since = Clock::now() - *ended_at;
      if (!sent_term && since >= grace) {
        std::printf(
            "retort-run: worker(s) still running %lld s after the job ended; sending "
            "SIGTERM\n",
            static_cast<long long>(o.exit_grace_s));
        for (const auto& s : slots)
          if (!s.exited) group.Signal(s.process, SIGTERM);
        sent_term = true;
      } else if (sent_term && !sent_coord_term && since >= 2 * grace) {
        std::printf("retort-run: processes still running after SIGTERM; sending SIGTERM to all\n");
        group.SignalAll(SIGTERM);
        sent_coord_term = true;
      } else if (sent_coord_term && !sent_kill && since >= 3 * grace) {
        std::printf("retort-run: processes still running; sending SIGKILL\n");
        group.SignalAll(SIGKILL);
        sent_kill = true;
      }
    }
    bool pending = false;
    for (const auto& s : slots) pending = pending || s.restart_at.has_value();
    if (group.AllExited() && !pending) break;

    if (o.timeout_s > 0 && !stop_requested &&
        Clock::now() - start > std::chrono::seconds(o.timeout_s)) {
      std::printf("retort-run: --timeout-s=%lld reached; stopping the job\n",
                  static_cast<long long>(o.timeout_s));
      call_stop("launcher timeout");
      stop_requested = true;
      stopped_because = "--timeout-s reached";
      cancel_restarts();
    }
    if (!last_status || coord_rc) continue;
    const v1::StatusResponse& st = *last_status;
    if (st.generation() != shown_generation && st.state() == v1::JOB_STATE_RUNNING) {
      shown_generation = st.generation();
      std::printf("retort-run: generation %llu: %d worker(s) on %s\n",
                  static_cast<unsigned long long>(st.generation()), st.members_size(),
                  o.workers_per_node > 0 ? "several nodes" : "one node");
      for (const auto& m : st.members())
        std::printf("retort-run:   rank %d  %-8s node %s local rank %d\n", m.rank(),
                    m.member_id().c_str(), m.node().c_str(), m.local_rank());
      std::fflush(stdout);
      if (o.stop_when_formed && st.members_size() == o.workers && !stop_requested) {
        std::printf(
            "retort-run: all %d workers formed generation %llu; stopping (--stop-when-formed)\n",
            o.workers, static_cast<unsigned long long>(st.generation()));
        call_stop("--stop-when-formed");
        stop_requested = true;
        stopped_because = "--stop-when-formed";
      }
    }
    const auto now = Clock::now();
    if (st.step() != shown_step && st.step() > 0 && now - last_progress > std::chrono::seconds(2)) {
      shown_step = st.step();
      last_progress = now;
      // Every member reports the global batch's loss and throughput: average them.
      double loss = 0, sps = 0;
      for (const auto& m : st.members()) {
        loss += m.metrics().loss() / std::max(1, st.members_size());
        sps += m.metrics().samples_per_second() / std::max(1, st.members_size());
      }
      std::string eta = "?";
      if (st.total_steps() > 0 && sps > 0)
        eta = FormatDuration(static_cast<double>(st.total_steps() - st.step()) *
                             job.global_batch() / sps);
      std::printf("retort-run: step %lld%s  loss %.4f  %.0f samples/s  ETA %s\n",
                  static_cast<long long>(st.step()),
                  st.total_steps() > 0 ? ("/" + std::to_string(st.total_steps())).c_str() : "",
                  loss, sps, eta.c_str());
      std::fflush(stdout);
    }
  }
  group.WaitForOutput();  // every child's last lines come before the verdict

  // The verdict, from the coordinator's durable state (it has exited).
  const PreviousRun final_state = InspectPreviousRun(layout, job_in);
  std::string failure = final_state.kind == PreviousRun::Kind::kFailed ? final_state.detail : "";
  if (failure.empty() && last_status) failure = JobFailureText(*last_status);
  const bool completed = final_state.kind == PreviousRun::Kind::kCompleted && *coord_rc == 0;
  const std::string where = "state and checkpoints in " + layout.state_dir;
  if (handled_interrupts > 0) {
    const bool clean = *coord_rc == 0 && crash_after_end.empty();
    std::printf("retort-run: %s after %s (interrupted); %s\n", clean ? "stopped" : "FAILED",
                took().c_str(), where.c_str());
    return clean ? 0 : 1;
  }
  if (!cannot_continue.empty()) {
    std::printf("retort-run: FAILED after %s: %s\n", took().c_str(), cannot_continue.c_str());
    return 1;
  }
  if (final_state.kind == PreviousRun::Kind::kFailed || *coord_rc == 3) {
    std::printf("retort-run: FAILED after %s: job failed: %s\n", took().c_str(),
                failure.empty() ? DescribeCoordinatorExit(*coord_rc).c_str() : failure.c_str());
    return 1;
  }
  if (completed) {
    if (std::string r = ResultSummary(layout.output_dir); !r.empty())
      std::printf("retort-run: result: %s; results in %s\n", r.c_str(), layout.output_dir.c_str());
    if (!crash_after_end.empty()) {
      std::printf("retort-run: FAILED after %s: the job completed, but %s\n", took().c_str(),
                  crash_after_end.c_str());
      return 1;
    }
    std::printf(
        "retort-run: finished after %s%s; results in %s; %s\n", took().c_str(),
        deaths.empty()
            ? ""
            : (" (" + std::to_string(deaths.size()) + " worker failure(s) survived)").c_str(),
        layout.output_dir.c_str(), where.c_str());
    return 0;
  }
  if (*coord_rc != 0) {
    std::printf("retort-run: FAILED after %s: %s%s%s\n", took().c_str(),
                DescribeCoordinatorExit(*coord_rc).c_str(), failure.empty() ? "" : ": ",
                failure.c_str());
    return 1;
  }
  if (!stopped_because.empty() && final_state.kind == PreviousRun::Kind::kStopped) {
    std::printf("retort-run: stopped after %s (%s); %s\n", took().c_str(), stopped_because.c_str(),
                where.c_str());
    return crash_after_end.empty() ? 0 : 1;
  }
  std::printf("retort-run: FAILED after %s: the coordinator exited with the job %s\n",
              took().c_str(),
              final_state.kind == PreviousRun::Kind::kStopped ? "stopped" : "not completed");
  return 1;
}

}  // namespace retort::tools
