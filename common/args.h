// A small typed command-line parser with generated --help. No globals: each binary builds
// one ArgParser in main() and binds flags to fields of its own options struct.
// Accepts --name=value, --name value, --bool, --no-bool, and positional arguments.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
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
  // --log-level (debug, info, warning or error): applies `default_level` now and the flag's
  // value while parsing (SetLogLevel, common/logging.h); an unknown level is a parse error
  // naming it. Every binary that logs has it.
  void AddLogLevel(const std::string& default_level = "info");
  // Free text appended to --help (e.g. a list of subcommands or examples).
  void SetEpilog(std::string epilog) { epilog_ = std::move(epilog); }

  // Parses argv[first..argc). Returns true when the program should continue, false when --help
  // was printed to stdout. Errors name the offending flag and end with "(see --help)".
  StatusOr<bool> Parse(int argc, char** argv, int first = 1);
  // Parse as every retort main reports it: an error is printed to stderr as
  // "<program>: <message>" and gives exit code 2, --help gives 0; nullopt means carry on:
  //   if (auto code = args.ParseOrExitCode(argc, argv, "retort-worker")) return *code;
  std::optional<int> ParseOrExitCode(int argc, char** argv, const char* program);
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
// A step window "A:B" (or "A" for one step) with 1 <= A <= B; the error names `flag` and the
// text.
StatusOr<std::pair<int64_t, int64_t>> ParseStepWindow(const std::string& flag,
                                                      const std::string& text);

}  // namespace retort
