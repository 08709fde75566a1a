// Shard files round-trip: a checkpoint written by N ranks reads back bit-exactly at any world
// size M, for any range, reading only the shards a range overlaps.
#include "checkpoint/shard_file.h"
#include "checkpoint/shard_reader.h"

#include <gtest/gtest.h>

#include "checkpoint_test_util.h"
#include "common/checksum.h"

namespace retort::checkpoint {
namespace {

using namespace testing_util;

class ShardFileTest : public TempDirTest {};

TEST_F(ShardFileTest, WriteNReadAnyMIsBitExact) {
  // Not a multiple of the alignment; small chunks so every shard has many chunks and ranges
  // start and end inside chunks.
  const int64_t total = 64 * 37 + 13;
  const FullState state = MakeState(total, 1);
  WriteOptions options;
  options.chunk_bytes = 100;  // 25 floats: chunk and range boundaries never line up
  for (int n : {1, 2, 3}) {
    const std::string dir = root_ + "/n" + std::to_string(n);
    v1::CheckpointManifest m = WriteCheckpoint(dir, state, MakePlan(total, n, 64), options);
    ASSERT_EQ(m.files_size(), n);
    ASSERT_TRUE(VerifyCheckpoint(dir, m).ok());
    for (int world : {1, 2, 3, 4, 5, 7}) {
      int64_t covered = 0;
      const v1::ShardingPlan read_plan = MakePlan(total, world, 64);
      for (const auto& r : read_plan.ranges()) {
        auto got = ReadRange(dir, m, r.offset(), r.count());
        ASSERT_TRUE(got.ok()) << "N=" << n << " M=" << world << ": " << got.status();
        EXPECT_TRUE(SameBits(*got, state, r.offset(), r.count())) << "N=" << n << " M=" << world;
        EXPECT_EQ(got->header.range_offset, r.offset());
        EXPECT_EQ(got->header.range_count, r.count());
        EXPECT_EQ(got->header.global_step, 300);
        EXPECT_EQ(got->header.optimizer_step, 299);
        EXPECT_EQ(got->header.epoch, 2);
        EXPECT_EQ(got->header.step_in_epoch, 17);
        EXPECT_EQ(got->header.seed, 1234u);
        EXPECT_EQ(got->header.generation, 7u);
        EXPECT_EQ(got->header.world_size, n);
        EXPECT_EQ(got->header.total_elements, total);
        covered += r.count();
      }
      EXPECT_EQ(covered, total);
    }
  }
}

TEST_F(ShardFileTest, DefaultChunkSizeRoundTripsAcrossChunkBoundaries) {
  // 300k floats = 1.2 MB per array: two rank shards, each spanning a 1 MiB chunk boundary.
  const int64_t total = 300000 * 2 + 5;
  const FullState state = MakeState(total, 2);
  const std::string dir = root_ + "/big";
  v1::CheckpointManifest m = WriteCheckpoint(dir, state, MakePlan(total, 2, 64));
  ASSERT_EQ(m.files_size(), 2);
  for (int world : {1, 3, 7}) {
    const v1::ShardingPlan read_plan = MakePlan(total, world, 64);
    for (const auto& r : read_plan.ranges()) {
      auto got = ReadRange(dir, m, r.offset(), r.count());
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(SameBits(*got, state, r.offset(), r.count())) << "M=" << world;
    }
  }
  EXPECT_TRUE(VerifyCheckpoint(dir, m).ok());
}

TEST_F(ShardFileTest, EdgeRangesZeroOneAndUnaligned) {
  const int64_t total = 1000;
  const FullState state = MakeState(total, 3);
  WriteOptions options;
  options.chunk_bytes = 64 * 4;
  const std::string dir = root_ + "/edges";
  v1::CheckpointManifest m = WriteCheckpoint(dir, state, MakePlan(total, 3, 64), options);
  const std::pair<int64_t, int64_t> ranges[] = {
      {0, 0},   {500, 0}, {1000, 0}, {0, 1},    {63, 1},   {64, 1},   {65, 1},  {999, 1},
      {383, 2}, {384, 1}, {1, 998},  {63, 130}, {0, 1000}, {320, 64}, {7, 331}, {900, 100}};
  for (const auto& [offset, count] : ranges) {
    auto got = ReadRange(dir, m, offset, count);
    ASSERT_TRUE(got.ok()) << offset << "+" << count << ": " << got.status();
    EXPECT_TRUE(SameBits(*got, state, offset, count)) << offset << "+" << count;
    EXPECT_EQ(got->header.global_step, 300) << "a zero-count read still reports the step";
  }
  for (const auto& [offset, count] :
       {std::pair<int64_t, int64_t>{-1, 1}, {0, 1001}, {1000, 1}, {999, 2}, {5, -1}}) {
    auto got = ReadRange(dir, m, offset, count);
    EXPECT_EQ(got.status().code(), StatusCode::kOutOfRange) << offset << "+" << count;
  }
}

TEST_F(ShardFileTest, RanksWithEmptyRangesWriteAndReadBack) {
  // 10 elements, alignment 64, 3 ranks: ranks 0 and 1 hold nothing, rank 2 holds everything.
  const int64_t total = 10;
  const FullState state = MakeState(total, 4);
  const std::string dir = root_ + "/tiny";
  v1::ShardingPlan plan = MakePlan(total, 3, 64);
  ASSERT_EQ(plan.ranges(0).count(), 0);
  ASSERT_EQ(plan.ranges(2).count(), total);
  v1::CheckpointManifest m = WriteCheckpoint(dir, state, plan);
  ASSERT_EQ(m.files_size(), 3);
  EXPECT_TRUE(VerifyCheckpoint(dir, m).ok());
  for (int world : {1, 2, 5}) {
    const v1::ShardingPlan read_plan = MakePlan(total, world, 1);
    for (const auto& r : read_plan.ranges()) {
      auto got = ReadRange(dir, m, r.offset(), r.count());
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(SameBits(*got, state, r.offset(), r.count()));
    }
  }
  for (int64_t offset : {0, 5, 10}) {
    auto got = ReadRange(dir, m, offset, 0);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->header.step_in_epoch, 17);
  }
}

TEST_F(ShardFileTest, AckMatchesTheFileAndNoTempFileRemains) {
  const int64_t total = 5000;
  const FullState state = MakeState(total, 5);
  const std::string dir = root_ + "/nested/ckpt-1";  // created by WriteShard
  WriteOptions options;
  options.chunk_bytes = 1024;
  options.writeback_every_bytes = 4096;  // exercise the periodic writeback path
  v1::CheckpointManifest m = WriteCheckpoint(dir, state, MakePlan(total, 2, 64), options);
  ASSERT_EQ(m.files_size(), 2);
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"shard-00000.bin", "shard-00001.bin"}));
  for (const auto& f : m.files()) {
    std::string bytes = ReadBytes(dir + "/" + f.path());
    EXPECT_EQ(static_cast<int64_t>(bytes.size()), f.size_bytes());
    EXPECT_EQ(Crc32c(bytes), f.crc32c()) << "whole-file CRC combined from chunk CRCs";
    EXPECT_EQ(f.path(), ShardFileName(f.rank()));
    EXPECT_EQ(bytes.substr(0, 8), "RTCKPT01");
    EXPECT_EQ(bytes.substr(bytes.size() - 8), "RTCKEND1");
  }
}

TEST_F(ShardFileTest, ReadOpensOnlyOverlappingShards) {
  const int64_t total = 3 * 640;
  const FullState state = MakeState(total, 6);
  const std::string dir = root_ + "/only";
  v1::CheckpointManifest m = WriteCheckpoint(dir, state, MakePlan(total, 3, 64));
  ASSERT_EQ(m.plan().ranges(1).offset(), 640);
  // Rank 2's file is gone: ranges inside ranks 0 and 1 still read, rank 2's do not.
  std::filesystem::remove(dir + "/shard-00002.bin");
  auto got = ReadRange(dir, m, 100, 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(SameBits(*got, state, 100, 1000));
  auto bad = ReadRange(dir, m, 1200, 100);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("shard-00002.bin"), std::string::npos) << bad.status();
}

TEST_F(ShardFileTest, ReadRangeIntoFillsCallerBuffers) {
  const int64_t total = 2000;
  const FullState state = MakeState(total, 7);
  const std::string dir = root_ + "/into";
  WriteOptions options;
  options.chunk_bytes = 128;
  v1::CheckpointManifest m = WriteCheckpoint(dir, state, MakePlan(total, 3, 64), options);
  // The new rank 1 of 4 reads its range straight into its own (reused) state buffers.
  FullState mine = MakeState(total, 8);
  const v1::ShardingPlan plan = MakePlan(total, 4, 64);
  const auto& r = plan.ranges(1);
  RangeBuffers out{mine.params.data() + r.offset(), mine.exp_avg.data() + r.offset(),
                   mine.exp_avg_sq.data() + r.offset()};
  auto header = ReadRangeInto(dir, m, r.offset(), r.count(), out);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->range_offset, r.offset());
  EXPECT_EQ(header->optimizer_step, 299);
  RangeState view;
  view.params.assign(mine.params.begin() + r.offset(),
                     mine.params.begin() + r.offset() + r.count());
  view.exp_avg.assign(mine.exp_avg.begin() + r.offset(),
                      mine.exp_avg.begin() + r.offset() + r.count());
  view.exp_avg_sq.assign(mine.exp_avg_sq.begin() + r.offset(),
                         mine.exp_avg_sq.begin() + r.offset() + r.count());
  EXPECT_TRUE(SameBits(view, state, r.offset(), r.count()));
  EXPECT_NE(std::memcmp(mine.params.data(), state.params.data(), 4 * r.offset()), 0)
      << "elements outside the range are untouched";
  EXPECT_EQ(ReadRangeInto(dir, m, 0, 10, RangeBuffers()).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ShardFileTest, BadShardsAreInvalidArgument) {
  ShardView v;
  v.header = BaseHeader(100);
  v.header.world_size = 2;
  v.header.rank = 2;
  EXPECT_EQ(WriteShard(root_, v).status().code(), StatusCode::kInvalidArgument);
  v.header.rank = 0;
  v.header.range_offset = 90;
  v.header.range_count = 20;
  EXPECT_EQ(WriteShard(root_, v).status().code(), StatusCode::kInvalidArgument);
  v.header.range_count = 10;  // in range, but no arrays
  EXPECT_EQ(WriteShard(root_, v).status().code(), StatusCode::kInvalidArgument);
  std::vector<float> data(10);
  v.params = v.exp_avg = v.exp_avg_sq = data.data();
  WriteOptions options;
  options.chunk_bytes = 6;
  EXPECT_EQ(WriteShard(root_, v, options).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ListDir(root_).empty()) << "nothing written for refused shards";
  EXPECT_TRUE(WriteShard(root_, v).ok());
}

}  // namespace
}  // namespace retort::checkpoint
