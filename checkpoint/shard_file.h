// Coordinated-checkpoint shard files: each rank of a generation writes the part of the
// ZeRO-1 optimizer state it owns (its contiguous range of the flat float32 parameter buffer:
// params, exp_avg, exp_avg_sq) into one file in the checkpoint directory the coordinator named,
// and acks the returned v1::CheckpointFile; the coordinator commits MANIFEST.json last. A
// reader at any world size M reads any element range back (shard_reader.h) by opening only the
// shards that overlap it and reading only the byte ranges it needs (pread), verifying a CRC32C
// for every chunk it touches.
//
// File layout of <dir>/shard-<rank, 5 digits>.bin (all integers little-endian, version 1):
//
//   [0, 4096)          header (fixed size; the data starts page-aligned)
//       0   8  magic "RTCKPT01"
//       8   4  u32 format version (1)
//      12   4  u32 header bytes (4096)
//      16   4  i32 rank             20   4  i32 world_size
//      24   8  u64 generation       32   8  u64 seed
//      40   8  i64 global_step      48   8  i64 optimizer_step
//      56   8  i64 epoch            64   8  i64 step_in_epoch
//      72   8  i64 total_elements   80   8  i64 range_offset      88  8  i64 range_count
//      96   4  u32 arrays (3)      100   4  u32 element bytes (4, IEEE float32)
//     104   8  u64 chunk bytes C (a multiple of 4; default 1 MiB)
//     112   8  u64 chunks per array K = ceil(4 * range_count / C)
//     120   8  u64 data offset (4096)
//     128   8  u64 chunk table offset T = 4096 + 3 * 4 * range_count
//     136   8  u64 file bytes = T + 3 * K * 4 + 16
//     144 ...  zero
//    4092   4  u32 CRC32C of header bytes [0, 4092)
//   [4096, T)          params[range_count], exp_avg[range_count], exp_avg_sq[range_count]
//   [T, T + 12K)       u32 CRC32C of every chunk: array-major, chunk k of an array covers its
//                      bytes [k*C, min((k+1)*C, 4*range_count))
//   last 16 bytes      u32 CRC32C of the chunk table, u32 zero, end magic "RTCKEND1"
//
// The ack's crc32c covers the whole file; the writer derives it from the chunk CRCs
// (crc32c_combine.h), so the data is read once while writing.
//
// Threading: every function is thread-safe and blocking (local file I/O, no deadline: a hung
// disk hangs the caller, as any write(2) would). Writing distinct ranks into one directory
// concurrently is fine. Little-endian hosts only (checked at compile time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::checkpoint {

struct ShardHeader {
  int32_t rank = 0;
  int32_t world_size = 0;
  // Must equal the manifest's generation and step (ReadRange checks both).
  uint64_t generation = 0;
  uint64_t seed = 0;
  int64_t global_step = 0;
  int64_t optimizer_step = 0;
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  int64_t total_elements = 0;
  int64_t range_offset = 0;
  int64_t range_count = 0;
};

// Borrowed view of one rank's state: range_count floats each. Pointers may be null when
// range_count is 0.
struct ShardView {
  ShardHeader header;
  const float* params = nullptr;
  const float* exp_avg = nullptr;
  const float* exp_avg_sq = nullptr;
};

struct WriteOptions {
  // CRC granularity; a reader verifies (and reads) whole chunks. Multiple of 4, in [4, 1 GiB].
  uint64_t chunk_bytes = 1 << 20;
  // Start writeback (sync_file_range) every this many bytes so the closing fsync has little
  // left to flush; 0 = only the closing fsync.
  uint64_t writeback_every_bytes = 64ull << 20;
};

// "shard-00003.bin".
std::string ShardFileName(int32_t rank);

// Writes <dir>/shard-<rank>.bin: a temp file in dir (created if missing), large writes,
// fsync, rename, fsync of dir. Returns the ack entry (path relative to dir, size, whole-file
// CRC32C, rank). Bad header -> INVALID_ARGUMENT. An I/O error removes the temp file and returns
// an error naming the path, the operation and the errno text: RESOURCE_EXHAUSTED for ENOSPC,
// EDQUOT and EFBIG, PERMISSION_DENIED for EACCES, EPERM and EROFS, INTERNAL otherwise (EIO);
// no other file in dir is touched (an existing file of the same rank is replaced only by a
// successful write). A process that sets RLIMIT_FSIZE must ignore SIGXFSZ to get EFBIG instead
// of being killed. The caller sets header.generation and header.global_step to the
// checkpoint's generation and step: ReadRange checks them against the manifest.
StatusOr<v1::CheckpointFile> WriteShard(const std::string& dir, const ShardView& shard,
                                        const WriteOptions& options = WriteOptions());

}  // namespace retort::checkpoint
