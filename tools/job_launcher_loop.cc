// JobLauncher's loop: one round every 200 ms until every process exited (job_launcher.h).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "tools/job_launcher.h"
#include "tools/launcher_policy.h"

namespace retort::tools {
namespace {

using std::chrono::milliseconds;

std::string Seconds(milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f s", d.count() / 1000.0);
  return buf;
}

bool Terminal(v1::JobState s) {
  return s == v1::JOB_STATE_COMPLETED || s == v1::JOB_STATE_STOPPED || s == v1::JOB_STATE_FAILED;
}

std::string FormatDuration(double seconds) {
  int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%d:%02d", s / 60, s % 60);
  return buf;
}

}  // namespace

std::string JobLauncher::Took() const {
  return FormatDuration(std::chrono::duration<double>(Clock::now() - start_).count());
}

bool JobLauncher::Round() {
  std::this_thread::sleep_for(milliseconds(200));
  HandleInterrupts();
  if (!coord_rc_) PollStatus();
  ReapWorkers(/*ending=*/stop_requested_ || coord_rc_.has_value() || JobTerminal());
  StartDueRestarts();
  WatchCoordinator();
  EscalateAfterEnd();
  if (group_.AllExited() && !RestartsPending()) return false;
  EnforceTimeout();
  ShowProgress();
  return true;
}

// --- the control service ---------------------------------------------------------------------

bool JobLauncher::CallStop(const std::string& reason) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(2000));
  v1::StopRequest req;
  req.set_reason(reason);
  v1::ControlResponse resp;
  return control_->Stop(&ctx, req, &resp).ok();
}

bool JobLauncher::PollStatus() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(500));
  v1::StatusResponse st;
  if (!control_->Status(&ctx, v1::StatusRequest(), &st).ok()) return false;
  last_status_ = st;
  return true;
}

bool JobLauncher::JobTerminal() const { return last_status_ && Terminal(last_status_->state()); }

void JobLauncher::StopJob(const std::string& reason) {
  if (!CallStop(reason)) group_.SignalAll(SIGTERM);
  stop_requested_ = true;
  CancelRestarts();
}

// --- worker slots ----------------------------------------------------------------------------

int JobLauncher::LiveWorkers() const {
  int n = 0;
  for (const auto& s : slots_) n += (!s.exited || s.restart_at.has_value()) ? 1 : 0;
  return n;
}

void JobLauncher::CancelRestarts() {
  for (auto& s : slots_) s.restart_at.reset();
}

bool JobLauncher::RestartsPending() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const Slot& s) { return s.restart_at.has_value(); });
}

// --- the steps of a round --------------------------------------------------------------------

// Ctrl-C once: stop the job at a step boundary (SIGTERM to all when the Stop RPC fails); twice:
// SIGTERM to every process; three times: SIGKILL.
void JobLauncher::HandleInterrupts() {
  const int n = interrupts_.load();
  if (n <= handled_interrupts_) return;
  handled_interrupts_ = n;
  if (n == 1) {
    std::printf("retort-run: stopping the job (Ctrl-C again to terminate)\n");
    StopJob("interrupted");
    return;
  }
  group_.SignalAll(n == 2 ? SIGTERM : SIGKILL);
  stop_requested_ = true;
  CancelRestarts();
}

void JobLauncher::ReapWorkers(bool ending) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.exited) continue;
    if (auto rc = group_.Poll(s.process)) {
      s.exited = true;
      OnWorkerExit(i, *rc, ending);
    }
  }
}

void JobLauncher::OnWorkerExit(size_t i, int code, bool ending) {
  Slot& s = slots_[i];
  const std::string who =
      "worker " + std::to_string(i) + " (pid " + std::to_string(group_.pid(s.process)) + ")";
  if (code == 0) {
    // A worker leaves before the launcher sees the job complete: ask before calling it early.
    if (!ending && !(PollStatus() && JobTerminal()))
      std::printf(
          "retort-run: %s left the job before it ended (drained or scaled down); "
          "not restarted\n",
          who.c_str());
    return;
  }
  if (ending) {
    std::printf("retort-run: %s exited with %s while the job was ending\n", who.c_str(),
                DescribeExit(code).c_str());
    if (DiedOfSignal(code) && !sent_term_ && !sent_kill_ && handled_interrupts_ == 0 &&
        crash_after_end_.empty())
      crash_after_end_ = who + " exited with " + DescribeExit(code);
    return;
  }
  deaths_.push_back("worker " + std::to_string(i) + " exited with " + DescribeExit(code));
  const std::string next = RestartOrNot(s, code);
  const int live = LiveWorkers();
  const int needed = last_status_ ? last_status_->min_workers() : min_workers_;
  std::printf("retort-run: %s exited with %s; %d of %d worker(s) left (min_workers=%d); %s\n",
              who.c_str(), DescribeExit(code).c_str(), live, o_.workers, needed, next.c_str());
  if (live < needed && cannot_continue_.empty()) StopIfBelowMinWorkers(live, needed);
}

std::string JobLauncher::RestartOrNot(Slot& s, int code) {
  const RestartPolicy& policy = o_.restarts;
  if (!WorthRestarting(code)) return "not restarted (status 2 is a usage error)";
  if (s.restarts >= policy.max_restarts)
    return "not restarted (--max-restarts=" + std::to_string(policy.max_restarts) +
           (policy.max_restarts > 0 ? " used up)" : ")");
  const auto delay = RestartDelay(policy, s.restarts + 1);
  s.restart_at = Clock::now() + delay;
  return "restarting it in " + Seconds(delay) + " (restart " + std::to_string(s.restarts + 1) +
         " of " + std::to_string(policy.max_restarts) + ")";
}

void JobLauncher::StopIfBelowMinWorkers(int live, int needed) {
  // The job may have just completed (this exit being part of its end): check first.
  PollStatus();
  if (JobTerminal()) return;
  std::string list;
  for (const auto& d : deaths_) list += (list.empty() ? "" : "; ") + d;
  cannot_continue_ = "only " + std::to_string(live) + " of " + std::to_string(o_.workers) +
                     " worker(s) left and the job needs min_workers=" + std::to_string(needed) +
                     " (" + list + ")";
  std::printf("retort-run: the job cannot continue: %s; stopping it\n", cannot_continue_.c_str());
  StopJob("retort-run: fewer than min_workers workers left");
}

void JobLauncher::StartDueRestarts() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (!s.restart_at || Clock::now() < *s.restart_at) continue;
    if (stop_requested_ || coord_rc_ || JobTerminal()) {
      s.restart_at.reset();
      continue;
    }
    s.restarts++;
    std::printf("retort-run: restarting worker %zu (restart %d of %d)\n", i, s.restarts,
                o_.restarts.max_restarts);
    SpawnWorker(static_cast<int>(i));
  }
}

// The coordinator's exit. A crash stops the workers at once.
void JobLauncher::WatchCoordinator() {
  if (coord_rc_) return;
  auto rc = group_.Poll(coord_);
  if (!rc) return;
  coord_rc_ = rc;
  CancelRestarts();
  if (*rc != 0 && !group_.AllExited()) {
    std::printf("retort-run: %s; stopping the workers\n", DescribeCoordinatorExit(*rc).c_str());
    group_.SignalAll(SIGTERM);
    sent_term_ = true;
  }
}

// Once the job has ended (the coordinator exited, or reports a terminal state), workers get
// exit_grace_s to leave by themselves, then SIGTERM; the coordinator too after twice that;
// SIGKILL after three times.
void JobLauncher::EscalateAfterEnd() {
  if (!ended_at_ && (coord_rc_ || JobTerminal())) ended_at_ = Clock::now();
  if (!ended_at_ || group_.AllExited()) return;
  const auto since = Clock::now() - *ended_at_;
  if (!sent_term_ && since >= grace_) {
    std::printf("retort-run: worker(s) still running %lld s after the job ended; sending SIGTERM\n",
                static_cast<long long>(o_.exit_grace_s));
    for (const auto& s : slots_)
      if (!s.exited) group_.Signal(s.process, SIGTERM);
    sent_term_ = true;
  } else if (sent_term_ && !sent_coord_term_ && since >= 2 * grace_) {
    std::printf("retort-run: processes still running after SIGTERM; sending SIGTERM to all\n");
    group_.SignalAll(SIGTERM);
    sent_coord_term_ = true;
  } else if (sent_coord_term_ && !sent_kill_ && since >= 3 * grace_) {
    std::printf("retort-run: processes still running; sending SIGKILL\n");
    group_.SignalAll(SIGKILL);
    sent_kill_ = true;
  }
}

void JobLauncher::EnforceTimeout() {
  if (o_.timeout_s <= 0 || stop_requested_ ||
      Clock::now() - start_ <= std::chrono::seconds(o_.timeout_s))
    return;
  std::printf("retort-run: --timeout-s=%lld reached; stopping the job\n",
              static_cast<long long>(o_.timeout_s));
  CallStop("launcher timeout");
  stop_requested_ = true;
  stopped_because_ = "--timeout-s reached";
  CancelRestarts();
}

// A new generation's members (and --stop-when-formed), and every 2 s at most the step, loss,
// throughput and ETA.
void JobLauncher::ShowProgress() {
  if (!last_status_ || coord_rc_) return;
  const v1::StatusResponse& st = *last_status_;
  if (st.generation() != shown_generation_ && st.state() == v1::JOB_STATE_RUNNING) {
    shown_generation_ = st.generation();
    std::printf("retort-run: generation %llu: %d worker(s) on %s\n",
                static_cast<unsigned long long>(st.generation()), st.members_size(),
                o_.workers_per_node > 0 ? "several nodes" : "one node");
    for (const auto& m : st.members())
      std::printf("retort-run:   rank %d  %-8s node %s local rank %d\n", m.rank(),
                  m.member_id().c_str(), m.node().c_str(), m.local_rank());
    std::fflush(stdout);
    if (o_.stop_when_formed && st.members_size() == o_.workers && !stop_requested_) {
      std::printf(
          "retort-run: all %d workers formed generation %llu; stopping (--stop-when-formed)\n",
          o_.workers, static_cast<unsigned long long>(st.generation()));
      CallStop("--stop-when-formed");
      stop_requested_ = true;
      stopped_because_ = "--stop-when-formed";
    }
  }
  const auto now = Clock::now();
  if (st.step() == shown_step_ || st.step() <= 0 || now - last_progress_ <= std::chrono::seconds(2))
    return;
  shown_step_ = st.step();
  last_progress_ = now;
  // Every member reports the global batch's loss and throughput: average them.
  double loss = 0, sps = 0;
  for (const auto& m : st.members()) {
    loss += m.metrics().loss() / std::max(1, st.members_size());
    sps += m.metrics().samples_per_second() / std::max(1, st.members_size());
  }
  std::string eta = "?";
  if (st.total_steps() > 0 && sps > 0)
    eta = FormatDuration(static_cast<double>(st.total_steps() - st.step()) * job_.global_batch() /
                         sps);
  std::printf("retort-run: step %lld%s  loss %.4f  %.0f samples/s  ETA %s\n",
              static_cast<long long>(st.step()),
              st.total_steps() > 0 ? ("/" + std::to_string(st.total_steps())).c_str() : "", loss,
              sps, eta.c_str());
  std::fflush(stdout);
}

}  // namespace retort::tools
