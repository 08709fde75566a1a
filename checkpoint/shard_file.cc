// WriteShard: one sequential pass over the caller's arrays. Each chunk is checksummed while
// it is cache-hot and then handed to write(2); the whole-file CRC is combined from the chunk
// CRCs. Writeback is started periodically (sync_file_range) so the closing fsync is short.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <vector>

#include "checkpoint/crc32c_combine.h"
#include "checkpoint/shard_format.h"
#include "common/checksum.h"
#include "common/file_util.h"

namespace retort::checkpoint {
namespace {

using internal::ErrnoError;
using internal::kArrays;
using internal::Layout;

constexpr int64_t kMaxElements = int64_t{1} << 60;
constexpr uint64_t kWriteBytes = 1 << 20;

Status ValidateShard(const ShardView& s, const WriteOptions& options) {
  const ShardHeader& h = s.header;
  if (h.world_size <= 0 || h.rank < 0 || h.rank >= h.world_size)
    return InvalidArgumentError("shard header: rank " + std::to_string(h.rank) +
                                " is not in [0, world_size=" + std::to_string(h.world_size) + ")");
  if (h.total_elements < 0 || h.total_elements > kMaxElements || h.range_offset < 0 ||
      h.range_count < 0 || h.range_offset > h.total_elements ||
      h.range_count > h.total_elements - h.range_offset)
    return InvalidArgumentError("shard header: range [" + std::to_string(h.range_offset) + ", +" +
                                std::to_string(h.range_count) + ") is not inside [0, " +
                                std::to_string(h.total_elements) + ")");
  if (h.range_count > 0 && (!s.params || !s.exp_avg || !s.exp_avg_sq))
    return InvalidArgumentError("shard view: params, exp_avg and exp_avg_sq must be non-null");
  if (options.chunk_bytes < internal::kElementBytes ||
      options.chunk_bytes > internal::kMaxChunkBytes ||
      options.chunk_bytes % internal::kElementBytes != 0)
    return InvalidArgumentError("write options: chunk_bytes " +
                                std::to_string(options.chunk_bytes) +
                                " must be a multiple of 4 in [4, 2^30]");
  return Status::Ok();
}

// Owns the temp file until Commit(); removes it on every other path.
class TempShardFile {
 public:
  TempShardFile(std::string path, uint64_t writeback_every)
      : path_(std::move(path)), writeback_every_(writeback_every) {}
  ~TempShardFile() {
    if (fd_ >= 0) ::close(fd_);
    if (created_) ::unlink(path_.c_str());
  }
  TempShardFile(const TempShardFile&) = delete;
  TempShardFile& operator=(const TempShardFile&) = delete;

  Status Create() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) return ErrnoError("create checkpoint temp file", path_, errno);
    created_ = true;
    return Status::Ok();
  }

  Status Write(const void* data, size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
      ssize_t n = ::write(fd_, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("write (at byte " + std::to_string(written_) + ") of", path_, errno);
      }
      if (n == 0) return ErrnoError("write (no progress) of", path_, EIO);
      p += n;
      size -= static_cast<size_t>(n);
      written_ += static_cast<uint64_t>(n);
    }
    if (writeback_every_ > 0 && written_ - writeback_started_ >= writeback_every_) {
      // Asynchronous: queues the dirty pages for writeback without waiting for them.
      // Only an optimization: where a filesystem refuses it, the closing fsync does the work.
      if (::sync_file_range(fd_, static_cast<off_t>(writeback_started_),
                            static_cast<off_t>(written_ - writeback_started_),
                            SYNC_FILE_RANGE_WRITE) != 0)
        writeback_every_ = 0;
      writeback_started_ = written_;
    }
    return Status::Ok();
  }

  // fsync, close, rename over `final_path`.
  Status Commit(const std::string& final_path) {
    if (::fsync(fd_) != 0) return ErrnoError("fsync of", path_, errno);
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoError("close of", path_, errno);
    if (::rename(path_.c_str(), final_path.c_str()) != 0)
      return ErrnoError("rename to " + final_path + " of", path_, errno);
    created_ = false;
    return Status::Ok();
  }

  uint64_t written() const { return written_; }

 private:
  const std::string path_;
  uint64_t writeback_every_;
  int fd_ = -1;
  bool created_ = false;
  uint64_t written_ = 0;
  uint64_t writeback_started_ = 0;
};

std::string TempName(const std::string& final_path) {
  static std::atomic<uint64_t> counter{0};
  return final_path + ".tmp-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

}  // namespace

std::string ShardFileName(int32_t rank) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "shard-%05d.bin", static_cast<int>(rank));
  return buf;
}

StatusOr<v1::CheckpointFile> WriteShard(const std::string& dir, const ShardView& shard,
                                        const WriteOptions& options) {
  RETORT_RETURN_IF_ERROR(ValidateShard(shard, options));
  if (dir.empty()) return InvalidArgumentError("checkpoint directory is empty");
  RETORT_RETURN_IF_ERROR(MakeDirectories(dir));
  const Layout layout = internal::MakeLayout(shard.header, options.chunk_bytes);
  const std::string name = ShardFileName(shard.header.rank);
  const std::string final_path = dir + "/" + name;
  TempShardFile file(TempName(final_path), options.writeback_every_bytes);
  RETORT_RETURN_IF_ERROR(file.Create());

  unsigned char header[internal::kHeaderBytes];
  internal::EncodeHeader(layout, header);
  RETORT_RETURN_IF_ERROR(file.Write(header, sizeof(header)));
  uint32_t file_crc = Crc32c(header, sizeof(header));

  const uint32_t full_chunk_shift = Crc32cShiftOperator(layout.chunk_bytes);
  std::vector<uint32_t> table;
  table.reserve(kArrays * layout.chunks_per_array + 2);
  const float* arrays[kArrays] = {shard.params, shard.exp_avg, shard.exp_avg_sq};
  for (uint32_t a = 0; a < kArrays; ++a) {
    const auto* base = reinterpret_cast<const unsigned char*>(arrays[a]);
    // Bytes [pending, c * chunk_bytes) are checksummed but not yet written: one write(2) per
    // kWriteBytes keeps the syscall count low for small chunks and the data cache-hot.
    uint64_t pending = 0;
    for (uint64_t c = 0; c < layout.chunks_per_array; ++c) {
      const uint64_t begin = c * layout.chunk_bytes;
      const uint64_t size = layout.ChunkSize(c);
      const uint32_t crc = Crc32c(base + begin, size);
      table.push_back(crc);
      file_crc = size == layout.chunk_bytes
                     ? Crc32cCombineWithOperator(file_crc, crc, full_chunk_shift)
                     : Crc32cCombine(file_crc, crc, size);
      const uint64_t end = begin + size;
      if (end - pending >= kWriteBytes || end == layout.array_bytes) {
        RETORT_RETURN_IF_ERROR(file.Write(base + pending, end - pending));
        pending = end;
      }
    }
  }
  const uint64_t table_bytes = table.size() * sizeof(uint32_t);
  unsigned char trailer[internal::kTrailerBytes] = {};
  internal::Put<uint32_t>(trailer, 0, Crc32c(table.data(), table_bytes));
  std::memcpy(trailer + 8, internal::kEndMagic, sizeof(internal::kEndMagic));
  file_crc = Crc32cExtend(file_crc, table.data(), table_bytes);
  file_crc = Crc32cExtend(file_crc, trailer, sizeof(trailer));
  RETORT_RETURN_IF_ERROR(file.Write(table.data(), table_bytes));
  RETORT_RETURN_IF_ERROR(file.Write(trailer, sizeof(trailer)));
  if (file.written() != layout.file_bytes)
    return InternalError("shard writer produced " + std::to_string(file.written()) +
                         " bytes, layout says " + std::to_string(layout.file_bytes));
  RETORT_RETURN_IF_ERROR(file.Commit(final_path));
  Status synced = SyncDirectory(dir);
  if (!synced.ok()) {
    // The rename may not survive a crash; the shard was never acked, so withdraw it.
    ::unlink(final_path.c_str());
    return synced.WithContext("checkpoint shard " + final_path);
  }

  v1::CheckpointFile ack;
  ack.set_path(name);
  ack.set_size_bytes(static_cast<int64_t>(layout.file_bytes));
  ack.set_crc32c(file_crc);
  ack.set_rank(shard.header.rank);
  return ack;
}

}  // namespace retort::checkpoint
