// The job's checkpoint directory on disk. Checkpoint N is the folder ckpt-0000000N: members write
// their shard files into it, and the Coordinator writes its MANIFEST.json last, atomically. A
// checkpoint without a manifest does not exist; a manifest whose files are missing or of another
// size makes the checkpoint unusable.
//
// Holds no state but the directory's path: every call reads or changes the disk. Thread-safe in
// that sense; the Coordinator calls it under its lock where the order of changes matters
// (commit, retention, abort).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

class CheckpointFiles {
 public:
  explicit CheckpointFiles(std::string root) : root_(std::move(root)) {}

  // "ckpt-%08u" of `id`.
  static std::string DirName(uint64_t id);
  // <root>/DirName(id).
  std::string Dir(uint64_t id) const { return root_ + "/" + DirName(id); }

  // Why the committed checkpoint `id` cannot be used, empty when it can: its manifest must
  // parse, name this checkpoint, list at least one file, and every file it lists must exist with
  // the recorded size.
  std::string Problem(uint64_t id) const;

  // DATA_LOSS naming the first of `files` (relative to Dir(id)) that is missing or not of its
  // recorded size.
  Status CheckFiles(uint64_t id, const std::vector<v1::CheckpointFile>& files) const;

  // Writes `manifest` as Dir(manifest.checkpoint_id())/MANIFEST.json, atomically: the commit.
  Status WriteManifest(const v1::CheckpointManifest& manifest) const;

  // The manifest of `id`: NOT_FOUND when it has none, DATA_LOSS when it does not parse.
  StatusOr<v1::CheckpointManifest> ReadManifest(uint64_t id) const;

  // Deletes Dir(id) and what is in it. A failure is logged, not returned: callers delete
  // checkpoints that no longer exist for restores (aborted, or dropped from the committed list).
  void Remove(uint64_t id) const;

  // Removes what no committed checkpoint needs: folders of checkpoints not in `committed` (a
  // worker killed mid-write, a disk that filled up) and shard temp files (*.tmp*) in the rest.
  void RemoveDebris(const std::set<uint64_t>& committed) const;

 private:
  std::string root_;
};

// At a coordinator's start: checks the committed checkpoints `state` lists (state.json), drops
// unusable ones, falling back to the newest usable one, and refuses (FAILED_PRECONDITION, naming
// each checkpoint and its problem) when none is usable, unless `restart_from_scratch` (then the
// job forgets them and starts from step 0). Removes the debris of uncommitted checkpoints first.
Status ReconcileCheckpoints(const CheckpointFiles& files, bool restart_from_scratch,
                            v1::CoordinatorState* state);

}  // namespace retort::coordinator
