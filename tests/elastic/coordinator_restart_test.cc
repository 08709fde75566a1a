// kill -9 of the coordinator during training on 127.0.0.1: workers keep training while it is
// away; restarted on the same port and state directory, it takes the workers back under a
// larger generation number, and a checkpoint requested afterwards commits (or, when the
// workers came back too close to the job's end, is refused saying so).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "elastic/scenario_test.h"

namespace retort::elastic_testing {
namespace {

class CoordinatorRestartTest : public ElasticScenarioTest {};

TEST_F(CoordinatorRestartTest, KillNineCoordinatorTrainingContinuesAndCheckpointsResume) {
  JobOptions job;
  job.min_workers = 2;
  job.max_workers = 3;
  LoadReference(job);
  ClusterOptions options;
  options.port = PickFreePort();
  ASSERT_GT(options.port, 0);
  auto c = StartCluster(job, 2, options);
  ASSERT_TRUE(c->WaitForWorld(2, 8, kStartup)) << c->Logs();
  StatusView before;
  ASSERT_TRUE(WaitAllRanked(*c, 2, kEvent, &before));

  c->coordinator().Signal(SIGKILL);
  ASSERT_TRUE(c->coordinator().Wait(milliseconds(5000)).has_value());
  const size_t lines_before = c->Metrics().lines.size();
  const int64_t step_before = c->LastStep();
  ASSERT_TRUE(c->WaitForStep(step_before + 3, kEvent))
      << "training stopped while the coordinator was away\n"
      << c->Logs();
  for (int i = 0; i < c->worker_count(); ++i) EXPECT_TRUE(c->worker(i).Running()) << i;

  std::string error;
  ASSERT_TRUE(c->StartCoordinator(milliseconds(15000), &error)) << error;
  StatusView after;
  ASSERT_TRUE(c->WaitForStatus(
      [&](const StatusView& s) {
        return s.members.size() == 2 && s.AllRanked() && s.state == "running" &&
               s.generation > before.generation;
      },
      kEvent, &after))
      << "workers did not re-register under a newer generation: " << after.raw << "\n"
      << c->Logs();
  std::cout << "[ measured ] generation " << before.generation << " before the coordinator kill, "
            << after.generation << " after the restart\n";

  // How many steps the job still has when the checkpoint is asked for depends on how fast this
  // machine trained while the coordinator was away and the workers re-joined (they back off up
  // to 2 s). So the expectation follows from what the coordinator answered: a step it names
  // must be within the job and must commit; a refusal must be because members were too close
  // to the last step to hear of a checkpoint in time, and must say so.
  {
    std::string out;
    const int rc = c->Ctl({"checkpoint", "--json"}, &out);
    if (rc != 0) {
      // "... members are at step S and need M steps of notice ..."
      std::smatch m;
      ASSERT_TRUE(std::regex_search(
          out, m, std::regex(R"(members are at step (\d+) and need (\d+) steps of notice)")))
          << "checkpoint refused for another reason: " << out;
      const int64_t at = std::stoll(m[1]), notice = std::stoll(m[2]);
      EXPECT_GT(at + notice, job.steps) << "refused although there was time: " << out;
      std::cout << "[ measured ] checkpoint after the restart refused: members at step " << at
                << " of " << job.steps << " needed " << notice << " steps of notice\n";
    } else {
      auto j = nlohmann::json::parse(out.substr(out.find('{')));
      const uint64_t id = j.at("checkpoint_id").get<uint64_t>();
      const int64_t step = j.at("step").get<int64_t>();
      ASSERT_LE(step, job.steps) << "the checkpoint was scheduled after the last step";
      // Committing follows the step closely (shards are written at the step boundary); give up
      // once training is 5 steps past it or the job ended.
      StatusView committed;
      EXPECT_TRUE(c->WaitForStatus(
                      [&](const StatusView& s) {
                        return s.last_checkpoint_id >= id ||
                               c->LastStep() >= std::min<int64_t>(step + 5, job.steps);
                      },
                      kEvent, &committed) &&
                  committed.last_checkpoint_id >= id)
          << "checkpoint " << id << " at step " << step
          << " requested after the restart did not commit (last step " << c->LastStep()
          << "): " << committed.raw << "\n"
          << c->Logs();
      bool on_disk = false;
      for (const auto& ck : ListCommittedCheckpoints(c->checkpoint_dir()))
        on_disk = on_disk || (ck.id == id && ck.step == step);
      EXPECT_TRUE(on_disk) << "no MANIFEST.json for checkpoint " << id << " at step " << step;
      std::cout << "[ measured ] checkpoint " << id << " at step " << step << " of " << job.steps
                << " committed after the restart\n";
    }
  }
  ExpectCompletedCleanly(*c);
  if (HasFatalFailure()) return;

  MetricsFile m = c->Metrics();
  for (size_t i = 1; i < m.lines.size(); ++i)
    EXPECT_GE(m.lines[i].generation, m.lines[i - 1].generation)
        << "generation numbers went backwards at step " << m.lines[i].step;
  EXPECT_GT(m.lines.back().generation, before.generation);
  ExpectNoLostSteps(m, job, lines_before, step_before);
  EXPECT_EQ(m.lines.size(), static_cast<size_t>(job.steps)) << "some step was run twice";
  ExpectSameTrajectory(m.lines, "coordinator kill -9 and restart");
}

}  // namespace
}  // namespace retort::elastic_testing
