// Durable coordinator state in --state-dir/state.json (retort.v1.CoordinatorState as JSON),
// replaced atomically (temp, fsync, rename, fsync dir). A corrupt or unreadable state file (one
// that does not parse, or holds a negative parameter count) is an error: the coordinator refuses
// to start rather than overwrite it.
// Thread-compatible: the Coordinator serialises calls under its own lock.
#pragma once

#include <string>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

// The file-writing seam of the store (leveldb's Env, narrowed to the one call the store makes),
// so tests can inject disk-full and failing writes. Implementations must be thread-safe.
class StateFileWriter {
 public:
  virtual ~StateFileWriter() = default;
  // Same contract as WriteFileAtomically (common/file_util.h): the old or the new content.
  virtual Status WriteAtomically(const std::string& path, const std::string& contents) = 0;
};

// The real file system (WriteFileAtomically). A process-wide stateless instance.
StateFileWriter* DefaultStateFileWriter();

class JobStateFile {
 public:
  // `writer` is borrowed (nullptr: DefaultStateFileWriter()).
  explicit JobStateFile(std::string dir, StateFileWriter* writer = nullptr)
      : dir_(std::move(dir)), writer_(writer ? writer : DefaultStateFileWriter()) {}

  // Creates the directory if needed. Returns NOT_FOUND when no state was saved yet.
  StatusOr<v1::CoordinatorState> Load();
  Status Save(const v1::CoordinatorState& state);
  const std::string& dir() const { return dir_; }
  std::string path() const { return dir_ + "/state.json"; }

 private:
  std::string dir_;
  StateFileWriter* writer_;
};

}  // namespace retort::coordinator
