// Checkpoint overlap benchmark: how much a checkpoint slows the training step that takes it.
// A training-like loop runs a fixed amount of compute per step (a GEMV-like pass over a
// buffer, --step-ms on this machine when idle) and every --every steps checkpoints a rank's
// optimizer state (--state-mib of params + exp_avg + exp_avg_sq) in one of two ways:
//   inline:     WriteShard on the training thread (what the worker did before), and
//   background: a memory-copy snapshot on the training thread, then WriteShard + a simulated
//               ack on the worker's ShardWriter thread (what the worker does now).
// The two modes alternate for --rounds rounds in the same process and directory. Prints one
// JSON line per round and mode (median step time of normal steps and of checkpoint steps, and
// their ratio) and a summary line per mode (median over rounds).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/shard_file.h"
#include "common/args.h"
#include "worker/shard_writer.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int64_t state_mib = 48;
  int64_t step_ms = 80;
  int every = 5;
  int steps = 60;
  int rounds = 3;
  std::string dir;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Compute that touches the state the way an optimizer step does (read, FMA, write), repeated to
// last about `passes` sweeps.
void FakeStep(std::vector<float>* params, const std::vector<float>& grad, int passes) {
  float* p = params->data();
  const float* g = grad.data();
  const size_t n = params->size();
  for (int k = 0; k < passes; ++k)
    for (size_t i = 0; i < n; ++i) p[i] = p[i] * 0.9999f + g[i] * 1e-4f;
}

struct RoundResult {
  double normal_ms = 0, checkpoint_ms = 0, write_ms = 0;
};

RoundResult RunRound(const Options& o, bool background, int passes, std::vector<float>* params,
                     std::vector<float>* m, std::vector<float>* v, const std::vector<float>& grad,
                     const std::string& dir) {
  retort::worker::ShardWriter writer(2);
  // Snapshot buffers are reused once the writer is done with them, as the worker does
  // (SnapshotPool): a fresh allocation would fault in every page on the training thread.
  std::vector<std::shared_ptr<std::vector<float>>> pool;
  std::vector<double> normal, at_checkpoint, writes;
  std::mutex writes_mu;
  const int64_t count = static_cast<int64_t>(params->size());
  for (int step = 1; step <= o.steps; ++step) {
    const auto t0 = Clock::now();
    FakeStep(params, grad, passes);
    const bool checkpoint = step % o.every == 0;
    if (checkpoint) {
      retort::checkpoint::ShardView view;
      view.header.world_size = 1;
      view.header.generation = 1;
      view.header.global_step = step;
      view.header.total_elements = count;
      view.header.range_count = count;
      const std::string ckpt_dir = dir + "/step-" + std::to_string(step);
      if (!background) {
        view.params = params->data();
        view.exp_avg = m->data();
        view.exp_avg_sq = v->data();
        auto w0 = Clock::now();
        auto file = retort::checkpoint::WriteShard(ckpt_dir, view);
        if (!file.ok()) std::fprintf(stderr, "write: %s\n", file.status().ToString().c_str());
        writes.push_back(std::chrono::duration<double, std::milli>(Clock::now() - w0).count());
      } else {
        // The snapshot: a memory copy of the three arrays (on GPUs, device to pinned host).
        std::shared_ptr<std::vector<float>> snap;
        for (auto& p : pool)
          if (p.use_count() == 1) snap = p;
        if (!snap) {
          snap = std::make_shared<std::vector<float>>(3 * params->size());
          pool.push_back(snap);
        }
        std::memcpy(snap->data(), params->data(), params->size() * 4);
        std::memcpy(snap->data() + count, m->data(), params->size() * 4);
        std::memcpy(snap->data() + 2 * count, v->data(), params->size() * 4);
        bool queued = writer.Submit([snap, view, ckpt_dir, count, &writes, &writes_mu]() mutable {
          auto w0 = Clock::now();
          view.params = snap->data();
          view.exp_avg = snap->data() + count;
          view.exp_avg_sq = snap->data() + 2 * count;
          auto file = retort::checkpoint::WriteShard(ckpt_dir, view);
          if (!file.ok()) std::fprintf(stderr, "write: %s\n", file.status().ToString().c_str());
          std::lock_guard<std::mutex> lock(writes_mu);
          writes.push_back(std::chrono::duration<double, std::milli>(Clock::now() - w0).count());
        });
        if (!queued) std::fprintf(stderr, "step %d: writer busy, checkpoint skipped\n", step);
      }
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (step <= o.every) continue;  // warm-up
    (checkpoint ? at_checkpoint : normal).push_back(ms);
  }
  writer.Drain(retort::Deadline::AfterMs(600000));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::lock_guard<std::mutex> lock(writes_mu);
  return {Median(normal), Median(at_checkpoint), Median(writes)};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  retort::ArgParser args("checkpoint_overlap_bench [flags]",
                         "Step time with a checkpoint written inline vs snapshot + background.");
  args.AddInt("state-mib", &o.state_mib, "one rank's params + exp_avg + exp_avg_sq, MiB");
  args.AddInt("step-ms", &o.step_ms, "compute per step, calibrated at start");
  args.AddInt("every", &o.every, "checkpoint every this many steps");
  args.AddInt("steps", &o.steps, "steps per round");
  args.AddInt("rounds", &o.rounds, "rounds of (inline, background)");
  args.AddString("dir", &o.dir, "scratch directory (default: new directory under /tmp)");
  if (auto code = args.ParseOrExitCode(argc, argv, "checkpoint_overlap_bench")) return *code;
  if (o.every < 1 || o.steps <= 2 * o.every || o.state_mib < 1 || o.rounds < 1) {
    std::fprintf(stderr,
                 "checkpoint_overlap_bench: need every >= 1, steps > 2*every, "
                 "state-mib >= 1, rounds >= 1\n");
    return 2;
  }
  if (o.dir.empty()) {
    char tmpl[] = "/tmp/retort_overlap_XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    o.dir = tmpl;
  }
  const size_t n = static_cast<size_t>(o.state_mib) * (1 << 20) / 12;
  std::vector<float> params(n, 1.f), m(n, 0.5f), v(n, 0.25f), grad(n, 0.01f);
  // Calibrate passes per step to about --step-ms.
  auto c0 = Clock::now();
  FakeStep(&params, grad, 2);
  const double pass_ms = std::chrono::duration<double, std::milli>(Clock::now() - c0).count() / 2;
  const int passes = std::max(1, static_cast<int>(std::lround(o.step_ms / pass_ms)));
  std::vector<double> ratios[2];
  for (int round = 0; round < o.rounds; ++round) {
    for (int mode = 0; mode < 2; ++mode) {
      const bool background = mode == 1;
      RoundResult r = RunRound(o, background, passes, &params, &m, &v, grad,
                               o.dir + "/r" + std::to_string(round) + "-" + std::to_string(mode));
      const double ratio = r.normal_ms > 0 ? r.checkpoint_ms / r.normal_ms : 0;
      ratios[mode].push_back(ratio);
      std::printf(
          "{\"bench\":\"checkpoint_overlap\",\"mode\":\"%s\",\"round\":%d,\"state_mib\":%lld,"
          "\"normal_step_ms\":%.2f,\"checkpoint_step_ms\":%.2f,\"ratio\":%.3f,"
          "\"shard_write_ms\":%.1f}\n",
          background ? "background" : "inline", round, static_cast<long long>(o.state_mib),
          r.normal_ms, r.checkpoint_ms, ratio, r.write_ms);
      std::fflush(stdout);
    }
  }
  for (int mode = 0; mode < 2; ++mode)
    std::printf(
        "{\"bench\":\"checkpoint_overlap_summary\",\"mode\":\"%s\",\"median_ratio\":%.3f,"
        "\"target\":\"<= 1.10\"}\n",
        mode ? "background" : "inline", Median(ratios[mode]));
  std::error_code ec;
  std::filesystem::remove_all(o.dir, ec);
  return 0;
}
