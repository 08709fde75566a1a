// A small typed command-line parser with generated --help. No globals: each binary builds
// one ArgParser in main() and binds flags to fields of its own options struct.
// Accepts --name=value, --name value, --bool, --no-bool, and positional arguments.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace retort {

class ArgParser {
 public:
  ArgParser(std::string usage, std::string summary);

  // Each Add* binds a flag to `out`; the value in *out when Add* is called is the default.
  void AddString(const std::string& name, std::string* out, const std::string& help);
  void AddInt(const std::string& name, int64_t* out, const std::string& help);
  void AddInt(const std::string& name, int* out, const std::string& help);
  void AddDouble(const std::string& name, double* out, const std::string& help);
  void AddBool(const std::string& name, bool* out, const std::string& help);
  // A repeatable flag: each occurrence appends.
  void AddStringList(const std::string& name, std::vector<std::string>* out,
                     const std::string& help);
  // Positional arguments are taken in order; optional ones must come after required ones.
  void AddPositional(const std::string& name, std::string* out, const std::string& help,
                     bool required);
  // Free text appended to --help (e.g. a list of subcommands or examples).
  void SetEpilog(std::string epilog) { epilog_ = std::move(epilog); }

  // Parses argv[first..argc). Returns true when the program should continue, false when --help
  // was printed to stdout. Errors name the offending flag and end with "(see --help)".
  StatusOr<bool> Parse(int argc, char** argv, int first = 1);
  std::string Help() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    bool is_bool = false;
    std::function<Status(const std::string&)> set;
  };
  struct Positional {
    std::string name;
    std::string help;
    bool required;
    std::string* out;
  };
  Flag* Find(const std::string& name);

  std::string usage_, summary_, epilog_;
  std::vector<Flag> flags_;
  std::vector<Positional> positionals_;
};

// Strict numeric parsing used by ArgParser and config loaders.
StatusOr<int64_t> ParseInt64(const std::string& text, const std::string& what);
StatusOr<double> ParseDouble(const std::string& text, const std::string& what);

}  // namespace retort
