// `retort-coordinator --check-job=FILE`: the coordinator's own job-spec rules (parsing, defaults,
// ranges and cross-field rules of coordinator/job_spec.h, then the pre-flight checks of
// coordinator/job_preflight.h) applied to one file without starting anything, so that other
// tools (the Python package, deploy/validate) ask the coordinator instead of re-implementing
// the rules.
//
// Output: text, or with `json` one JSON object on stdout:
//   {"valid": true,  "job": {...}}       the spec with its defaults filled in (protobuf JSON
//                                        mapping, proto field names, every field printed;
//                                        64-bit integers as strings, as that mapping prints them)
//   {"valid": false, "error": "..."}     the first rule broken, naming the field
// Exit status: 0 valid, 2 invalid (or unreadable).
#pragma once

#include <string>

namespace retort::tools {

// FILE "-" reads the spec from standard input. check_paths: also check that local dataset and
// model paths exist on this host (--no-check-paths turns it off).
int CheckJobFile(const std::string& path, bool json, bool check_paths);

}  // namespace retort::tools
