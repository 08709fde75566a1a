#include "checkpoint/shard_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <vector>

#include "checkpoint/shard_format.h"
#include "common/checksum.h"

namespace retort::checkpoint {
namespace {

using internal::kArrays;
using internal::Layout;

// Consecutive whole chunks are read with one pread of at most this many bytes.
constexpr uint64_t kMaxReadBytes = 8ull << 20;

// The manifest, checked and indexed by rank.
struct ManifestIndex {
  int64_t total_elements = 0;
  std::vector<v1::ShardRange> range_of_rank;
  std::vector<const v1::CheckpointFile*> file_of_rank;
};

bool SafeRelativePath(const std::string& p) {
  if (p.empty() || p[0] == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    if (p.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return true;
}

StatusOr<ManifestIndex> IndexManifest(const v1::CheckpointManifest& m) {
  const std::string what = "checkpoint manifest " + std::to_string(m.checkpoint_id()) + ": ";
  const auto& plan = m.plan();
  const int world = plan.ranges_size();
  if (world == 0) return DataLossError(what + "plan has no ranges");
  if (m.world_size() != world)
    return DataLossError(what + "world_size " + std::to_string(m.world_size()) +
                         " but the plan has " + std::to_string(world) + " ranges");
  ManifestIndex index;
  index.total_elements = plan.total_elements();
  index.range_of_rank.resize(world);
  index.file_of_rank.assign(world, nullptr);
  std::vector<bool> seen(world, false);
  for (const auto& r : plan.ranges()) {
    if (r.rank() < 0 || r.rank() >= world || seen[r.rank()])
      return DataLossError(what + "plan range rank " + std::to_string(r.rank()) +
                           " is out of [0, " + std::to_string(world) + ") or repeated");
    seen[r.rank()] = true;
    index.range_of_rank[r.rank()] = r;
  }
  std::vector<v1::ShardRange> by_offset = index.range_of_rank;
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) {
    return a.offset() != b.offset() ? a.offset() < b.offset() : a.rank() < b.rank();
  });
  int64_t next = 0;
  for (const auto& r : by_offset) {
    if (r.offset() != next || r.count() < 0 || r.count() > index.total_elements - next)
      return DataLossError(
          what + "plan ranges do not tile [0, " + std::to_string(index.total_elements) +
          ") (rank " + std::to_string(r.rank()) + " has [" + std::to_string(r.offset()) + ", +" +
          std::to_string(r.count()) + "), expected offset " + std::to_string(next) + ")");
    next += r.count();
  }
  if (next != index.total_elements)
    return DataLossError(what + "plan ranges cover " + std::to_string(next) + " of " +
                         std::to_string(index.total_elements) + " elements");
  for (const auto& f : m.files()) {
    if (!f.kind().empty()) continue;  // a blob beside the shards (blob_file.h)
    if (f.rank() < 0 || f.rank() >= world || index.file_of_rank[f.rank()] != nullptr)
      return DataLossError(what + "file '" + f.path() + "' has rank " + std::to_string(f.rank()) +
                           ", out of [0, " + std::to_string(world) + ") or repeated");
    if (!SafeRelativePath(f.path()))
      return DataLossError(what + "file path '" + f.path() + "' is not relative without '..'");
    index.file_of_rank[f.rank()] = &f;
  }
  for (int r = 0; r < world; ++r)
    if (index.file_of_rank[r] == nullptr)
      return DataLossError(what + "lists no file for rank " + std::to_string(r));
  return index;
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens `path` read-only and checks its size against the manifest.
StatusOr<std::unique_ptr<FileDescriptor>> OpenChecked(const std::string& path,
                                                      int64_t manifest_size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    Status st = internal::ErrnoError("open checkpoint shard", path, err);
    return err == ENOENT ? DataLossError(st.message()) : st;
  }
  auto file = std::make_unique<FileDescriptor>(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return internal::ErrnoError("fstat of checkpoint shard", path, errno);
  if (st.st_size != manifest_size)
    return DataLossError("checkpoint shard " + path + " is " + std::to_string(st.st_size) +
                         " bytes, the manifest says " + std::to_string(manifest_size) +
                         (st.st_size < manifest_size ? " (truncated)" : ""));
  return file;
}

Status PreadFull(int fd, const std::string& path, uint64_t offset, void* dest, uint64_t size) {
  auto* p = static_cast<char*>(dest);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return internal::ErrnoError("read (at byte " + std::to_string(offset) + ") of", path, errno);
    }
    if (n == 0)
      return DataLossError("checkpoint shard " + path + " ends at byte " + std::to_string(offset) +
                           " (truncated)");
    p += n;
    size -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

// One opened, header-checked shard file.
struct OpenShard {
  std::string path;
  std::unique_ptr<FileDescriptor> fd;
  Layout layout;
  std::vector<uint32_t> chunk_crcs;  // array-major; empty until LoadChunkTable
};

StatusOr<OpenShard> OpenAndCheckShard(const std::string& dir, const v1::CheckpointManifest& m,
                                      const ManifestIndex& index, int rank) {
  const v1::CheckpointFile& file = *index.file_of_rank[rank];
  OpenShard s;
  s.path = dir + "/" + file.path();
  RETORT_ASSIGN_OR_RETURN(s.fd, OpenChecked(s.path, file.size_bytes()));
  unsigned char header[internal::kHeaderBytes];
  if (static_cast<uint64_t>(file.size_bytes()) < sizeof(header))
    return DataLossError("checkpoint shard " + s.path + " is " + std::to_string(file.size_bytes()) +
                         " bytes, shorter than its header");
  RETORT_RETURN_IF_ERROR(PreadFull(s.fd->get(), s.path, 0, header, sizeof(header)));
  RETORT_ASSIGN_OR_RETURN(s.layout, internal::DecodeHeader(header, s.path));
  const ShardHeader& h = s.layout.header;
  const v1::ShardRange& range = index.range_of_rank[rank];
  auto mismatch = [&](const std::string& field, const std::string& in_file,
                      const std::string& in_manifest) {
    return DataLossError("checkpoint shard " + s.path + ": header " + field + " is " + in_file +
                         ", the manifest says " + in_manifest);
  };
  if (h.rank != rank) return mismatch("rank", std::to_string(h.rank), std::to_string(rank));
  if (h.world_size != m.world_size())
    return mismatch("world_size", std::to_string(h.world_size), std::to_string(m.world_size()));
  if (h.total_elements != index.total_elements)
    return mismatch("total_elements", std::to_string(h.total_elements),
                    std::to_string(index.total_elements));
  if (h.range_offset != range.offset() || h.range_count != range.count())
    return mismatch(
        "range", "[" + std::to_string(h.range_offset) + ", +" + std::to_string(h.range_count) + ")",
        "[" + std::to_string(range.offset()) + ", +" + std::to_string(range.count()) + ")");
  if (h.generation != m.generation())
    return mismatch("generation", std::to_string(h.generation), std::to_string(m.generation()));
  if (h.global_step != m.step())
    return mismatch("global_step", std::to_string(h.global_step), std::to_string(m.step()));
  if (s.layout.file_bytes != static_cast<uint64_t>(file.size_bytes()))
    return mismatch("file size", std::to_string(s.layout.file_bytes),
                    std::to_string(file.size_bytes()));
  return s;
}

Status LoadChunkTable(OpenShard* s) {
  const Layout& l = s->layout;
  const uint64_t entries = kArrays * l.chunks_per_array;
  std::vector<unsigned char> buf(entries * 4 + internal::kTrailerBytes);
  RETORT_RETURN_IF_ERROR(PreadFull(s->fd->get(), s->path, l.table_offset, buf.data(), buf.size()));
  const unsigned char* trailer = buf.data() + entries * 4;
  if (std::memcmp(trailer + 8, internal::kEndMagic, sizeof(internal::kEndMagic)) != 0)
    return DataLossError("checkpoint shard " + s->path + ": trailer magic is not RTCKEND1");
  uint32_t stored = internal::Get<uint32_t>(trailer, 0);
  uint32_t computed = Crc32c(buf.data(), entries * 4);
  if (stored != computed)
    return DataLossError("checkpoint shard " + s->path + ": chunk CRC table fails CRC32C: stored " +
                         Crc32cHex(stored) + ", computed " + Crc32cHex(computed));
  s->chunk_crcs.resize(entries);
  std::memcpy(s->chunk_crcs.data(), buf.data(), entries * 4);
  return Status::Ok();
}

Status VerifyChunk(const OpenShard& s, uint32_t array, uint64_t chunk, const unsigned char* data) {
  const Layout& l = s.layout;
  const uint64_t size = l.ChunkSize(chunk);
  const uint32_t stored = s.chunk_crcs[array * l.chunks_per_array + chunk];
  const uint32_t computed = Crc32c(data, size);
  if (stored == computed) return Status::Ok();
  const uint64_t begin = l.ArrayOffset(array) + chunk * l.chunk_bytes;
  return DataLossError("checkpoint shard " + s.path + ": chunk " + std::to_string(chunk) + " of " +
                       internal::kArrayNames[array] + " (file bytes [" + std::to_string(begin) +
                       ", " + std::to_string(begin + size) + ")) fails CRC32C: stored " +
                       Crc32cHex(stored) + ", computed " + Crc32cHex(computed));
}

// Reads bytes [lo, hi) of `array` into dest, reading and verifying whole chunks: chunks inside
// [lo, hi) go straight into dest, the partial chunks at either end through a scratch buffer.
Status ReadArrayBytes(const OpenShard& s, uint32_t array, uint64_t lo, uint64_t hi,
                      unsigned char* dest) {
  const Layout& l = s.layout;
  const uint64_t base = l.ArrayOffset(array);
  std::vector<unsigned char> scratch;
  uint64_t c = lo / l.chunk_bytes;
  const uint64_t c_end = (hi + l.chunk_bytes - 1) / l.chunk_bytes;
  while (c < c_end) {
    const uint64_t begin = c * l.chunk_bytes;
    const uint64_t end = begin + l.ChunkSize(c);
    if (begin >= lo && end <= hi) {
      uint64_t last = c, batch_end = end;
      while (last + 1 < c_end) {
        uint64_t next_end = (last + 1) * l.chunk_bytes + l.ChunkSize(last + 1);
        if (next_end > hi || next_end - begin > kMaxReadBytes) break;
        ++last;
        batch_end = next_end;
      }
      unsigned char* out = dest + (begin - lo);
      RETORT_RETURN_IF_ERROR(PreadFull(s.fd->get(), s.path, base + begin, out, batch_end - begin));
      for (uint64_t k = c; k <= last; ++k)
        RETORT_RETURN_IF_ERROR(VerifyChunk(s, array, k, out + (k - c) * l.chunk_bytes));
      c = last + 1;
    } else {
      scratch.resize(end - begin);
      RETORT_RETURN_IF_ERROR(
          PreadFull(s.fd->get(), s.path, base + begin, scratch.data(), scratch.size()));
      RETORT_RETURN_IF_ERROR(VerifyChunk(s, array, c, scratch.data()));
      const uint64_t from = std::max(lo, begin), to = std::min(hi, end);
      std::memcpy(dest + (from - lo), scratch.data() + (from - begin), to - from);
      ++c;
    }
  }
  return Status::Ok();
}

Status CheckAgrees(const ShardHeader& first, const std::string& first_path, const OpenShard& s) {
  const ShardHeader& h = s.layout.header;
  auto differ = [&](const char* field, int64_t a, int64_t b) {
    return DataLossError("checkpoint shards disagree on " + std::string(field) + ": " + first_path +
                         " has " + std::to_string(a) + ", " + s.path + " has " + std::to_string(b));
  };
  if (h.seed != first.seed)
    return differ("seed", static_cast<int64_t>(first.seed), static_cast<int64_t>(h.seed));
  if (h.optimizer_step != first.optimizer_step)
    return differ("optimizer_step", first.optimizer_step, h.optimizer_step);
  if (h.epoch != first.epoch) return differ("epoch", first.epoch, h.epoch);
  if (h.step_in_epoch != first.step_in_epoch)
    return differ("step_in_epoch", first.step_in_epoch, h.step_in_epoch);
  // generation, global_step, world_size and total_elements were checked against the manifest.
  return Status::Ok();
}

}  // namespace

StatusOr<ShardHeader> ReadRangeInto(const std::string& dir, const v1::CheckpointManifest& manifest,
                                    int64_t offset, int64_t count, const RangeBuffers& out) {
  RETORT_ASSIGN_OR_RETURN(ManifestIndex index, IndexManifest(manifest));
  if (offset < 0 || count < 0 || offset > index.total_elements ||
      count > index.total_elements - offset)
    return OutOfRangeError("checkpoint read [" + std::to_string(offset) + ", +" +
                           std::to_string(count) + ") is not inside [0, " +
                           std::to_string(index.total_elements) + ")");
  if (count > 0 && (!out.params || !out.exp_avg || !out.exp_avg_sq))
    return InvalidArgumentError("checkpoint read: destination buffers must be non-null");
  float* dest[kArrays] = {out.params, out.exp_avg, out.exp_avg_sq};
  ShardHeader header;
  std::string first_path;
  const int64_t end = offset + count;
  for (int rank = 0; rank < static_cast<int>(index.range_of_rank.size()); ++rank) {
    const v1::ShardRange& r = index.range_of_rank[rank];
    const int64_t lo = std::max(offset, r.offset()), hi = std::min(end, r.offset() + r.count());
    bool overlaps = lo < hi;
    // count == 0: one header, from the shard holding `offset` (or ending at it).
    bool header_only = count == 0 && first_path.empty() && r.offset() <= offset &&
                       (offset < r.offset() + r.count() || offset == index.total_elements);
    if (!overlaps && !header_only) continue;
    RETORT_ASSIGN_OR_RETURN(OpenShard s, OpenAndCheckShard(dir, manifest, index, rank));
    if (first_path.empty()) {
      header = s.layout.header;
      header.range_offset = offset;
      header.range_count = count;
      first_path = s.path;
    } else {
      RETORT_RETURN_IF_ERROR(CheckAgrees(header, first_path, s));
    }
    if (!overlaps) continue;
    RETORT_RETURN_IF_ERROR(LoadChunkTable(&s));
    const uint64_t byte_lo = static_cast<uint64_t>(lo - r.offset()) * internal::kElementBytes;
    const uint64_t byte_hi = static_cast<uint64_t>(hi - r.offset()) * internal::kElementBytes;
    // Ask for all three slices up front so the disk works while chunks are verified and copied.
    for (uint32_t a = 0; a < kArrays; ++a) {
      const uint64_t from = byte_lo / s.layout.chunk_bytes * s.layout.chunk_bytes;
      const uint64_t to =
          std::min(s.layout.array_bytes, (byte_hi + s.layout.chunk_bytes - 1) /
                                             s.layout.chunk_bytes * s.layout.chunk_bytes);
      (void)::posix_fadvise(s.fd->get(), static_cast<off_t>(s.layout.ArrayOffset(a) + from),
                            static_cast<off_t>(to - from), POSIX_FADV_WILLNEED);
    }
    for (uint32_t a = 0; a < kArrays; ++a) {
      auto* d = reinterpret_cast<unsigned char*>(dest[a] + (lo - offset));
      RETORT_RETURN_IF_ERROR(ReadArrayBytes(s, a, byte_lo, byte_hi, d));
    }
  }
  if (first_path.empty())
    return DataLossError("checkpoint manifest " + std::to_string(manifest.checkpoint_id()) +
                         ": no shard holds element " + std::to_string(offset));
  return header;
}

StatusOr<RangeState> ReadRange(const std::string& dir, const v1::CheckpointManifest& manifest,
                               int64_t offset, int64_t count) {
  RangeState out;
  if (count > 0) {
    out.params.resize(static_cast<size_t>(count));
    out.exp_avg.resize(static_cast<size_t>(count));
    out.exp_avg_sq.resize(static_cast<size_t>(count));
  }
  RangeBuffers buffers{out.params.data(), out.exp_avg.data(), out.exp_avg_sq.data()};
  RETORT_ASSIGN_OR_RETURN(out.header, ReadRangeInto(dir, manifest, offset, count, buffers));
  return out;
}

Status VerifyCheckpoint(const std::string& dir, const v1::CheckpointManifest& manifest) {
  RETORT_ASSIGN_OR_RETURN(ManifestIndex index, IndexManifest(manifest));
  std::vector<unsigned char> buf(kMaxReadBytes);
  std::vector<const v1::CheckpointFile*> files = index.file_of_rank;
  for (const auto& f : manifest.files())
    if (!f.kind().empty()) files.push_back(&f);
  for (const v1::CheckpointFile* f : files) {
    if (!SafeRelativePath(f->path()))
      return DataLossError("checkpoint file path '" + f->path() + "' is not relative without '..'");
    const std::string path = dir + "/" + f->path();
    RETORT_ASSIGN_OR_RETURN(auto fd, OpenChecked(path, f->size_bytes()));
    uint32_t crc = 0;
    uint64_t offset = 0, size = static_cast<uint64_t>(f->size_bytes());
    while (offset < size) {
      uint64_t n = std::min<uint64_t>(buf.size(), size - offset);
      RETORT_RETURN_IF_ERROR(PreadFull(fd->get(), path, offset, buf.data(), n));
      crc = Crc32cExtend(crc, buf.data(), n);
      offset += n;
    }
    if (crc != f->crc32c())
      return DataLossError("checkpoint shard " + path + " fails its whole-file CRC32C: manifest " +
                           Crc32cHex(f->crc32c()) + ", file " + Crc32cHex(crc));
  }
  return Status::Ok();
}

}  // namespace retort::checkpoint
