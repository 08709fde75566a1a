// CheckpointFiles on a real temporary directory: what makes a committed checkpoint usable, the
// debris a start removes, and the start's reconciliation of state.json with the disk. (The
// coordinator-level scenarios around them are in durable_state_test.cc.)
#include "coordinator/checkpoint_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/file_util.h"
#include "testing/subprocess.h"

namespace retort::coordinator {
namespace {

class CheckpointFilesTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(root_); }

  // Checkpoint `id` at `step` with one shard file of `bytes` bytes, committed (manifest written).
  void Commit(uint64_t id, int64_t step, int bytes = 8) {
    ASSERT_TRUE(MakeDirectories(files_.Dir(id)).ok());
    std::ofstream(files_.Dir(id) + "/shard-0.bin") << std::string(bytes, 'x');
    v1::CheckpointManifest m;
    m.set_checkpoint_id(id);
    m.set_step(step);
    v1::CheckpointFile* f = m.add_files();
    f->set_path("shard-0.bin");
    f->set_size_bytes(bytes);
    ASSERT_TRUE(files_.WriteManifest(m).ok());
  }
  static v1::CoordinatorState Listing(std::vector<uint64_t> ids, int64_t last_step) {
    v1::CoordinatorState s;
    for (uint64_t id : ids) s.add_committed_checkpoints(id);
    s.set_last_checkpoint_id(ids.empty() ? 0 : ids.back());
    s.set_last_checkpoint_step(last_step);
    return s;
  }

  const std::string root_ = testing::MakeTempDir("retort_checkpoint_files");
  const CheckpointFiles files_{root_};
};

TEST_F(CheckpointFilesTest, NamesItsFoldersByIdAndRoundTripsAManifest) {
  EXPECT_EQ(CheckpointFiles::DirName(7), "ckpt-00000007");
  EXPECT_EQ(files_.Dir(12), root_ + "/ckpt-00000012");
  ASSERT_NO_FATAL_FAILURE(Commit(3, 30));
  auto m = files_.ReadManifest(3);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->step(), 30);
  EXPECT_EQ(files_.Problem(3), "");
  EXPECT_EQ(files_.ReadManifest(4).status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointFilesTest, SaysWhyACommittedCheckpointCannotBeUsed) {
  ASSERT_NO_FATAL_FAILURE(Commit(1, 10, 8));
  const std::string shard = files_.Dir(1) + "/shard-0.bin";
  std::ofstream(shard) << "short";
  EXPECT_EQ(files_.Problem(1), shard + " is 5 bytes, the manifest says 8");
  std::filesystem::remove(shard);
  EXPECT_EQ(files_.Problem(1), shard + " is missing");
  EXPECT_EQ(files_.CheckFiles(1, {files_.ReadManifest(1)->files(0)}).code(), StatusCode::kDataLoss);

  ASSERT_NO_FATAL_FAILURE(Commit(2, 20));
  std::filesystem::rename(files_.Dir(2), files_.Dir(5));
  EXPECT_EQ(files_.Problem(5), files_.Dir(5) + "/MANIFEST.json names checkpoint 2");

  ASSERT_TRUE(MakeDirectories(files_.Dir(6)).ok());
  ASSERT_TRUE(WriteFileAtomically(files_.Dir(6) + "/MANIFEST.json", "{\"checkpoint_id\": 6").ok());
  EXPECT_NE(files_.Problem(6).find("/MANIFEST.json is corrupt"), std::string::npos)
      << files_.Problem(6);
  EXPECT_EQ(files_.ReadManifest(6).status().code(), StatusCode::kDataLoss);

  v1::CheckpointManifest empty;
  empty.set_checkpoint_id(8);
  ASSERT_TRUE(files_.WriteManifest(empty).ok());
  EXPECT_EQ(files_.Problem(8), files_.Dir(8) + "/MANIFEST.json lists no shard file");
  EXPECT_NE(files_.Problem(9).find(files_.Dir(9) + "/MANIFEST.json: "), std::string::npos)
      << files_.Problem(9);
}

TEST_F(CheckpointFilesTest, DebrisIsUncommittedFoldersAndTempFilesNothingElse) {
  ASSERT_NO_FATAL_FAILURE(Commit(1, 10));
  ASSERT_NO_FATAL_FAILURE(Commit(2, 20));
  std::ofstream(files_.Dir(1) + "/shard-1.bin.tmp.123") << "partial";
  std::ofstream(root_ + "/notes.txt") << "a user's file";
  files_.RemoveDebris({1});
  EXPECT_TRUE(std::filesystem::exists(files_.Dir(1) + "/shard-0.bin"));
  EXPECT_FALSE(std::filesystem::exists(files_.Dir(1) + "/shard-1.bin.tmp.123"));
  EXPECT_FALSE(std::filesystem::exists(files_.Dir(2))) << "never committed";
  EXPECT_TRUE(std::filesystem::exists(root_ + "/notes.txt")) << "not a checkpoint folder";
  files_.Remove(1);
  EXPECT_FALSE(std::filesystem::exists(files_.Dir(1)));
  files_.Remove(1);  // already gone: nothing to do, nothing thrown
}

TEST_F(CheckpointFilesTest, ReconcilingFallsBackToTheNewestUsableCheckpoint) {
  ASSERT_NO_FATAL_FAILURE(Commit(1, 10));
  ASSERT_NO_FATAL_FAILURE(Commit(2, 20));
  ASSERT_NO_FATAL_FAILURE(Commit(3, 30));
  std::filesystem::remove(files_.Dir(3) + "/shard-0.bin");
  v1::CoordinatorState state = Listing({1, 2, 3}, 30);
  ASSERT_TRUE(ReconcileCheckpoints(files_, false, &state).ok());
  EXPECT_EQ(state.last_checkpoint_id(), 2u);
  EXPECT_EQ(state.last_checkpoint_step(), 20) << "the step comes from the manifest";
  EXPECT_EQ(std::vector<uint64_t>(state.committed_checkpoints().begin(),
                                  state.committed_checkpoints().end()),
            (std::vector<uint64_t>{1, 2}));

  v1::CoordinatorState all_good = Listing({1, 2}, 20);
  ASSERT_TRUE(ReconcileCheckpoints(files_, false, &all_good).ok());
  EXPECT_EQ(all_good.last_checkpoint_id(), 2u);
  v1::CoordinatorState none = Listing({}, 0);
  EXPECT_TRUE(ReconcileCheckpoints(files_, false, &none).ok());
}

TEST_F(CheckpointFilesTest, ReconcilingRefusesWhenNoneIsUsableUnlessStartingOver) {
  ASSERT_NO_FATAL_FAILURE(Commit(4, 40));
  std::filesystem::remove(files_.Dir(4) + "/shard-0.bin");
  v1::CoordinatorState state = Listing({4}, 40);
  const Status refused = ReconcileCheckpoints(files_, false, &state);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("checkpoint 4: " + files_.Dir(4) + "/shard-0.bin is missing"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("--restart-from-scratch"), std::string::npos);
  EXPECT_EQ(state.last_checkpoint_id(), 4u) << "a refusal changes nothing";

  ASSERT_TRUE(ReconcileCheckpoints(files_, true, &state).ok());
  EXPECT_EQ(state.committed_checkpoints_size(), 0);
  EXPECT_EQ(state.last_checkpoint_id(), 0u);
  EXPECT_EQ(state.last_checkpoint_step(), 0);
}

}  // namespace
}  // namespace retort::coordinator
