// Helpers shared by the libFuzzer harnesses: a scratch directory per process, plain file writes
// (no fsync: the harness's own files need no durability), and splitting an input into parts.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

namespace retort::fuzz {

// A directory of this process under $TMPDIR (default /tmp), removed when the process exits
// normally. Created on first use.
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/retort_fuzz_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string copy = tmpl;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(copy, ec);
    });
    return tmpl;
  }();
  return dir;
}

// Empties `dir` (creating it if needed).
inline void ResetDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
}

inline void MakeDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
}

inline void WriteFile(const std::string& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  if (!bytes.empty()) (void)std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// {before, after} the first `separator`; {input, ""} and found = false when there is none.
inline std::pair<std::string_view, std::string_view> SplitAt(std::string_view input,
                                                             std::string_view separator,
                                                             bool* found = nullptr) {
  const size_t at = input.find(separator);
  if (found) *found = at != std::string_view::npos;
  if (at == std::string_view::npos) return {input, {}};
  return {input.substr(0, at), input.substr(at + separator.size())};
}

}  // namespace retort::fuzz
