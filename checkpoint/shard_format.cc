#include "checkpoint/shard_format.h"

#include <cerrno>
#include <limits>

#include "common/checksum.h"

namespace retort::checkpoint::internal {
namespace {

// Byte offsets of the header fields (see shard_file.h).
enum Field : uint64_t {
  kOffMagic = 0,
  kOffVersion = 8,
  kOffHeaderBytes = 12,
  kOffRank = 16,
  kOffWorldSize = 20,
  kOffGeneration = 24,
  kOffSeed = 32,
  kOffGlobalStep = 40,
  kOffOptimizerStep = 48,
  kOffEpoch = 56,
  kOffStepInEpoch = 64,
  kOffTotalElements = 72,
  kOffRangeOffset = 80,
  kOffRangeCount = 88,
  kOffArrays = 96,
  kOffElementBytes = 100,
  kOffChunkBytes = 104,
  kOffChunksPerArray = 112,
  kOffDataOffset = 120,
  kOffTableOffset = 128,
  kOffFileBytes = 136,
};

}  // namespace

Layout MakeLayout(const ShardHeader& header, uint64_t chunk_bytes) {
  Layout l;
  l.header = header;
  l.chunk_bytes = chunk_bytes;
  l.array_bytes = static_cast<uint64_t>(header.range_count) * kElementBytes;
  l.chunks_per_array = (l.array_bytes + chunk_bytes - 1) / chunk_bytes;
  l.data_offset = kHeaderBytes;
  l.table_offset = l.data_offset + kArrays * l.array_bytes;
  l.file_bytes = l.table_offset + kArrays * l.chunks_per_array * 4 + kTrailerBytes;
  return l;
}

void EncodeHeader(const Layout& l, unsigned char* buf) {
  std::memset(buf, 0, kHeaderBytes);
  std::memcpy(buf + kOffMagic, kMagic, sizeof(kMagic));
  Put<uint32_t>(buf, kOffVersion, kVersion);
  Put<uint32_t>(buf, kOffHeaderBytes, static_cast<uint32_t>(kHeaderBytes));
  const ShardHeader& h = l.header;
  Put<int32_t>(buf, kOffRank, h.rank);
  Put<int32_t>(buf, kOffWorldSize, h.world_size);
  Put<uint64_t>(buf, kOffGeneration, h.generation);
  Put<uint64_t>(buf, kOffSeed, h.seed);
  Put<int64_t>(buf, kOffGlobalStep, h.global_step);
  Put<int64_t>(buf, kOffOptimizerStep, h.optimizer_step);
  Put<int64_t>(buf, kOffEpoch, h.epoch);
  Put<int64_t>(buf, kOffStepInEpoch, h.step_in_epoch);
  Put<int64_t>(buf, kOffTotalElements, h.total_elements);
  Put<int64_t>(buf, kOffRangeOffset, h.range_offset);
  Put<int64_t>(buf, kOffRangeCount, h.range_count);
  Put<uint32_t>(buf, kOffArrays, kArrays);
  Put<uint32_t>(buf, kOffElementBytes, kElementBytes);
  Put<uint64_t>(buf, kOffChunkBytes, l.chunk_bytes);
  Put<uint64_t>(buf, kOffChunksPerArray, l.chunks_per_array);
  Put<uint64_t>(buf, kOffDataOffset, l.data_offset);
  Put<uint64_t>(buf, kOffTableOffset, l.table_offset);
  Put<uint64_t>(buf, kOffFileBytes, l.file_bytes);
  Put<uint32_t>(buf, kHeaderCrcOffset, Crc32c(buf, kHeaderCrcOffset));
}

StatusOr<Layout> DecodeHeader(const unsigned char* buf, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return DataLossError("checkpoint shard " + path + ": header " + what);
  };
  if (std::memcmp(buf + kOffMagic, kMagic, sizeof(kMagic)) != 0)
    return bad("magic is not RTCKPT01 (not a retort shard file)");
  uint32_t stored_crc = Get<uint32_t>(buf, kHeaderCrcOffset);
  uint32_t crc = Crc32c(buf, kHeaderCrcOffset);
  if (stored_crc != crc)
    return bad("CRC32C mismatch: stored " + Crc32cHex(stored_crc) + ", computed " + Crc32cHex(crc));
  uint32_t version = Get<uint32_t>(buf, kOffVersion);
  if (version != kVersion)
    return bad("has format version " + std::to_string(version) + "; this build reads version " +
               std::to_string(kVersion));
  if (Get<uint32_t>(buf, kOffHeaderBytes) != kHeaderBytes) return bad("size is not 4096");
  if (Get<uint32_t>(buf, kOffArrays) != kArrays) return bad("array count is not 3");
  if (Get<uint32_t>(buf, kOffElementBytes) != kElementBytes) return bad("element size is not 4");
  ShardHeader h;
  h.rank = Get<int32_t>(buf, kOffRank);
  h.world_size = Get<int32_t>(buf, kOffWorldSize);
  h.generation = Get<uint64_t>(buf, kOffGeneration);
  h.seed = Get<uint64_t>(buf, kOffSeed);
  h.global_step = Get<int64_t>(buf, kOffGlobalStep);
  h.optimizer_step = Get<int64_t>(buf, kOffOptimizerStep);
  h.epoch = Get<int64_t>(buf, kOffEpoch);
  h.step_in_epoch = Get<int64_t>(buf, kOffStepInEpoch);
  h.total_elements = Get<int64_t>(buf, kOffTotalElements);
  h.range_offset = Get<int64_t>(buf, kOffRangeOffset);
  h.range_count = Get<int64_t>(buf, kOffRangeCount);
  if (h.world_size <= 0 || h.rank < 0 || h.rank >= h.world_size)
    return bad("rank " + std::to_string(h.rank) + " / world size " + std::to_string(h.world_size) +
               " is invalid");
  if (h.total_elements < 0 || h.range_offset < 0 || h.range_count < 0 ||
      h.range_offset > h.total_elements || h.range_count > h.total_elements - h.range_offset)
    return bad("range [" + std::to_string(h.range_offset) + ", +" + std::to_string(h.range_count) +
               ") is not inside [0, " + std::to_string(h.total_elements) + ")");
  // Every size the layout derives (4 bytes per element and array, a 4-byte CRC per chunk of at
  // least 4 bytes, the file size) must fit in an off_t: 2^62 + 1 elements wrapped the array size
  // to 4 bytes, and the reader then indexed past its chunk table.
  constexpr int64_t kMaxRangeCount =
      (std::numeric_limits<int64_t>::max() - static_cast<int64_t>(kHeaderBytes + kTrailerBytes)) /
      (2 * kArrays * kElementBytes);
  if (h.range_count > kMaxRangeCount)
    return bad("range count " + std::to_string(h.range_count) +
               " is larger than any file can hold (at most " + std::to_string(kMaxRangeCount) +
               ")");
  uint64_t chunk_bytes = Get<uint64_t>(buf, kOffChunkBytes);
  if (chunk_bytes < kElementBytes || chunk_bytes > kMaxChunkBytes ||
      chunk_bytes % kElementBytes != 0)
    return bad("chunk size " + std::to_string(chunk_bytes) + " is invalid");
  Layout l = MakeLayout(h, chunk_bytes);
  if (Get<uint64_t>(buf, kOffChunksPerArray) != l.chunks_per_array ||
      Get<uint64_t>(buf, kOffDataOffset) != l.data_offset ||
      Get<uint64_t>(buf, kOffTableOffset) != l.table_offset ||
      Get<uint64_t>(buf, kOffFileBytes) != l.file_bytes)
    return bad("layout fields (chunks, data/table offsets, file size) are inconsistent");
  return l;
}

Status ErrnoError(const std::string& what, const std::string& path, int err) {
  std::string message =
      what + " " + path + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")";
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return ResourceExhaustedError(std::move(message));
    case EACCES:
    case EPERM:
    case EROFS:
      return Status(StatusCode::kPermissionDenied, std::move(message));
    case ENOENT:
      return NotFoundError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

}  // namespace retort::checkpoint::internal
