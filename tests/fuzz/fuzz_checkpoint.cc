// libFuzzer harness: the checkpoint readers (checkpoint/shard_reader.h, blob_file.h) on hostile
// manifests and shard files, as a worker meets them in a shared checkpoint directory.
//
// Input: MANIFEST.json text, "\n--SHARD--\n", then the bytes of the shard file(s). Without the
// separator the whole input is one shard file and the manifest is derived from its header, so
// that the fuzzer spends its time past the manifest checks. To get past checksums, the harness
// recomputes the header CRC, the chunk CRCs and the chunk-table CRC of the shard bytes it
// writes (their mismatches are covered by tests/checkpoint/shard_corruption_test.cc), and sets
// every listed file's size in the manifest to the size written. Each listed file (up to 4) gets
// the same bytes. Any input must give data or an error, never a crash or a read out of bounds.
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/blob_file.h"
#include "checkpoint/shard_file.h"
#include "checkpoint/shard_format.h"
#include "checkpoint/shard_reader.h"
#include "common/checksum.h"
#include "tests/fuzz/fuzz_util.h"

namespace retort {
namespace {

using checkpoint::internal::Get;
using checkpoint::internal::kHeaderBytes;
using checkpoint::internal::kHeaderCrcOffset;
using checkpoint::internal::Put;

// Recomputes the CRCs a shard file carries, where its header's layout fields fit the bytes.
void FixChecksums(std::string* shard) {
  if (shard->size() < kHeaderBytes) return;
  auto* b = reinterpret_cast<unsigned char*>(shard->data());
  Put<uint32_t>(b, kHeaderCrcOffset, Crc32c(b, kHeaderCrcOffset));
  // The layout as the header states it, in the reader's (wrapping, unsigned) arithmetic.
  const uint64_t count = Get<uint64_t>(b, 88);
  const uint64_t chunk = Get<uint64_t>(b, 104), chunks = Get<uint64_t>(b, 112);
  const uint64_t table = Get<uint64_t>(b, 128), size = shard->size();
  if (chunk == 0 || chunks > size || table > size || table + 12 * chunks + 16 != size) return;
  const uint64_t array_bytes = count * 4;
  for (uint64_t a = 0; a < 3; ++a) {
    for (uint64_t k = 0; k < chunks; ++k) {
      const uint64_t begin = kHeaderBytes + a * array_bytes + k * chunk;
      const uint64_t n = std::min(chunk, array_bytes - k * chunk);
      if (begin > size || n > size - begin) continue;
      Put<uint32_t>(b, table + (a * chunks + k) * 4, Crc32c(b + begin, n));
    }
  }
  Put<uint32_t>(b, table + 12 * chunks, Crc32c(b + table, 12 * chunks));
}

// The manifest of a one-rank checkpoint whose header is `shard`'s.
v1::CheckpointManifest ManifestFromHeader(const std::string& shard) {
  v1::CheckpointManifest m;
  m.set_checkpoint_id(1);
  auto* file = m.add_files();
  file->set_path(checkpoint::ShardFileName(0));
  if (shard.size() < kHeaderBytes) {
    m.set_world_size(1);
    m.mutable_plan()->set_total_elements(4);
    auto* r = m.mutable_plan()->add_ranges();
    r->set_count(4);
    return m;
  }
  const auto* b = reinterpret_cast<const unsigned char*>(shard.data());
  const int32_t rank = Get<int32_t>(b, 16), world = Get<int32_t>(b, 20);
  m.set_generation(Get<uint64_t>(b, 24));
  m.set_step(Get<int64_t>(b, 40));
  m.set_world_size(std::clamp(world, 1, 4));
  const int64_t total = Get<int64_t>(b, 72), offset = Get<int64_t>(b, 80),
                count = Get<int64_t>(b, 88);
  m.mutable_plan()->set_total_elements(total);
  // The header's own range for its rank; the rest of [0, total) for the other ranks.
  int next_rank = 0;
  auto add = [&](int r, int64_t o, int64_t c) {
    auto* range = m.mutable_plan()->add_ranges();
    range->set_rank(r);
    range->set_offset(o);
    range->set_count(c);
  };
  const int own = std::clamp(rank, 0, m.world_size() - 1);
  file->set_rank(own);
  for (int r = 0; r < m.world_size(); ++r) {
    if (r == own) {
      add(r, offset, count);
      continue;
    }
    // Wrapping arithmetic: the header's fields are arbitrary (the readers must refuse them).
    const auto end =
        static_cast<int64_t>(static_cast<uint64_t>(offset) + static_cast<uint64_t>(count));
    const auto rest =
        static_cast<int64_t>(static_cast<uint64_t>(total) - static_cast<uint64_t>(end));
    add(r, next_rank == 0 ? 0 : end, next_rank == 0 ? offset : rest);
    ++next_rank;
    auto* f = m.add_files();
    f->set_path(checkpoint::ShardFileName(r));
    f->set_rank(r);
  }
  return m;
}

// Reads the checkpoint in `dir` the ways a worker does: a header only, the whole state when
// small, a range in the middle, a full verify, and the blobs.
void ReadEveryWay(const std::string& dir, const v1::CheckpointManifest& m, bool verify) {
  const int64_t total = m.plan().total_elements();
  (void)checkpoint::ReadRange(dir, m, 0, 0);
  if (total > 0 && total <= (1 << 16)) (void)checkpoint::ReadRange(dir, m, 0, total);
  // Small reads at the start of a huge range (whose layout arithmetic is the stretch).
  if (total > (1 << 16))
    for (int64_t n : {1, 3, 16}) (void)checkpoint::ReadRange(dir, m, 0, n);
  if (total > 2)
    (void)checkpoint::ReadRange(dir, m, total / 2 - 1, std::min<int64_t>(total / 2, 3));
  std::vector<float> p(8), a(8), s(8);
  (void)checkpoint::ReadRangeInto(dir, m, std::max<int64_t>(total - 8, 0),
                                  std::clamp<int64_t>(total, 0, 8), {p.data(), a.data(), s.data()});
  // VerifyCheckpoint allocates an 8 MiB buffer per call: on every other input only, so the
  // fuzzer keeps its pace.
  if (verify) (void)checkpoint::VerifyCheckpoint(dir, m);
  for (const auto& f : m.files())
    if (!f.kind().empty()) (void)checkpoint::ReadBlobFile(dir, f);
  if (const auto* blob = checkpoint::FindFileOfKind(m, checkpoint::kModelBuffersKind))
    (void)checkpoint::ReadBlobFile(dir, *blob);
}

// Seeds from the real writer: shard files alone (the manifest derived) and with a manifest.
void WriteSeeds(const std::string& out) {
  fuzz::ResetDir(out);
  const std::string dir = fuzz::ScratchDir() + "/seeds";
  struct Seed {
    const char* name;
    int64_t count;
    uint64_t chunk_bytes;
    bool with_manifest;
  };
  for (const Seed& seed :
       {Seed{"shard_10_elements", 10, 16, false}, Seed{"shard_empty_range", 0, 4, false},
        Seed{"manifest_and_shard", 6, 8, true}}) {
    fuzz::ResetDir(dir);
    std::vector<float> p(seed.count, 1.5f), a(seed.count, 0.25f), v(seed.count, 0.125f);
    checkpoint::ShardView view;
    view.header.rank = 0;
    view.header.world_size = 1;
    view.header.generation = 3;
    view.header.seed = 1234;
    view.header.global_step = 40;
    view.header.optimizer_step = 40;
    view.header.total_elements = seed.count;
    view.header.range_count = seed.count;
    view.params = p.data();
    view.exp_avg = a.data();
    view.exp_avg_sq = v.data();
    checkpoint::WriteOptions options;
    options.chunk_bytes = seed.chunk_bytes;
    auto file = checkpoint::WriteShard(dir, view, options);
    if (!file.ok()) std::abort();
    std::FILE* f = std::fopen((dir + "/" + file->path()).c_str(), "rb");
    std::string bytes;
    char buf[4096];
    for (size_t n; f && (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) bytes.append(buf, n);
    if (f) std::fclose(f);
    std::string input = bytes;
    if (seed.with_manifest) {
      v1::CheckpointManifest m;
      m.set_checkpoint_id(1);
      m.set_step(40);
      m.set_generation(3);
      m.set_world_size(1);
      m.mutable_plan()->set_total_elements(seed.count);
      m.mutable_plan()->add_ranges()->set_count(seed.count);
      *m.add_files() = *file;
      auto* blob = m.add_files();
      blob->set_path(checkpoint::kModelBuffersFile);
      blob->set_kind(checkpoint::kModelBuffersKind);
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(m, &json);
      input = json + "\n--SHARD--\n" + bytes;
    }
    fuzz::WriteFile(out + "/" + seed.name, input);
  }
}

}  // namespace
}  // namespace retort

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* out = std::getenv("RETORT_FUZZ_WRITE_SEEDS")) {
    retort::WriteSeeds(out);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retort;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  bool has_manifest = false;
  auto [manifest_text, shard_bytes] = fuzz::SplitAt(input, "\n--SHARD--\n", &has_manifest);
  std::string shard(has_manifest ? shard_bytes : input);
  FixChecksums(&shard);
  v1::CheckpointManifest manifest;
  if (has_manifest) {
    if (!google::protobuf::util::JsonStringToMessage(std::string(manifest_text), &manifest).ok())
      return 0;
  } else {
    manifest = ManifestFromHeader(shard);
  }
  const std::string dir = fuzz::ScratchDir() + "/ckpt";
  fuzz::ResetDir(dir);
  int written = 0;
  for (auto& f : *manifest.mutable_files()) {
    f.set_size_bytes(static_cast<int64_t>(shard.size()));
    f.set_crc32c(Crc32c(shard));
    // Plain names only: the harness must not write outside its directory (the readers' own
    // path checks are fuzzed all the same, as the name stays in the manifest).
    const std::string& p = f.path();
    if (written < 4 && !p.empty() && p.size() < 64 && p.find('/') == std::string::npos &&
        p != "." && p != "..") {
      fuzz::WriteFile(dir + "/" + p, shard);
      ++written;
    }
  }
  ReadEveryWay(dir, manifest, size > 0 && (data[size - 1] & 1));
  return 0;
}
