// Internal to retort_checkpoint: constants and (de)serialization of the shard file layout
// documented in checkpoint/shard_file.h, shared by the writer and the reader.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "checkpoint/shard_file.h"
#include "common/status.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "retort checkpoint files are little-endian and written with memcpy: little-endian hosts only"
#endif

namespace retort::checkpoint::internal {

inline constexpr char kMagic[8] = {'R', 'T', 'C', 'K', 'P', 'T', '0', '1'};
inline constexpr char kEndMagic[8] = {'R', 'T', 'C', 'K', 'E', 'N', 'D', '1'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint64_t kHeaderBytes = 4096;
inline constexpr uint64_t kHeaderCrcOffset = kHeaderBytes - 4;
inline constexpr uint32_t kArrays = 3;
inline constexpr uint32_t kElementBytes = 4;
inline constexpr uint64_t kTrailerBytes = 16;
inline constexpr uint64_t kMaxChunkBytes = 1ull << 30;
inline constexpr const char* kArrayNames[kArrays] = {"params", "exp_avg", "exp_avg_sq"};

// Derived sizes of one shard file.
struct Layout {
  ShardHeader header;
  uint64_t chunk_bytes = 0;
  uint64_t array_bytes = 0;       // 4 * range_count
  uint64_t chunks_per_array = 0;  // ceil(array_bytes / chunk_bytes)
  uint64_t data_offset = kHeaderBytes;
  uint64_t table_offset = 0;
  uint64_t file_bytes = 0;

  uint64_t ArrayOffset(uint32_t array) const { return data_offset + array * array_bytes; }
  uint64_t ChunkSize(uint64_t chunk) const {
    uint64_t begin = chunk * chunk_bytes;
    return std::min(chunk_bytes, array_bytes - begin);
  }
};

// Requires a valid chunk size and range_count >= 0.
Layout MakeLayout(const ShardHeader& header, uint64_t chunk_bytes);

// Fills buf[0, kHeaderBytes) including the header CRC.
void EncodeHeader(const Layout& layout, unsigned char* buf);
// Parses and checks a header read from `path` (magic, version, CRC, internal consistency).
// Errors are DATA_LOSS naming `path`.
StatusOr<Layout> DecodeHeader(const unsigned char* buf, const std::string& path);

// Little-endian scalar access.
template <typename T>
inline void Put(unsigned char* buf, uint64_t offset, T value) {
  std::memcpy(buf + offset, &value, sizeof(T));
}
template <typename T>
inline T Get(const unsigned char* buf, uint64_t offset) {
  T value;
  std::memcpy(&value, buf + offset, sizeof(T));
  return value;
}

// "<what> <path>: <strerror> (errno N)" with a code chosen from errno (see WriteShard).
Status ErrnoError(const std::string& what, const std::string& path, int err);

}  // namespace retort::checkpoint::internal
