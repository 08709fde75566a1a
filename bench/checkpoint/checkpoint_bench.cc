// Checkpoint write/read benchmark: writes a ZeRO-1 checkpoint of `--ranks` shards with
// WriteShard (fsync + rename each) and, in the same run and directory, the same number of
// bytes with `dd if=/dev/zero bs=4M conv=fsync` as the disk's sequential-write reference,
// alternating the two for --repeat rounds. Then reads the whole buffer back at world size
// --read-world with ReadRange (page cache dropped first with POSIX_FADV_DONTNEED), checks it
// bit-exactly, and reads the same files with `dd of=/dev/null bs=4M` as the read reference.
// Also times both reads again from the page cache. --parallel writes the ranks concurrently.
// Prints one JSON line per measurement and a comparison line per direction (MB = 1e6 bytes).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/shard_file.h"
#include "checkpoint/shard_reader.h"
#include "common/args.h"
#include "common/process.h"

namespace {

using retort::checkpoint::ReadRange;
using retort::checkpoint::ShardView;
using retort::checkpoint::WriteShard;
using retort::v1::CheckpointManifest;
using Clock = std::chrono::steady_clock;

struct Options {
  int64_t total_mib = 768;  // params + exp_avg + exp_avg_sq, all ranks
  int ranks = 2;
  int read_world = 3;
  int repeat = 3;
  int64_t writeback_mib = 64;  // WriteOptions::writeback_every_bytes, MiB (0 = fsync only)
  bool parallel = false;       // ranks write at the same time (threads), as separate workers would
  std::string dir;             // default: a fresh directory under /tmp
};

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

void PrintLine(const char* bench, const char* impl, int round, uint64_t bytes, double seconds) {
  std::printf(
      "{\"bench\":\"%s\",\"impl\":\"%s\",\"round\":%d,\"bytes\":%llu,\"seconds\":%.4f,"
      "\"MBps\":%.1f}\n",
      bench, impl, round, static_cast<unsigned long long>(bytes), seconds, bytes / seconds / 1e6);
  std::fflush(stdout);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs argv to completion with stdout/stderr discarded; returns the wall time, or < 0.
double RunTimed(const std::vector<std::string>& args) {
  retort::SpawnOptions options;
  options.output = retort::SpawnOptions::Output::kDiscard;
  options.search_path = true;
  auto start = Clock::now();
  auto child = retort::SpawnProcess(args, options);
  if (!child.ok() || retort::WaitExit(child->pid, retort::Deadline::Never()) != 0) return -1;
  return Seconds(start);
}

// Evicts a written (and fsynced) file from the page cache so the next read comes from disk.
void DropFromPageCache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

retort::v1::ShardingPlan Plan(int64_t total, int world) {
  retort::v1::ShardingPlan plan;
  plan.set_total_elements(total);
  plan.set_alignment(64);
  const int64_t units = (total + 63) / 64;
  for (int r = 0; r < world; ++r) {
    auto* range = plan.add_ranges();
    int64_t begin = std::min(total, units * r / world * 64);
    int64_t end = std::min(total, units * (r + 1) / world * 64);
    range->set_rank(r);
    range->set_offset(begin);
    range->set_count(end - begin);
  }
  return plan;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  retort::ArgParser args("checkpoint_bench [flags]",
                         "WriteShard/ReadRange vs dd on the same filesystem, same bytes.");
  args.AddInt("total-mib", &o.total_mib, "optimizer state of all ranks (3 float32 arrays), MiB");
  args.AddInt("ranks", &o.ranks, "ranks writing the checkpoint (one after another)");
  args.AddInt("read-world", &o.read_world, "world size the checkpoint is read back at");
  args.AddInt("repeat", &o.repeat, "rounds of (retort, dd) writes");
  args.AddInt("writeback-mib", &o.writeback_mib,
              "start writeback every this many MiB written (0: only the closing fsync)");
  args.AddBool("parallel", &o.parallel, "ranks write concurrently (one thread each)");
  args.AddString("dir", &o.dir, "scratch directory (default: new directory under /tmp)");
  if (auto code = args.ParseOrExitCode(argc, argv, "checkpoint_bench")) return *code;
  if (o.total_mib <= 0 || o.ranks <= 0 || o.read_world <= 0 || o.repeat <= 0 ||
      o.writeback_mib < 0) {
    std::fprintf(stderr, "--total-mib, --ranks, --read-world and --repeat must be positive\n");
    return 2;
  }
  if (o.dir.empty()) {
    char tmpl[] = "/tmp/retort_ckpt_bench_XXXXXX";
    if (!::mkdtemp(tmpl)) {
      std::perror("mkdtemp");
      return 1;
    }
    o.dir = tmpl;
  }
  const int64_t total = (o.total_mib << 20) / 12;
  std::vector<float> params(total), exp_avg(total), exp_avg_sq(total);
  for (int64_t i = 0; i < total; ++i) {
    params[i] = static_cast<float>(i % 1000003) * 1e-3f;
    exp_avg[i] = -params[i];
    exp_avg_sq[i] = params[i] * params[i];
  }
  const retort::v1::ShardingPlan plan = Plan(total, o.ranks);

  std::vector<double> ours_mbps, dd_mbps;
  CheckpointManifest manifest;
  uint64_t ckpt_bytes = 0;
  // Writes round `round`'s checkpoint with WriteShard; fills manifest and ckpt_bytes.
  auto write_checkpoint = [&](int round) -> bool {
    const std::string ckpt_dir = o.dir + "/ckpt-" + std::to_string(round);
    manifest.Clear();
    manifest.set_checkpoint_id(static_cast<uint64_t>(round + 1));
    manifest.set_step(1000);
    manifest.set_generation(1);
    manifest.set_world_size(o.ranks);
    *manifest.mutable_plan() = plan;
    ckpt_bytes = 0;
    std::vector<retort::StatusOr<retort::v1::CheckpointFile>> acks(
        o.ranks, retort::InternalError("not written"));
    auto write_rank = [&](int rank) {
      const auto& r = plan.ranges(rank);
      ShardView v;
      v.header.rank = r.rank();
      v.header.world_size = o.ranks;
      v.header.generation = 1;
      v.header.global_step = 1000;
      v.header.optimizer_step = 1000;
      v.header.total_elements = total;
      v.header.range_offset = r.offset();
      v.header.range_count = r.count();
      v.params = params.data() + r.offset();
      v.exp_avg = exp_avg.data() + r.offset();
      v.exp_avg_sq = exp_avg_sq.data() + r.offset();
      retort::checkpoint::WriteOptions options;
      options.writeback_every_bytes = static_cast<uint64_t>(o.writeback_mib) << 20;
      acks[rank] = WriteShard(ckpt_dir, v, options);
    };
    auto start = Clock::now();
    if (o.parallel) {
      std::vector<std::thread> threads;
      for (int rank = 0; rank < o.ranks; ++rank) threads.emplace_back(write_rank, rank);
      for (auto& t : threads) t.join();
    } else {
      for (int rank = 0; rank < o.ranks; ++rank) write_rank(rank);
    }
    double ours = Seconds(start);
    for (const auto& ack : acks) {
      if (!ack.ok()) {
        std::fprintf(stderr, "WriteShard: %s\n", ack.status().ToString().c_str());
        return false;
      }
      ckpt_bytes += static_cast<uint64_t>(ack->size_bytes());
      *manifest.add_files() = *ack;
    }
    std::string impl = std::string("retort_WriteShard") + (o.parallel ? "_parallel" : "") +
                       (o.writeback_mib == 0 ? "_fsync_only" : "");
    PrintLine("checkpoint_write", impl.c_str(), round, ckpt_bytes, ours);
    ours_mbps.push_back(ckpt_bytes / ours / 1e6);
    return true;
  };
  // The same number of bytes with dd (4 MiB blocks, one fsync at the end).
  auto write_dd = [&](int round, uint64_t bytes) -> bool {
    const std::string dd_file = o.dir + "/dd-" + std::to_string(round) + ".bin";
    double dd = RunTimed({"dd", "if=/dev/zero", "of=" + dd_file, "bs=4M", "iflag=count_bytes",
                          "count=" + std::to_string(bytes), "conv=fsync"});
    if (dd < 0) {
      std::fprintf(stderr, "dd failed\n");
      return false;
    }
    PrintLine("checkpoint_write", "dd_bs4M_conv_fsync", round, bytes, dd);
    dd_mbps.push_back(bytes / dd / 1e6);
    std::filesystem::remove(dd_file);
    return true;
  };
  for (int round = 0; round < o.repeat; ++round) {
    // Alternate which goes first, so neither always inherits the other's writeback.
    if (round % 2 == 0 || ckpt_bytes == 0) {
      if (!write_checkpoint(round) || !write_dd(round, ckpt_bytes)) return 1;
    } else {
      if (!write_dd(round, ckpt_bytes) || !write_checkpoint(round)) return 1;
    }
    if (round + 1 < o.repeat) std::filesystem::remove_all(o.dir + "/ckpt-" + std::to_string(round));
  }
  std::printf(
      "{\"bench\":\"checkpoint_write\",\"compare\":\"retort_WriteShard/dd\",\"rounds\":%d,"
      "\"retort_median_MBps\":%.1f,\"dd_median_MBps\":%.1f,\"ratio\":%.3f,\"target\":0.5}\n",
      o.repeat, Median(ours_mbps), Median(dd_mbps), Median(ours_mbps) / Median(dd_mbps));

  // Read-back at a different world size, from disk.
  const std::string ckpt_dir = o.dir + "/ckpt-" + std::to_string(o.repeat - 1);
  for (const auto& f : manifest.files()) DropFromPageCache(ckpt_dir + "/" + f.path());
  const retort::v1::ShardingPlan read_plan = Plan(total, o.read_world);
  auto start = Clock::now();
  uint64_t read_bytes = 0;
  bool exact = true;
  for (const auto& r : read_plan.ranges()) {
    auto got = ReadRange(ckpt_dir, manifest, r.offset(), r.count());
    if (!got.ok()) {
      std::fprintf(stderr, "ReadRange: %s\n", got.status().ToString().c_str());
      return 1;
    }
    read_bytes += 12 * static_cast<uint64_t>(r.count());
    exact = exact &&
            std::memcmp(got->params.data(), params.data() + r.offset(), 4 * r.count()) == 0 &&
            std::memcmp(got->exp_avg.data(), exp_avg.data() + r.offset(), 4 * r.count()) == 0 &&
            std::memcmp(got->exp_avg_sq.data(), exp_avg_sq.data() + r.offset(), 4 * r.count()) == 0;
  }
  double read_s = Seconds(start);
  PrintLine("checkpoint_read", "retort_ReadRange", 0, read_bytes, read_s);
  // Again with the files in the page cache: the CPU cost (allocation, copies, chunk CRCs).
  start = Clock::now();
  for (const auto& r : read_plan.ranges())
    if (!ReadRange(ckpt_dir, manifest, r.offset(), r.count()).ok()) return 1;
  PrintLine("checkpoint_read_page_cache", "retort_ReadRange", 0, read_bytes, Seconds(start));
  // From disk into buffers that already exist (as a trainer restoring its own state would):
  // no allocation or page faults in the timed part.
  std::vector<float> into_params(total, 1.f), into_avg(total, 1.f), into_avg_sq(total, 1.f);
  for (const auto& f : manifest.files()) DropFromPageCache(ckpt_dir + "/" + f.path());
  start = Clock::now();
  for (const auto& r : read_plan.ranges()) {
    retort::checkpoint::RangeBuffers out{into_params.data() + r.offset(),
                                         into_avg.data() + r.offset(),
                                         into_avg_sq.data() + r.offset()};
    if (!retort::checkpoint::ReadRangeInto(ckpt_dir, manifest, r.offset(), r.count(), out).ok())
      return 1;
  }
  const double into_s = Seconds(start);
  PrintLine("checkpoint_read", "retort_ReadRangeInto", 0, read_bytes, into_s);
  exact = exact && into_params == params && into_avg == exp_avg && into_avg_sq == exp_avg_sq;
  for (const auto& f : manifest.files()) DropFromPageCache(ckpt_dir + "/" + f.path());
  double dd_read = 0;
  for (const auto& f : manifest.files()) {
    double s = RunTimed({"dd", "if=" + ckpt_dir + "/" + f.path(), "of=/dev/null", "bs=4M"});
    if (s < 0) {
      std::fprintf(stderr, "dd read failed\n");
      return 1;
    }
    dd_read += s;
  }
  PrintLine("checkpoint_read", "dd_bs4M_to_devnull", 0, ckpt_bytes, dd_read);
  double dd_warm = 0;
  for (const auto& f : manifest.files())
    dd_warm += RunTimed({"dd", "if=" + ckpt_dir + "/" + f.path(), "of=/dev/null", "bs=4M"});
  PrintLine("checkpoint_read_page_cache", "dd_bs4M_to_devnull", 0, ckpt_bytes, dd_warm);
  const double dd_read_mbps = ckpt_bytes / dd_read / 1e6;
  std::printf(
      "{\"bench\":\"checkpoint_read\",\"compare\":\"retort/dd\",\"read_world\":%d,"
      "\"write_world\":%d,\"bit_exact\":%s,\"ReadRange_MBps\":%.1f,\"ReadRangeInto_MBps\":%.1f,"
      "\"dd_MBps\":%.1f,\"ReadRange_ratio\":%.3f,\"ReadRangeInto_ratio\":%.3f}\n",
      o.read_world, o.ranks, exact ? "true" : "false", read_bytes / read_s / 1e6,
      read_bytes / into_s / 1e6, dd_read_mbps, read_bytes / read_s / 1e6 / dd_read_mbps,
      read_bytes / into_s / 1e6 / dd_read_mbps);
  std::filesystem::remove_all(o.dir);
  return exact ? 0 : 1;
}
