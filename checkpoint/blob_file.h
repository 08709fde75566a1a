// Whole-file blobs a checkpoint holds beside the optimizer shards, such as the student's
// buffers (BatchNorm statistics). Each is acked and listed in the manifest as a
// v1::CheckpointFile with a non-empty `kind`; shard readers ignore files with a kind, and a
// blob is read back whole and checked against the manifest's size and CRC32C.
//
// Threading: thread-safe, blocking local file I/O (no deadline, as shard_file.h).
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::checkpoint {

// The student's buffers (trainer/model_buffers.h blob), written by rank 0.
inline constexpr char kModelBuffersKind[] = "model_buffers";
inline constexpr char kModelBuffersFile[] = "model-buffers.bin";

// Writes <dir>/<name> atomically (common/file_util.h) and returns its manifest entry.
StatusOr<v1::CheckpointFile> WriteBlobFile(const std::string& dir, const std::string& name,
                                           const std::string& kind, int rank, const void* data,
                                           size_t bytes);
// The manifest's file of `kind`, or null when it lists none.
const v1::CheckpointFile* FindFileOfKind(const v1::CheckpointManifest& manifest,
                                         const std::string& kind);
// Reads <dir>/<file.path()> whole. DATA_LOSS naming the file when its size or CRC32C differs
// from the manifest entry or the path is not relative without '..'.
StatusOr<std::string> ReadBlobFile(const std::string& dir, const v1::CheckpointFile& file);

}  // namespace retort::checkpoint
