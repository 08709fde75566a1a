// The local launcher (retort-run) end to end on 127.0.0.1 with the elasticity scenarios' small
// Fashion-MNIST job: kill -9 of a worker with and without --max-restarts (the job completes with
// no lost step on the uninterrupted run's loss curve), a job that falls below min_workers (fails,
// saying why), re-running a completed job, --fresh, result.json without evaluation, and many
// short jobs in a row ending with every process exiting by itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "elastic/scenario_test.h"
#include "launcher/launched_job.h"
#include "testing/soak.h"

namespace retort::elastic_testing {
namespace {

using launcher_testing::LaunchedJob;
using ::testing::HasSubstr;

class LauncherTest : public ElasticScenarioTest {
 protected:
  // A fresh directory with job.yaml (the scenario job, output_dir DIR/out); returns DIR.
  std::string NewRun(const JobOptions& job) {
    std::string dir = testing::MakeTempDir("retort_launcher");
    dirs_.push_back(dir);
    std::ofstream(dir + "/job.yaml") << ScenarioJobYaml(job, dir + "/out");
    return dir;
  }

  // A fresh folder with job.yaml of a 3-step supervised job on a small synthetic set (process
  // start-up plus a few steps), outputs in DIR/out. Returns DIR.
  std::string NewShortJob(const std::string& name) {
    const std::string dir = testing::MakeTempDir("retort_launcher_" + name);
    dirs_.push_back(dir);
    std::ofstream(dir + "/job.yaml")
        << "name: " << name
        << "\n"
           "student: {preset: fm-student-p7}\n"
           "dataset: {kind: synthetic, image_size: 28, num_classes: 10, synthetic_samples: 256}\n"
           "global_batch: 16\n"
           "steps: 3\n"
           "threads_per_worker: 1\n"
           "evaluate: false\n"
           "output_dir: "
        << dir << "/out\n";
    return dir;
  }

  // Waits until the newest metrics line is at `step` or later in a generation of `world` ranks.
  bool WaitForWorld(const std::string& metrics, int world, int64_t step, LaunchedJob& run) {
    return testing::WaitFor(
               [&] {
                 auto lines = ReadMetrics(metrics).lines;
                 return !run.process().Running() ||
                        (!lines.empty() && lines.back().world_size == world &&
                         lines.back().step >= step);
               },
               kStartup) &&
           run.process().Running();
  }

  // Status with `members` ranked members; nullopt after kEvent.
  std::optional<StatusView> WaitRanked(LaunchedJob& run, size_t members) {
    std::optional<StatusView> st;
    testing::WaitFor(
        [&] {
          st = run.Status();
          return st && st->members.size() == members && st->AllRanked();
        },
        kEvent);
    if (st && st->members.size() == members && st->AllRanked()) return st;
    return std::nullopt;
  }

  // Kills (SIGKILL) the worker process holding `rank`; returns its member view.
  MemberView KillRank(LaunchedJob& run, const StatusView& st, int rank, pid_t* pid) {
    const MemberView victim = *st.ByRank(rank);
    // The launcher starts slot i as node local0, local rank i.
    *pid = run.WorkerPids().at(victim.local_rank);
    EXPECT_EQ(::kill(*pid, SIGKILL), 0);
    return victim;
  }

  // A run launched with --workers=`workers` and `args` whose rank 1 was killed (SIGKILL) once
  // every worker held a rank and the metrics had reached `step`.
  struct KilledRun {
    std::unique_ptr<LaunchedJob> run;
    std::string metrics;
    MemberView victim;
    pid_t pid = 0;
    size_t lines_before = 0;  // metrics lines at the kill
    int64_t step_before = 0;  // newest step at the kill
  };
  void LaunchAndKillRankOne(const JobOptions& job, int workers, std::vector<std::string> args,
                            int64_t step, KilledRun* out) {
    const std::string dir = NewRun(job);
    args.insert(args.begin(), "--workers=" + std::to_string(workers));
    out->run = std::make_unique<LaunchedJob>(dir + "/job.yaml", args, dir + "/launcher.log");
    out->metrics = dir + "/out/metrics.jsonl";
    ASSERT_TRUE(WaitForWorld(out->metrics, workers, step, *out->run)) << out->run->Log();
    auto st = WaitRanked(*out->run, workers);
    ASSERT_TRUE(st) << out->run->Log();
    out->victim = KillRank(*out->run, *st, 1, &out->pid);
    const auto lines = ReadMetrics(out->metrics).lines;
    out->lines_before = lines.size();
    out->step_before = lines.empty() ? 0 : lines.back().step;
  }
};

// The kill -9 moments a test cannot hit by timing: workers run with --pause-at (the launcher's
// --worker-arg), log "PAUSE POINT (..., rank R)" and hold there; the test kills the worker that
// holds rank 1 while it is paused.
class LauncherKillMomentTest : public LauncherTest {
 protected:
  // The slot whose worker logged that it paused at `point` as rank `rank`, once it did.
  std::optional<int> WaitForPause(LaunchedJob& run, const std::string& point, int rank) {
    const std::regex re("\\[worker ([0-9]+)\\] .*PAUSE " + point + " \\([^)]*rank " +
                        std::to_string(rank) + "\\)");
    std::optional<int> slot;
    testing::WaitFor(
        [&] {
          std::smatch m;
          const std::string log = run.Log();
          if (std::regex_search(log, m, re)) slot = std::stoi(m[1].str());
          return slot.has_value() || !run.process().Running();
        },
        kStartup);
    return slot;
  }

  // Kills (SIGKILL) the worker in `slot`, paused at `point`; notes the metrics at the kill in
  // *lines, *step. Fails when the pause had ended before the kill (the moment was missed).
  pid_t KillPausedSlot(LaunchedJob& run, int slot, const std::string& point,
                       const std::string& metrics, size_t* lines, int64_t* step) {
    const pid_t pid = run.WorkerPids().at(slot);
    EXPECT_EQ(::kill(pid, SIGKILL), 0);
    const auto m = ReadMetrics(metrics).lines;
    *lines = m.size();
    *step = m.empty() ? 0 : m.back().step;
    // Its output up to its death is in the log once the launcher reported the exit.
    const std::string exited = "(pid " + std::to_string(pid) + ") exited with";
    EXPECT_TRUE(
        testing::WaitFor([&] { return run.Log().find(exited) != std::string::npos; }, kEvent))
        << run.Log();
    EXPECT_THAT(run.Log(), ::testing::Not(HasSubstr("PAUSE " + point + " over (pid " +
                                                    std::to_string(pid) + ")")))
        << "the worker's pause ended before the kill";
    return pid;
  }

  // The job completes (exit 0, no SIGTERM needed) with the kill reported, no lost step and the
  // uninterrupted run's loss curve; its world sizes end with `final_world`.
  void ExpectCompletedAfterKill(LaunchedJob& run, const JobOptions& job, const std::string& metrics,
                                pid_t pid, size_t lines_before, int64_t step_before,
                                int final_world, const std::string& what) {
    auto rc = run.Wait(kCompletion);
    ASSERT_TRUE(rc) << "retort-run did not finish\n" << run.Log();
    EXPECT_EQ(*rc, 0) << run.Log();
    EXPECT_THAT(run.LastLine(), HasSubstr("retort-run: finished after"));
    const std::string log = run.Log();
    EXPECT_THAT(log, HasSubstr("(pid " + std::to_string(pid) +
                               ") exited with status 137 (killed by SIGKILL)"));
    EXPECT_THAT(log, ::testing::Not(HasSubstr("sending SIGTERM")))
        << "workers must exit by themselves";
    MetricsFile m = ReadMetrics(metrics);
    EXPECT_THAT(SequenceText(WorldSizeSequence(m.lines)),
                ::testing::EndsWith(std::to_string(final_world)));
    ExpectNoLostSteps(m, job, lines_before, step_before);
    ExpectSameTrajectory(m.lines, what + " at step " + std::to_string(step_before));
  }

  // 3 workers, a checkpoint every 20 steps; rank 1 is killed while its first checkpoint's shard
  // is on disk and not yet acked (every worker pauses at its first one). That checkpoint never
  // commits; the job goes on from the survivors' memory, and later checkpoints commit.
  void KillDuringCheckpointWrite(int max_restarts) {
    JobOptions job;
    job.min_workers = 2;
    job.max_workers = 3;
    job.checkpoint_every_steps = 20;
    job.checkpoint_keep = 10;  // every committed checkpoint stays to be listed
    LoadReference(job);
    const std::string dir = NewRun(job);
    LaunchedJob run(dir + "/job.yaml",
                    {"--workers=3", "--max-restarts=" + std::to_string(max_restarts),
                     "--worker-arg=--pause-at=checkpoint-write:5000"},
                    dir + "/launcher.log");
    const std::string metrics = dir + "/out/metrics.jsonl";
    auto slot = WaitForPause(run, "checkpoint-write", 1);
    ASSERT_TRUE(slot) << "no worker paused in its checkpoint write as rank 1\n" << run.Log();
    // The first multiple of 20 at which rank 1 wrote (a start-up slowed by load may shift it).
    std::smatch at;
    const std::string log = run.Log();
    ASSERT_TRUE(std::regex_search(
        log, at,
        std::regex("PAUSE checkpoint-write \\(checkpoint [0-9]+ at step ([0-9]+), rank 1\\)")))
        << log;
    const int64_t paused_step = std::stoll(at[1].str());
    size_t lines_before = 0;
    int64_t step_before = 0;
    const pid_t pid =
        KillPausedSlot(run, *slot, "checkpoint-write", metrics, &lines_before, &step_before);
    ASSERT_NO_FATAL_FAILURE(ExpectCompletedAfterKill(
        run, job, metrics, pid, lines_before, step_before, max_restarts > 0 ? 3 : 2,
        "launcher, kill -9 of rank 1 during a checkpoint write, --max-restarts=" +
            std::to_string(max_restarts)));
    std::set<int64_t> committed;
    for (const auto& c : ListCommittedCheckpoints(dir + "/out/state/checkpoints"))
      committed.insert(c.step);
    EXPECT_FALSE(committed.count(paused_step))
        << "the checkpoint a killed rank never acked committed";
    // Without a restart the survivors' writers are held at most 5 s by their own pause, far less
    // than the 100 steps left; a replacement pauses at its own first checkpoint, so with a
    // restart any later checkpoint may be skipped as "writer busy".
    if (max_restarts == 0) {
      EXPECT_TRUE(committed.upper_bound(paused_step) != committed.end())
          << "no checkpoint committed after the kill";
    }
  }

  // 3 workers, min_workers 1: SIGTERM makes rank 2 leave at a step boundary (an agreed switch:
  // every survivor holds the complete state); rank 1 of the next generation is killed in its
  // start-up, after the communicator formed and before any state moved (every survivor pauses
  // there until a newer generation is published). The job goes on from the saved state.
  void KillDuringGenerationSwitch(int max_restarts) {
    JobOptions job;
    job.min_workers = 1;
    job.max_workers = 3;
    LoadReference(job);
    const std::string dir = NewRun(job);
    LaunchedJob run(dir + "/job.yaml",
                    {"--workers=3", "--max-restarts=" + std::to_string(max_restarts),
                     "--worker-arg=--pause-at=generation-switch:30000"},
                    dir + "/launcher.log");
    const std::string metrics = dir + "/out/metrics.jsonl";
    ASSERT_TRUE(WaitForWorld(metrics, 3, 10, run)) << run.Log();
    auto st = WaitRanked(run, 3);
    ASSERT_TRUE(st) << run.Log();
    const pid_t leaving = run.WorkerPids().at(st->ByRank(2)->local_rank);
    ASSERT_EQ(::kill(leaving, SIGTERM), 0);
    auto slot = WaitForPause(run, "generation-switch", 1);
    ASSERT_TRUE(slot) << "no worker paused in a generation switch as rank 1\n" << run.Log();
    size_t lines_before = 0;
    int64_t step_before = 0;
    const pid_t pid =
        KillPausedSlot(run, *slot, "generation-switch", metrics, &lines_before, &step_before);
    ASSERT_NO_FATAL_FAILURE(ExpectCompletedAfterKill(
        run, job, metrics, pid, lines_before, step_before, max_restarts > 0 ? 2 : 1,
        "launcher, kill -9 of rank 1 during a generation switch, --max-restarts=" +
            std::to_string(max_restarts)));
    EXPECT_THAT(run.Log(),
                HasSubstr("(pid " + std::to_string(leaving) + ") left the job before it ended"));
    EXPECT_THAT(run.Log(), HasSubstr("was superseded before its state moved"))
        << "the paused survivor must give up the superseded generation at once";
  }
};

TEST_F(LauncherKillMomentTest, KillNineDuringCheckpointWriteWithoutRestarts) {
  KillDuringCheckpointWrite(0);
}

TEST_F(LauncherKillMomentTest, KillNineDuringCheckpointWriteWithRestart) {
  KillDuringCheckpointWrite(1);
}

TEST_F(LauncherKillMomentTest, KillNineDuringGenerationSwitchWithoutRestarts) {
  KillDuringGenerationSwitch(0);
}

TEST_F(LauncherKillMomentTest, KillNineDuringGenerationSwitchWithRestart) {
  KillDuringGenerationSwitch(1);
}

// kill -9 of rank 1 of 3 with --max-restarts=0: reported, the job goes on with 2 (min_workers 2),
// completes, loses no step and keeps the uninterrupted run's loss curve.
TEST_F(LauncherTest, KillNineWithoutRestartsJobContinuesAndCompletes) {
  JobOptions job;
  job.min_workers = 2;
  job.max_workers = 3;
  LoadReference(job);
  KilledRun k;
  ASSERT_NO_FATAL_FAILURE(LaunchAndKillRankOne(job, 3, {"--max-restarts=0"}, 10, &k));
  LaunchedJob& run = *k.run;
  const std::string& metrics = k.metrics;
  const MemberView& victim = k.victim;
  const pid_t pid = k.pid;
  const size_t lines_before = k.lines_before;
  const int64_t step_before = k.step_before;

  auto rc = run.Wait(kCompletion);
  ASSERT_TRUE(rc) << "retort-run did not finish\n" << run.Log();
  EXPECT_EQ(*rc, 0) << run.Log();
  EXPECT_THAT(run.LastLine(), HasSubstr("retort-run: finished after"));
  EXPECT_THAT(run.LastLine(), HasSubstr("1 worker failure(s) survived"));
  const std::string log = run.Log();
  EXPECT_THAT(log, HasSubstr("worker " + std::to_string(victim.local_rank) + " (pid " +
                             std::to_string(pid) +
                             ") exited with status 137 (killed by SIGKILL); 2 of 3 worker(s) "
                             "left (min_workers=2); not restarted (--max-restarts=0)"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("restarting worker")));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("sending SIGTERM")))
      << "workers must exit by themselves";
  MetricsFile m = ReadMetrics(metrics);
  EXPECT_THAT(SequenceText(WorldSizeSequence(m.lines)), ::testing::EndsWith("3 -> 2"));
  ExpectNoLostSteps(m, job, lines_before, step_before);
  ExpectSameTrajectory(m.lines, "launcher, kill -9 of rank 1 at step " +
                                    std::to_string(step_before) + ", no restart");
}

// The same kill with --max-restarts=1: the slot is restarted after the backoff, the new process
// joins as a new member (3 ranks again), and the job completes on the same trajectory.
TEST_F(LauncherTest, KillNineWithRestartReplacementJoinsAsNewMember) {
  JobOptions job;
  job.min_workers = 2;
  job.max_workers = 3;
  LoadReference(job);
  KilledRun k;
  ASSERT_NO_FATAL_FAILURE(LaunchAndKillRankOne(job, 3, {"--max-restarts=1"}, 10, &k));
  LaunchedJob& run = *k.run;
  const std::string& metrics = k.metrics;
  const MemberView& victim = k.victim;
  const pid_t pid = k.pid;
  const size_t lines_before = k.lines_before;
  const int64_t step_before = k.step_before;

  // The replacement: another process in the slot, a member with the victim's local rank under a
  // new id, ranked in a generation of 3.
  std::optional<StatusView> joined;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto s = run.Status();
        if (!s || s->members.size() != 3 || !s->AllRanked()) return false;
        for (const auto& mem : s->members)
          if (mem.local_rank == victim.local_rank && mem.id != victim.id) joined = s;
        return joined.has_value();
      },
      kEvent))
      << "no replacement member joined\n"
      << run.Log();
  EXPECT_NE(run.WorkerPids().at(victim.local_rank), pid);

  auto rc = run.Wait(kCompletion);
  ASSERT_TRUE(rc) << "retort-run did not finish\n" << run.Log();
  EXPECT_EQ(*rc, 0) << run.Log();
  EXPECT_THAT(run.LastLine(), HasSubstr("retort-run: finished after"));
  const std::string log = run.Log();
  EXPECT_THAT(log, HasSubstr("exited with status 137 (killed by SIGKILL); 3 of 3 worker(s) left "
                             "(min_workers=2); restarting it in 1 s (restart 1 of 1)"));
  EXPECT_THAT(log, HasSubstr("restarting worker " + std::to_string(victim.local_rank) +
                             " (restart 1 of 1)"));
  MetricsFile m = ReadMetrics(metrics);
  EXPECT_THAT(SequenceText(WorldSizeSequence(m.lines)), ::testing::EndsWith("3"));
  ExpectNoLostSteps(m, job, lines_before, step_before);
  ExpectSameTrajectory(m.lines, "launcher, kill -9 of rank 1 at step " +
                                    std::to_string(step_before) + ", restarted");
}

// Two workers, min_workers 2, no restarts: a kill -9 leaves the job unable to continue. The
// launcher stops it and fails at once, and its last line says why.
TEST_F(LauncherTest, BelowMinWorkersFailsWithTheReason) {
  JobOptions job;
  job.min_workers = 2;
  job.max_workers = 2;
  KilledRun k;
  ASSERT_NO_FATAL_FAILURE(LaunchAndKillRankOne(job, 2, {"--max-restarts=0"}, 5, &k));
  LaunchedJob& run = *k.run;
  const MemberView& victim = k.victim;
  auto rc = run.Wait(kEvent);
  ASSERT_TRUE(rc) << "retort-run did not give up on the job\n" << run.Log();
  EXPECT_EQ(*rc, 1);
  EXPECT_EQ(run.LastLine().rfind("retort-run: FAILED after ", 0), 0u) << run.LastLine();
  EXPECT_THAT(run.LastLine(),
              HasSubstr("only 1 of 2 worker(s) left and the job needs min_workers=2 (worker " +
                        std::to_string(victim.local_rank) +
                        " exited with status 137 (killed by SIGKILL))"));
  EXPECT_LT(ReadMetrics(k.metrics).lines.size(), static_cast<size_t>(job.steps));
}

// A short job without evaluation; then the same command again ("already completed", exit 0,
// nothing run), then with --fresh (runs again from scratch: metrics start over).
TEST_F(LauncherTest, RerunReportsCompletedAndFreshRunsAgainAndResultSaysNotEvaluated) {
  JobOptions job;
  job.steps = 6;  // at least the trajectory's warmup_steps (5)
  const std::string dir = NewRun(job);
  const std::string out = dir + "/out";
  {
    LaunchedJob run(dir + "/job.yaml", {"--workers=1"}, dir + "/first.log");
    auto rc = run.Wait(kCompletion);
    ASSERT_TRUE(rc) << run.Log();
    ASSERT_EQ(*rc, 0) << run.Log();
    EXPECT_THAT(run.LastLine(), HasSubstr("results in " + out));
    EXPECT_THAT(run.Log(), HasSubstr("retort-run: result: student top-1 not evaluated"));
    EXPECT_THAT(run.Log(), HasSubstr("RESULT not evaluated {"));
  }
  ASSERT_EQ(ReadMetrics(out + "/metrics.jsonl").lines.size(), 6u);
  EXPECT_TRUE(std::filesystem::exists(out + "/state/state.json")) << "state lives in the run's dir";
  EXPECT_TRUE(std::filesystem::exists(out + "/student.safetensors"));
  std::ifstream in(out + "/result.json");
  nlohmann::json result = nlohmann::json::parse(in);
  EXPECT_EQ(result.at("evaluated"), false) << result.dump();
  EXPECT_FALSE(result.contains("student_top1")) << result.dump();
  EXPECT_FALSE(result.contains("test_samples")) << result.dump();
  EXPECT_EQ(result.at("steps"), 6);

  {
    LaunchedJob again(dir + "/job.yaml", {"--workers=1"}, dir + "/again.log");
    auto rc = again.Wait(milliseconds(30000));
    ASSERT_TRUE(rc) << again.Log();
    EXPECT_EQ(*rc, 0) << again.Log();
    EXPECT_EQ(again.LastLine(), "retort-run: job 'elastic' already completed; results in " + out +
                                    " (--fresh runs it again)");
    EXPECT_THAT(again.Log(), ::testing::Not(HasSubstr("started (pid")))
        << "nothing may start for a completed job";
  }
  EXPECT_EQ(ReadMetrics(out + "/metrics.jsonl").lines.size(), 6u);

  {
    LaunchedJob fresh(dir + "/job.yaml", {"--workers=1", "--fresh"}, dir + "/fresh.log");
    auto rc = fresh.Wait(kCompletion);
    ASSERT_TRUE(rc) << fresh.Log();
    EXPECT_EQ(*rc, 0) << fresh.Log();
    EXPECT_THAT(fresh.Log(), HasSubstr("--fresh: removed " + out + "/state"));
    EXPECT_THAT(fresh.LastLine(), HasSubstr("retort-run: finished after"));
  }
  MetricsFile m = ReadMetrics(out + "/metrics.jsonl");
  EXPECT_EQ(m.lines.size(), 6u) << "--fresh starts the metrics over";
  EXPECT_EQ(MissingSteps(m.lines, 6), "");
}

// Many short jobs in a row: every one completes, every process exits by itself with status 0
// (the launcher never needs SIGTERM), and nothing aborts at shutdown. A supervised student on a
// small synthetic set keeps each job to process start-up plus a few steps. A soak test: 5 jobs
// in CI, 50 under scripts/soak (testing::SoakRounds).
TEST_F(LauncherTest, ShortJobsInARowEndCleanly) {
  const int kJobs = testing::SoakRounds(5);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kJobs; ++i) {
    const std::string dir = NewShortJob("short");
    LaunchedJob run(dir + "/job.yaml", {"--workers=2"}, dir + "/launcher.log");
    auto rc = run.Wait(milliseconds(90000));
    ASSERT_TRUE(rc) << "job " << i << " did not finish\n" << run.Log();
    const std::string log = run.Log();
    ASSERT_EQ(*rc, 0) << "job " << i << "\n" << log;
    ASSERT_THAT(run.LastLine(), HasSubstr("retort-run: finished after")) << "job " << i;
    for (const char* bad : {"exited with status", "sending SIGTERM", "Assertion", "SIGABRT",
                            "terminate called", "Sanitizer"})
      ASSERT_THAT(log, ::testing::Not(HasSubstr(bad))) << "job " << i << "\n" << log;
    ASSERT_EQ(ReadMetrics(dir + "/out/metrics.jsonl").lines.size(), 3u) << "job " << i;
    std::filesystem::remove_all(dir);
  }
  std::cout << "[ measured ] " << kJobs << " short jobs (2 workers, 3 steps) under retort-run: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";
}

// retort-run --tls: the launcher makes a CA and certificates in OUTPUT_DIR/tls, and the
// coordinator, the workers and the launcher's own status calls all speak mutual TLS.
TEST_F(LauncherTest, TlsRunsTheJobOverMutualTls) {
  const std::string dir = NewShortJob("tls");
  LaunchedJob run(dir + "/job.yaml", {"--workers=2", "--tls"}, dir + "/launcher.log");
  auto rc = run.Wait(milliseconds(90000));
  ASSERT_TRUE(rc) << run.Log();
  ASSERT_EQ(*rc, 0) << run.Log();
  EXPECT_THAT(run.LastLine(), HasSubstr("retort-run: finished after"));
  EXPECT_THAT(run.Log(), HasSubstr("transport: mutual TLS"));
  for (const char* file : {"ca.crt", "coordinator.crt", "coordinator.key", "worker.crt",
                           "worker.key", "operator.crt", "operator.key"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/out/tls/" + std::string(file))) << file;
  EXPECT_EQ(ReadMetrics(dir + "/out/metrics.jsonl").lines.size(), 3u);
}

// SIGTERM before the worker ever joined (no coordinator answers) is a requested stop: status 0.
TEST(WorkerLifecycleTest, SigtermBeforeJoiningExitsZero) {
  const std::string dir = testing::MakeTempDir("retort_worker_sigterm");
  testing::Subprocess worker(
      {testing::BinaryPath("tools/retort-worker"),
       "--coordinator=127.0.0.1:" + std::to_string(PickFreePort()), "--rpc-timeout-ms=200"},
      dir + "/worker.log");
  ASSERT_TRUE(testing::WaitFor(
      [&] { return worker.Log().find("join failed, retrying") != std::string::npos; },
      milliseconds(30000)))
      << worker.Log();
  worker.Signal(SIGTERM);
  auto rc = worker.Wait(milliseconds(15000));
  ASSERT_TRUE(rc) << "the worker did not exit after SIGTERM\n" << worker.Log();
  EXPECT_EQ(*rc, 0) << worker.Log();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace retort::elastic_testing
