// Files that hold credentials (certificates, keys, bearer tokens), as the coordinator's and the
// clients' flags name them. One reading of each for both sides.
#pragma once

#include <string>

#include "common/status.h"

namespace retort {

// `s` without surrounding spaces, tabs and newlines (token files, certificate subject parts).
std::string TrimWhitespace(const std::string& s);

// OK when `path` is empty or readable; else INVALID_ARGUMENT "--FLAG=PATH: why".
Status CheckReadableFlagFile(const std::string& path, const char* flag);

// A bearer token file: its content without surrounding whitespace. INVALID_ARGUMENT naming
// the file when it cannot be read, holds no token, or holds more than one word.
StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace retort
