// How every retort binary ends. A main parses its flags into a config, runs, and hands the
// Status it got to ExitCode, which prints the error and picks the documented exit status:
//
//   int main(int argc, char** argv) {
//     Config config;
//     ArgParser args(...);
//     RegisterFlags(args, &config);
//     if (auto code = args.ParseOrExitCode(argc, argv, kProgram)) return *code;
//     return tools::ExitCode(kProgram, Run(config));
//   }
//
// Usage errors (flags, a job spec, a device or address that cannot work) are INVALID_ARGUMENT;
// UsageError turns a Status of any code into one. Header-only; thread-compatible.
#pragma once

#include <cstdio>
#include <string>

#include "common/args.h"
#include "common/status.h"

namespace retort::tools {

inline constexpr int kExitOk = 0;     // done as asked
inline constexpr int kExitError = 1;  // an error while running (the message says which)
inline constexpr int kExitUsage = 2;  // the flags or the job cannot work: nothing ran

// --signal-exit-code: the exit status when SIGTERM/SIGINT ends a process whose job has not ended.
// The default, 0, treats the signal as a requested stop, as retort-run and the Slurm script do
// (a worker leaves at a step boundary and is not restarted). A supervisor that counts exit 0 as
// "done for good" passes 143 (128 + SIGTERM): the Kubernetes Jobs then retry an evicted pod
// instead of completing it.
inline constexpr int kExitSignalledDefault = 0;
inline void AddSignalExitCodeFlag(ArgParser& args, int* code) {
  args.AddInt("signal-exit-code", code,
              "exit status when SIGTERM/SIGINT ends this process before its job ended (0: a "
              "requested stop; 143 for supervisors that must retry it, e.g. Kubernetes Jobs)");
}
inline Status CheckSignalExitCode(int code) {
  if (code < 0 || code > 255)
    return InvalidArgumentError("--signal-exit-code must be 0..255, got " + std::to_string(code));
  return Status::Ok();
}

// `s` (not OK) as a usage error, its message prefixed with `what: ` when `what` is not empty.
inline Status UsageError(const Status& s, const std::string& what = "") {
  return InvalidArgumentError(what.empty() ? s.message() : what + ": " + s.message());
}

// `s` as an error while running (kExitError) whatever its code: for a step past the flags whose
// INVALID_ARGUMENT is not a usage error of this binary. The message is kept.
inline Status RunError(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument ? InternalError(s.message()) : s;
}

// kExitOk for OK. Otherwise prints "PROGRAM: MESSAGE" to stderr and returns kExitUsage for
// INVALID_ARGUMENT and kExitError for any other code (whose name leads the message).
inline int ExitCode(const char* program, const Status& s) {
  if (s.ok()) return kExitOk;
  const bool usage = s.code() == StatusCode::kInvalidArgument;
  std::fprintf(stderr, "%s: %s\n", program, usage ? s.message().c_str() : s.ToString().c_str());
  return usage ? kExitUsage : kExitError;
}

}  // namespace retort::tools
