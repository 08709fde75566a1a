// The student's buffers (BatchNorm running statistics) are model state through every elastic
// event: a worker that joins mid-run (agreed switch: full state), a kill -9 (peer replicas) and
// a restart of every worker from a disk checkpoint, also when the newest checkpoint's buffer
// file is corrupt. Every generation rebuilds the student from its TorchScript file, so a path
// that dropped the buffers would restart num_batches_tracked from 0: the exported student must
// have counted every step exactly once.
#include <signal.h>

#include "elastic/scenario_test.h"
#include "tests/trainer/python_fixture.h"
#include "trainer/safetensors.h"

namespace retort::elastic_testing {
namespace {

class ModelBuffersTest : public ElasticScenarioTest {
 protected:
  void SetUp() override {
    ElasticScenarioTest::SetUp();
    if (IsSkipped()) return;
    fixture_dir_ = trainer::test::SharedFixture("batchnorm-fm");
    ASSERT_FALSE(fixture_dir_.empty()) << "cannot build the fixtures with " RETORT_PYTHON
                                          " (does it have torch? run scripts/setup)";
    job_.steps = 120;
    job_.min_workers = 2;
    job_.max_workers = 3;
    job_.student_torchscript = fixture_dir_ + "/cnn.pt";
  }

  // num_batches_tracked of both BatchNorm layers of the exported student.
  void ExpectEveryStepCountedOnce(ElasticCluster& c, const std::string& what) {
    auto tensors = trainer::ReadSafetensors(c.dir() + "/out/student.safetensors");
    ASSERT_TRUE(tensors.ok()) << tensors.status() << "\n" << c.Logs();
    int found = 0;
    for (const auto& [name, t] : *tensors) {
      if (name.find("num_batches_tracked") == std::string::npos) continue;
      ++found;
      EXPECT_EQ(t.item<int64_t>(), job_.steps) << what << ": " << name;
    }
    EXPECT_EQ(found, 2) << "bn1 and bn2";
  }

  std::string fixture_dir_;  // shared, read-only
  JobOptions job_;
};

TEST_F(ModelBuffersTest, JoinAndKillNineCarryTheBuffers) {
  auto c = StartCluster(job_, 2);
  ASSERT_TRUE(c->WaitForWorld(2, 10, kStartup)) << c->Logs();
  c->StartWorker(2);  // joins: the next generation starts from the saved full state
  ASSERT_TRUE(c->WaitForWorld(3, c->LastStep() + 5, kEvent)) << c->Logs();
  StatusView st;
  ASSERT_TRUE(WaitAllRanked(*c, 3, kEvent, &st));
  const RankedWorker victim = WorkerAtRank(*c, st, 1);  // not the metrics writer
  c->worker(victim.index).Signal(SIGKILL);  // the survivors restore from the peer replicas
  const MetricsMark before = c->Mark();
  ExpectCompletedCleanly(*c, {victim.index});
  ExpectNoLostSteps(c->Metrics(), job_, before);
  ExpectEveryStepCountedOnce(*c,
                             "join at step ~10, kill -9 at step ~" + std::to_string(before.step));
}

TEST_F(ModelBuffersTest, RestartFromCheckpointsRestoresTheBuffersAndRejectsACorruptCopy) {
  job_.checkpoint_every_steps = 20;
  auto c = StartCluster(job_, 2);
  StatusView st;
  ASSERT_TRUE(c->WaitForStatus([](const StatusView& s) { return s.last_checkpoint_step >= 40; },
                               kStartup + kEvent, &st))
      << st.raw << "\n"
      << c->Logs();
  for (int i = 0; i < c->worker_count(); ++i) c->worker(i).Signal(SIGKILL);
  for (int i = 0; i < c->worker_count(); ++i) c->worker(i).Wait(milliseconds(5000));
  auto committed = ListCommittedCheckpoints(c->checkpoint_dir());
  ASSERT_GE(committed.size(), 2u);
  const CommittedCheckpoint& newest = committed.back();
  ASSERT_THAT(newest.files, ::testing::Contains("model-buffers.bin"));
  // Corrupt one byte: the restore must refuse this copy (CRC) and take the previous checkpoint.
  ASSERT_NO_FATAL_FAILURE(FlipBytes(newest.dir + "/model-buffers.bin", 5, 1));
  const int first = c->worker_count();
  c->StartWorker(0);
  c->StartWorker(1);
  ExpectCompletedCleanly(*c, {0, 1});
  // Rank 0 of the new generation reads the buffers and reports the bad copy.
  const std::string rejected = "checkpoint " + std::to_string(newest.id) + " unusable on this rank";
  bool reported = false;
  for (int i = first; i < c->worker_count(); ++i)
    reported |= c->worker(i).Log().find(rejected) != std::string::npos;
  EXPECT_TRUE(reported) << "no worker rejected the corrupt buffers of checkpoint " << newest.id
                        << "\n"
                        << c->Logs();
  EXPECT_TRUE(c->Metrics().malformed.empty());
  ExpectEveryStepCountedOnce(
      *c, "restart of every worker after step " + std::to_string(st.last_checkpoint_step));
}

}  // namespace
}  // namespace retort::elastic_testing
