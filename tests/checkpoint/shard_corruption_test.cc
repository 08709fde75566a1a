// Damaged checkpoints are DATA_LOSS naming the file (and chunk); a failing write (disk full)
// leaves nothing behind and touches no other file.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "checkpoint/shard_file.h"
#include "checkpoint/shard_format.h"
#include "checkpoint/shard_reader.h"
#include "checkpoint_test_util.h"
#include "common/checksum.h"

namespace retort::checkpoint {
namespace {

using namespace testing_util;

constexpr int64_t kTotal = 3000;
constexpr uint64_t kChunkBytes = 512;  // 128 floats per chunk

class ShardCorruptionTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    state_ = MakeState(kTotal, 11);
    dir_ = root_ + "/ckpt";
    WriteOptions options;
    options.chunk_bytes = kChunkBytes;
    manifest_ = WriteCheckpoint(dir_, state_, MakePlan(kTotal, 2, 64), options);
    ASSERT_EQ(manifest_.files_size(), 2);
    rank1_path_ = dir_ + "/shard-00001.bin";
    rank1_offset_ = manifest_.plan().ranges(1).offset();
  }
  // Flips one byte of rank 1's file.
  void FlipByte(uint64_t at) {
    std::string bytes = ReadBytes(rank1_path_);
    ASSERT_LT(at, bytes.size());
    bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
    WriteBytes(rank1_path_, bytes);
  }
  // The whole state at a new world size of 3.
  Status ReadAllAtThree() {
    const v1::ShardingPlan plan = MakePlan(kTotal, 3, 64);
    for (const auto& r : plan.ranges()) {
      auto got = ReadRange(dir_, manifest_, r.offset(), r.count());
      if (!got.ok()) return got.status();
    }
    return Status::Ok();
  }
  static ::testing::AssertionResult DataLossNaming(const Status& st,
                                                   const std::vector<std::string>& words) {
    if (st.code() != StatusCode::kDataLoss)
      return ::testing::AssertionFailure() << "expected DATA_LOSS, got " << st;
    for (const auto& w : words)
      if (st.message().find(w) == std::string::npos)
        return ::testing::AssertionFailure() << "'" << w << "' missing from: " << st;
    return ::testing::AssertionSuccess();
  }

  FullState state_;
  std::string dir_, rank1_path_;
  int64_t rank1_offset_ = 0;
  v1::CheckpointManifest manifest_;
};

TEST_F(ShardCorruptionTest, TruncatedFileIsDataLoss) {
  std::string bytes = ReadBytes(rank1_path_);
  WriteBytes(rank1_path_, bytes.substr(0, bytes.size() - 100));
  EXPECT_TRUE(DataLossNaming(ReadAllAtThree(), {rank1_path_, "truncated"}));
  EXPECT_TRUE(DataLossNaming(VerifyCheckpoint(dir_, manifest_), {rank1_path_}));
  // Reads that stay inside rank 0 do not open rank 1's file.
  EXPECT_TRUE(ReadRange(dir_, manifest_, 0, rank1_offset_).ok());
  // A manifest that agrees with the truncated size still fails on the header's layout.
  (*manifest_.mutable_files())[1].set_size_bytes(static_cast<int64_t>(bytes.size()) - 100);
  EXPECT_TRUE(DataLossNaming(ReadAllAtThree(), {rank1_path_, "file size"}));
}

TEST_F(ShardCorruptionTest, FlippedDataByteIsDataLossNamingFileAndChunk) {
  // exp_avg element 300 of rank 1: chunk 2 of exp_avg (128 floats per chunk).
  const uint64_t array_bytes = 4 * static_cast<uint64_t>(manifest_.plan().ranges(1).count());
  FlipByte(4096 + array_bytes + 300 * 4 + 1);
  EXPECT_TRUE(DataLossNaming(ReadAllAtThree(), {rank1_path_, "chunk 2 of exp_avg"}));
  EXPECT_TRUE(DataLossNaming(VerifyCheckpoint(dir_, manifest_), {rank1_path_}));
  // Ranges that avoid the damaged chunk still read: only touched chunks are read and checked.
  auto before = ReadRange(dir_, manifest_, rank1_offset_, 256);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(SameBits(*before, state_, rank1_offset_, 256));
  auto after = ReadRange(dir_, manifest_, rank1_offset_ + 384, 100);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, manifest_, rank1_offset_ + 300, 1).status(),
                             {rank1_path_, "chunk 2 of exp_avg"}));
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, manifest_, rank1_offset_ + 260, 1).status(),
                             {"chunk 2 of exp_avg"}))
      << "a one-element read verifies the whole chunk it lies in";
}

TEST_F(ShardCorruptionTest, FlippedHeaderBytesAreDataLoss) {
  const std::string original = ReadBytes(rank1_path_);
  for (uint64_t at : {uint64_t{2}, uint64_t{17}, uint64_t{45}, uint64_t{200}, uint64_t{4093}}) {
    FlipByte(at);
    EXPECT_TRUE(DataLossNaming(ReadAllAtThree(), {rank1_path_, "header"})) << "byte " << at;
    WriteBytes(rank1_path_, original);
  }
  EXPECT_TRUE(ReadAllAtThree().ok());
}

TEST_F(ShardCorruptionTest, FlippedChunkTableIsDataLoss) {
  const std::string bytes = ReadBytes(rank1_path_);
  FlipByte(bytes.size() - 16 - 5);  // inside the chunk CRC table
  EXPECT_TRUE(DataLossNaming(ReadAllAtThree(), {rank1_path_, "chunk CRC table"}));
  WriteBytes(rank1_path_, bytes);
  FlipByte(bytes.size() - 2);  // end magic
  EXPECT_TRUE(DataLossNaming(ReadAllAtThree(), {rank1_path_, "trailer"}));
}

TEST_F(ShardCorruptionTest, ManifestDisagreementsAreDataLoss) {
  v1::CheckpointManifest m = manifest_;
  (*m.mutable_files())[0].set_size_bytes(m.files(0).size_bytes() + 4);
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, m, 0, 10).status(), {"shard-00000.bin", "manifest"}));
  EXPECT_TRUE(DataLossNaming(VerifyCheckpoint(dir_, m), {"shard-00000.bin"}));

  m = manifest_;
  (*m.mutable_files())[0].set_crc32c(m.files(0).crc32c() ^ 1);
  EXPECT_TRUE(ReadRange(dir_, m, 0, 10).ok()) << "range reads check chunk CRCs, not the file CRC";
  EXPECT_TRUE(DataLossNaming(VerifyCheckpoint(dir_, m), {"shard-00000.bin", "whole-file"}));

  m = manifest_;
  m.set_step(301);
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, m, 0, 10).status(), {"global_step"}));
  m = manifest_;
  m.set_generation(8);
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, m, 0, 10).status(), {"generation"}));
  m = manifest_;
  m.mutable_plan()->mutable_ranges(1)->set_offset(rank1_offset_ + 64);
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, m, 0, 10).status(), {"tile"}));
  m = manifest_;
  m.mutable_plan()->mutable_ranges(0)->set_count(rank1_offset_ + 64);
  m.mutable_plan()->mutable_ranges(1)->set_offset(rank1_offset_ + 64);
  m.mutable_plan()->mutable_ranges(1)->set_count(kTotal - rank1_offset_ - 64);
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, m, 0, 10).status(), {"shard-00000.bin", "range"}))
      << "a plan that tiles but differs from what the shard holds";
  m = manifest_;
  m.mutable_files()->RemoveLast();
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, m, 0, 10).status(), {"no file for rank 1"}));
  m = manifest_;
  (*m.mutable_files())[1].set_path("../ckpt/shard-00001.bin");
  EXPECT_TRUE(DataLossNaming(VerifyCheckpoint(dir_, m), {"'..'"}));
  m = manifest_;
  std::swap((*m.mutable_files())[0], (*m.mutable_files())[1]);
  (*m.mutable_files())[0].set_rank(0);
  (*m.mutable_files())[1].set_rank(1);
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, m, 0, 10).status(), {"header rank"}))
      << "files swapped between ranks";
}

TEST_F(ShardCorruptionTest, InconsistentShardsAreDataLoss) {
  // Rank 1 rewritten with a different optimizer step (same generation and global step).
  ShardView v;
  v.header = BaseHeader(kTotal);
  v.header.optimizer_step = 42;
  v.header.rank = 1;
  v.header.world_size = 2;
  v.header.range_offset = rank1_offset_;
  v.header.range_count = kTotal - rank1_offset_;
  v.params = state_.params.data() + rank1_offset_;
  v.exp_avg = state_.exp_avg.data() + rank1_offset_;
  v.exp_avg_sq = state_.exp_avg_sq.data() + rank1_offset_;
  auto ack = WriteShard(dir_, v);
  ASSERT_TRUE(ack.ok()) << ack.status();
  (*manifest_.mutable_files())[1] = *ack;
  EXPECT_TRUE(DataLossNaming(ReadRange(dir_, manifest_, 0, kTotal).status(),
                             {"disagree on optimizer_step", rank1_path_}));
}

// Runs `body` in a forked child with RLIMIT_FSIZE = `limit` bytes and SIGXFSZ ignored, so
// writes past the limit fail with EFBIG as on a full disk. Returns the child's exit code.
int RunWithFileSizeLimit(rlim_t limit, const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {limit, limit};
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(90);
    ::_exit(body());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Found with tests/fuzz (fuzz_checkpoint): a header whose range count is 2^62 + 1 passed every
// check, because 4 * count wrapped to 4 bytes and the layout fields agreed with that; reading
// three elements then verified chunk CRCs past the end of the chunk table (a heap overflow under
// ASan). The file below is consistent in every other way: header and table CRCs are right, and
// its data chunks are chosen (z has CRC32C 0) so that every CRC the reader checks before the
// overflow matches. The header is refused instead, naming the count.
TEST_F(ShardCorruptionTest, RangeCountWhoseSizeWrapsIsRefusedInTheHeader) {
  using namespace internal;
  ShardHeader h;
  h.world_size = 1;
  h.generation = 3;
  h.global_step = 40;
  h.total_elements = (int64_t{1} << 62) + 1;
  h.range_count = h.total_elements;
  const Layout layout = MakeLayout(h, 4);
  ASSERT_EQ(layout.file_bytes, 4096u + 12 + 12 + 16) << "the sizes wrapped";
  std::string file(layout.file_bytes, '\0');
  auto* b = reinterpret_cast<unsigned char*>(file.data());
  EncodeHeader(layout, b);
  const std::string z("\xab\x9b\xe0\x9b", 4);
  ASSERT_EQ(Crc32c(z), 0u);
  const std::string data = std::string("\x01\x02\x03\x04", 4) + z + z;
  std::memcpy(b + 4096, data.data(), data.size());
  const uint32_t table[3] = {Crc32c(data.substr(0, 4)), 0, 0};
  std::memcpy(b + 4108, table, sizeof(table));
  Put<uint32_t>(b, 4120, Crc32c(table, sizeof(table)));
  std::memcpy(b + 4128, kEndMagic, sizeof(kEndMagic));
  const std::string dir = root_ + "/wrapped";
  std::filesystem::create_directories(dir);
  WriteBytes(dir + "/shard-00000.bin", file);
  v1::CheckpointManifest m;
  m.set_checkpoint_id(1);
  m.set_generation(3);
  m.set_step(40);
  m.set_world_size(1);
  m.mutable_plan()->set_total_elements(h.total_elements);
  m.mutable_plan()->add_ranges()->set_count(h.range_count);
  auto* f = m.add_files();
  f->set_path("shard-00000.bin");
  f->set_size_bytes(static_cast<int64_t>(file.size()));
  auto got = ReadRange(dir, m, 0, 3);
  EXPECT_TRUE(DataLossNaming(got.status(), {"shard-00000.bin", "header", "range count"}));
}

TEST_F(ShardCorruptionTest, FullDiskFailsCleanlyAndTouchesNothingElse) {
  const std::string other_dir = root_ + "/full";
  // A previous, good shard of rank 0 in the directory the failing write goes to.
  v1::CheckpointManifest previous = WriteCheckpoint(other_dir, state_, MakePlan(kTotal, 1, 64));
  ASSERT_EQ(previous.files_size(), 1);
  const std::string kept_here = ReadBytes(other_dir + "/shard-00000.bin");
  const std::string kept_elsewhere = ReadBytes(dir_ + "/shard-00000.bin");
  const std::string message_file = root_ + "/child-error.txt";

  FullState big = MakeState(100000, 12);  // 1.2 MB of data against a 64 KiB limit
  int code = RunWithFileSizeLimit(64 << 10, [&] {
    ShardView v;
    v.header = BaseHeader(100000);
    v.header.world_size = 1;
    v.header.range_count = 100000;
    v.params = big.params.data();
    v.exp_avg = big.exp_avg.data();
    v.exp_avg_sq = big.exp_avg_sq.data();
    auto ack = WriteShard(other_dir, v);
    if (ack.ok()) return 1;
    WriteBytes(message_file, ack.status().ToString());
    return ack.status().code() == StatusCode::kResourceExhausted ? 0 : 2;
  });
  ASSERT_EQ(code, 0) << "child: " << ReadBytes(message_file);
  const std::string message = ReadBytes(message_file);
  EXPECT_NE(message.find(other_dir + "/shard-00000.bin.tmp-"), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(EFBIG)), std::string::npos) << message;
  EXPECT_EQ(ListDir(other_dir), std::vector<std::string>{"shard-00000.bin"})
      << "no temp file is left";
  EXPECT_EQ(ReadBytes(other_dir + "/shard-00000.bin"), kept_here)
      << "the previous shard of the same rank is unchanged";
  EXPECT_EQ(ReadBytes(dir_ + "/shard-00000.bin"), kept_elsewhere);
  EXPECT_TRUE(VerifyCheckpoint(other_dir, previous).ok());
  EXPECT_TRUE(VerifyCheckpoint(dir_, manifest_).ok());
}

}  // namespace
}  // namespace retort::checkpoint
