// Disk-checkpoint fallbacks on 127.0.0.1: two simultaneous failures (the in-memory replica of a
// dead rank died with its neighbour) fall back to the last committed checkpoint, and a
// corrupted shard of the newest checkpoint is caught by its checksum, so the job resumes from
// the previous committed one. A restore from disk is exact: the losses after it match the
// uninterrupted run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "elastic/scenario_test.h"

namespace retort::elastic_testing {
namespace {

class CheckpointTest : public ElasticScenarioTest {
 protected:
  // Waits until at least `count` checkpoints are committed on disk; gives up early (returning
  // false) once training passes `give_up_step` without them.
  bool WaitForCommitted(ElasticCluster& c, size_t count, int64_t give_up_step) {
    bool ok = testing::WaitFor(
        [&] {
          c.Status();  // records committed checkpoints seen by the coordinator
          return ListCommittedCheckpoints(c.checkpoint_dir()).size() >= count ||
                 c.LastStep() >= give_up_step;
        },
        kStartup);
    return ok && ListCommittedCheckpoints(c.checkpoint_dir()).size() >= count;
  }
};

// Scenario 6: 4 workers, kill -9 of two adjacent ranks at once. The job falls back to the last
// committed disk checkpoint by itself and completes; the step it resumes from is a committed
// checkpoint's step, not older than the newest one committed before the failure.
TEST_F(CheckpointTest, TwoSimultaneousFailuresFallBackToTheLastDiskCheckpoint) {
  const JobOptions job{
      .min_workers = 2, .max_workers = 4, .checkpoint_every_steps = 5, .checkpoint_keep = 3};
  LoadReference(job);
  auto c = StartCluster(job, 4);
  StatusView st;
  ASSERT_TRUE(WaitAllRanked(*c, 4, kStartup, &st));
  ASSERT_TRUE(WaitForCommitted(*c, 2, 25))
      << "no 2 committed checkpoints by step 25 although checkpoint.every_steps=5 (last step "
      << c->LastStep()
      << ", checkpoints on disk: " << ListCommittedCheckpoints(c->checkpoint_dir()).size() << ")\n"
      << c->Logs();
  ASSERT_TRUE(WaitAllRanked(*c, 4, kEvent, &st));
  const int a = WorkerAtRank(*c, st, 1).index;
  const int b = WorkerAtRank(*c, st, 2).index;
  c->worker(a).Signal(SIGKILL);
  c->worker(b).Signal(SIGKILL);
  const int64_t step_before = c->LastStep();
  int64_t newest_before = 0;
  // Committed at the kill (keep-K may delete them from disk before the job ends).
  std::set<int64_t> committed_steps;
  for (const auto& ck : ListCommittedCheckpoints(c->checkpoint_dir())) {
    newest_before = std::max(newest_before, ck.step);
    committed_steps.insert(ck.step);
  }
  for (const auto& [id, step] : c->committed_seen()) newest_before = std::max(newest_before, step);

  ExpectCompletedCleanly(*c, {a, b});
  if (HasFatalFailure()) return;
  MetricsFile m = c->Metrics();
  // Rank 0 may append the line of a step completed just before the kill after we looked, so
  // the resumed run is told apart by its generation, not by its position in the file.
  const MetricLine* first = nullptr;
  int64_t completed_before = step_before;
  for (const auto& l : m.lines) {
    if (l.generation <= st.generation) completed_before = std::max(completed_before, l.step);
    if (l.generation > st.generation && first == nullptr) first = &l;
  }
  ASSERT_NE(first, nullptr) << "no step completed after the two failures\n" << c->Logs();
  const int64_t resumed = first->step - 1;
  for (const auto& [id, step] : c->committed_seen()) committed_steps.insert(step);
  for (const auto& ck : ListCommittedCheckpoints(c->checkpoint_dir()))
    committed_steps.insert(ck.step);
  // The coordinator's log names every commit: one that landed just as the workers were killed
  // can be missed by the listing at the kill and the status polls, and keep-K deletes it later.
  const std::string log = c->coordinator().Log();
  const std::regex commit_line(R"(checkpoint \d+ committed at step (\d+))");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), commit_line);
       it != std::sregex_iterator(); ++it)
    committed_steps.insert(std::stoll((*it)[1]));
  std::cout << "[ measured ] two failures after step " << completed_before << ": resumed from step "
            << resumed << " (newest checkpoint committed before the failure: step " << newest_before
            << ")\n";
  EXPECT_TRUE(committed_steps.count(resumed))
      << "resumed from step " << resumed << ", which is no committed checkpoint's step";
  EXPECT_GE(resumed, newest_before) << "resumed from an older checkpoint than the newest one";
  EXPECT_LE(resumed, completed_before);
  EXPECT_EQ(first->world_size, 2);
  EXPECT_TRUE(m.malformed.empty());
  EXPECT_EQ(MissingSteps(m.lines, job.steps), "");
  ExpectSameTrajectory(m.lines, "two failures after step " + std::to_string(completed_before) +
                                    ", restore from the checkpoint at step " +
                                    std::to_string(resumed));
}

// A full checkpoint disk (a tmpfs of 8 KiB mounted as the checkpoint directory): every
// checkpoint fails cleanly, status says so with the error, and after
// max_consecutive_failures (2) in a row the job pauses with every worker alive and nothing
// lost. Once the disk has room (remounted larger) `retortctl resume` goes on: checkpoints
// commit again and the job completes on the uninterrupted run's curve.
TEST_F(CheckpointTest, AFullCheckpointDiskPausesTheJobUntilThereIsRoomAndResume) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs as the checkpoint directory needs root";
  const JobOptions job{.checkpoint_every_steps = 5, .checkpoint_max_consecutive_failures = 2};
  LoadReference(job);
  if (HasFatalFailure()) return;
  auto c = std::make_unique<ElasticCluster>(job, ClusterOptions{});
  dirs_.push_back(c->dir());
  const std::string dir = c->checkpoint_dir();
  std::filesystem::create_directories(dir);
  std::string out;
  ASSERT_EQ(testing::RunCommand({"/usr/bin/mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", dir},
                                &out, milliseconds(10000)),
            0)
      << out;
  struct Unmount {
    std::string dir;
    ~Unmount() {
      std::string ignored;
      testing::RunCommand({"/usr/bin/umount", "-l", dir}, &ignored, milliseconds(10000));
    }
  } unmount{dir};
  std::string error;
  ASSERT_TRUE(c->StartCoordinator(milliseconds(15000), &error)) << error;
  for (int i = 0; i < 2; ++i) c->StartWorker(i);

  StatusView st;
  ASSERT_TRUE(
      c->WaitForStatus([](const StatusView& s) { return s.state == "paused"; }, kStartup, &st))
      << "the job did not pause after failing checkpoints: " << st.raw << "\n"
      << c->Logs();
  auto j = nlohmann::json::parse(st.raw.substr(st.raw.find('{')));
  EXPECT_GE(j.at("checkpoint_consecutive_failures").get<int>(), 2) << st.raw;
  EXPECT_GE(j.at("checkpoint_failures").get<int>(), 2) << st.raw;
  const std::string why = j.at("last_checkpoint_failure").get<std::string>();
  EXPECT_NE(why.find("No space left on device"), std::string::npos) << why;
  EXPECT_EQ(j.at("members").size(), 2u) << "pausing keeps every worker";
  EXPECT_EQ(st.last_checkpoint_id, 0u);
  // The text status says it too.
  ASSERT_EQ(c->Ctl({"status"}, &out), 0) << out;
  EXPECT_NE(out.find("checkpoints failing:"), std::string::npos) << out;
  // Paused: no step completes.
  const int64_t paused_at = c->LastStep();
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_LE(c->LastStep(), paused_at + 1) << "steps went on while paused";

  ASSERT_EQ(testing::RunCommand({"/usr/bin/mount", "-o", "remount,size=64m", dir}, &out,
                                milliseconds(10000)),
            0)
      << out;
  ASSERT_EQ(c->Ctl({"resume"}, &out), 0) << out;
  ASSERT_TRUE(WaitForCommitted(*c, 1, job.steps))
      << "no checkpoint committed after the disk got room\n"
      << c->Logs();
  ExpectCompletedCleanly(*c);
  if (HasFatalFailure()) return;
  MetricsFile m = c->Metrics();
  EXPECT_EQ(MissingSteps(m.lines, job.steps), "");
  ExpectSameTrajectory(m.lines,
                       "a pause for a full checkpoint disk at step " + std::to_string(paused_at));
}

// Scenario 9: the newest committed checkpoint has a corrupted shard (bytes flipped). After all
// workers are restarted, the corruption is detected by the file's checksum and the job resumes
// from the previous committed checkpoint.
TEST_F(CheckpointTest, CorruptedNewestCheckpointIsDetectedAndThePreviousOneIsUsed) {
  const JobOptions job{
      .min_workers = 2, .max_workers = 2, .checkpoint_every_steps = 5, .checkpoint_keep = 3};
  LoadReference(job);
  auto c = StartCluster(job, 2);
  ASSERT_TRUE(WaitForCommitted(*c, 2, 25))
      << "no 2 committed checkpoints by step 25 although checkpoint.every_steps=5 (last step "
      << c->LastStep() << ")\n"
      << c->Logs();
  c->worker(0).Signal(SIGKILL);
  c->worker(1).Signal(SIGKILL);
  const MetricsMark before = c->Mark();
  ASSERT_TRUE(c->WaitForStatus([](const StatusView& s) { return s.members.empty(); }, kEvent))
      << "the killed workers were not evicted\n"
      << c->Logs();

  auto committed = ListCommittedCheckpoints(c->checkpoint_dir());
  ASSERT_GE(committed.size(), 2u);
  const CommittedCheckpoint newest = committed.back(), previous = committed[committed.size() - 2];
  ASSERT_FALSE(newest.files.empty()) << "the manifest of " << newest.dir << " lists no files";
  const std::string victim = newest.dir + "/" + newest.files.front();
  const auto size = std::filesystem::file_size(victim);
  ASSERT_GT(size, 0u) << victim;
  ASSERT_NO_FATAL_FAILURE(FlipBytes(victim, static_cast<std::streamoff>(size / 2),
                                    std::min<size_t>(64, size - size / 2)));
  std::cout << "[ measured ] corrupted " << victim << " (checkpoint " << newest.id << " at step "
            << newest.step << "); previous committed: checkpoint " << previous.id << " at step "
            << previous.step << "; last step before the restart " << before.step << "\n";

  const int r0 = c->StartWorker(0), r1 = c->StartWorker(1);
  ExpectCompletedCleanly(*c, {0, 1});
  if (HasFatalFailure()) return;
  MetricsFile m = c->Metrics();
  ASSERT_LT(before.lines, m.lines.size()) << "no step completed after the restart\n" << c->Logs();
  const int64_t resumed = m.lines[before.lines].step - 1;
  EXPECT_EQ(resumed, previous.step)
      << "the restarted job must resume from the previous committed checkpoint (step "
      << previous.step << ", the newest at step " << newest.step << " is corrupt)";
  const std::string name = std::filesystem::path(victim).filename().string();
  std::string logs = c->worker(r0).Log() + c->worker(r1).Log() + c->coordinator().Log();
  bool named = false;
  std::istringstream lines(logs);
  for (std::string line; std::getline(lines, line);) {
    std::string l = Lower(line);
    if (line.find(name) != std::string::npos &&
        (l.find("checksum") != std::string::npos || l.find("crc") != std::string::npos))
      named = true;
  }
  EXPECT_TRUE(named) << "no log line reports the checksum mismatch of " << name << "\n"
                     << c->Logs();
  EXPECT_TRUE(m.malformed.empty());
  EXPECT_EQ(MissingSteps(m.lines, job.steps), "");
  ExpectSameTrajectory(m.lines, "restart from the checkpoint before a corrupted one");
}

}  // namespace
}  // namespace retort::elastic_testing
