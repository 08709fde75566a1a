// Durable coordinator state in --state-dir/state.json (retort.v1.CoordinatorState as JSON),
// replaced atomically (temp, fsync, rename, fsync dir). A corrupt or unreadable state file is
// an error: the coordinator refuses to start rather than overwrite it.
// Thread-compatible: the Coordinator serialises calls under its own lock.
#pragma once

#include <string>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

class StateStore {
 public:
  explicit StateStore(std::string dir) : dir_(std::move(dir)) {}

  // Creates the directory if needed. Returns NOT_FOUND when no state was saved yet.
  StatusOr<v1::CoordinatorState> Load();
  Status Save(const v1::CoordinatorState& state);
  const std::string& dir() const { return dir_; }
  std::string path() const { return dir_ + "/state.json"; }

 private:
  std::string dir_;
};

}  // namespace retort::coordinator
