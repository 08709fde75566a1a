// Durable file helpers. WriteFileAtomically is the only way retort writes state that must
// survive a crash: write a temp file in the same directory, fsync it, rename over the target,
// fsync the directory. A crash at any point leaves either the old or the new content.
#pragma once

#include <string>

#include "common/status.h"

namespace retort {

Status WriteFileAtomically(const std::string& path, const std::string& contents);
StatusOr<std::string> ReadFileToString(const std::string& path);
// mkdir -p. OK when it already exists as a directory.
Status MakeDirectories(const std::string& path);
bool PathExists(const std::string& path);
// fsync of a directory so that a rename inside it is durable.
Status SyncDirectory(const std::string& dir);

}  // namespace retort
