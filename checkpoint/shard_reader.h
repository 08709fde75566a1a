// Reading checkpoint shards (shard_file.h has their format) back at any world size: the
// manifest's plan says which old ranks hold a requested range; only their files are opened and
// only the chunks that hold the range are read (pread), each verified against the chunk CRC
// table.
//
// Threading: every function is thread-safe and blocking (local file I/O, no deadline).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/shard_file.h"
#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::checkpoint {

struct RangeState {
  // From the first shard read; range_offset/range_count are the requested range, rank is the
  // rank of the shard the header came from.
  ShardHeader header;
  std::vector<float> params, exp_avg, exp_avg_sq;
};

// Reads elements [offset, offset+count) of the three arrays from the shards `manifest` lists
// (manifest.plan() has the ranges of the writing generation, manifest.files() the file of each
// rank), opening only overlapping files and reading only the chunks that hold the range.
// Verifies the manifest (plan tiles [0, total_elements), one file per rank), each opened file's
// size against the manifest, its header (magic, version, CRC, rank and range against the plan,
// generation and step against the manifest), the chunk table CRC, the CRC of every chunk read,
// and that all opened shards agree on generation, seed, steps and epoch. Any mismatch ->
// DATA_LOSS naming the file (and chunk). A range outside [0, total_elements) -> OUT_OF_RANGE.
// count == 0 reads one header (of the shard holding `offset`) and no data.
StatusOr<RangeState> ReadRange(const std::string& dir, const v1::CheckpointManifest& manifest,
                               int64_t offset, int64_t count);

// Where ReadRangeInto puts elements [offset, offset+count): count floats each.
struct RangeBuffers {
  float* params = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
};

// ReadRange into caller-owned memory (e.g. the rank's own optimizer state), without the
// intermediate vectors. Same checks and errors; returns the header as RangeState.header. On
// error the buffers may hold part of the range.
StatusOr<ShardHeader> ReadRangeInto(const std::string& dir, const v1::CheckpointManifest& manifest,
                                    int64_t offset, int64_t count, const RangeBuffers& out);

// Reads every file the manifest lists in full and checks its size and whole-file CRC32C
// against the manifest (a thorough check for tools and tests). Mismatch -> DATA_LOSS.
Status VerifyCheckpoint(const std::string& dir, const v1::CheckpointManifest& manifest);

}  // namespace retort::checkpoint
